"""Shared bits of the JSON API: how service errors become HTTP answers."""

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError

from app.bodylimit import RequestTooLarge
from app.db import is_busy
from app.errors import NotFound, UserError
from app.modelbase import parse_row_id
from app.web import render


def ids_in_range(request: Request) -> None:
    """Router dependency: an id in the path past the 64-bit range is a 404, like any id with no
    row (the route's own lookup would hand it to SQLite, which cannot take it)."""
    for name, value in request.path_params.items():
        if name.endswith("_id") and isinstance(value, str):
            digits = value.removeprefix("-").removeprefix("+")
            if digits.isascii() and digits.isdigit() and parse_row_id(digits) is None:
                raise NotFound("Not found.")


log = logging.getLogger(__name__)
BUSY_MESSAGE = "Sugo is busy writing something else (a large import?). Nothing was changed; try again in a moment."
INTERNAL_MESSAGE = "Something went wrong inside Sugo; nothing was changed. The server log has the details."


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(UserError)
    async def _user_error(request: Request, exc: UserError) -> JSONResponse:
        return _answer(request, exc.status_code, str(exc))

    @app.exception_handler(RequestTooLarge)
    async def _too_large(request: Request, exc: RequestTooLarge) -> JSONResponse:
        return _answer(request, 413, exc.detail)

    @app.exception_handler(OperationalError)
    async def _database(request: Request, exc: OperationalError):
        if is_busy(exc):
            answer = _answer(request, 503, BUSY_MESSAGE)
            answer.headers["Retry-After"] = "5"
            return answer
        log.error("database error on %s %s", request.method, request.url.path, exc_info=exc)
        return _answer(request, 500, INTERNAL_MESSAGE)  # never the SQL text

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> JSONResponse:
        return _answer(request, 404, str(exc.args[0] if exc.args else "Not found."))


def _answer(request: Request, status: int, message: str):
    if request.url.path.startswith("/api/") or request.headers.get("HX-Request") != "true":
        if not request.url.path.startswith("/api/") and "text/html" in request.headers.get("accept", ""):
            return render(request, "error.html", {"status": status, "message": message}, status_code=status)
        return JSONResponse({"detail": message}, status_code=status)
    # HTMX: show the message in the page's toast area instead of swapping the target.
    return render(
        request, "partials/toast.html", {"message": message, "kind": "error"}, status_code=status,
        headers={"HX-Retarget": "#toasts", "HX-Reswap": "beforeend", "HX-Reselect": ".toast"},
    )  # fmt: skip

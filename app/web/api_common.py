"""Shared bits of the JSON API: how service errors become HTTP answers.

Decisions:
- A full disk (SQLite's "database or disk is full", or ENOSPC/EDQUOT from a file write) answers 507
  Insufficient Storage with one sentence, on pages and in the API alike: the request's transaction was
  rolled back, so nothing was changed, and the user learns what to free rather than "something went wrong".
- A 422 names each field and what was wrong with it, and echoes at most MAX_ECHOED_INPUT characters of
  the value sent: a 2 MB body sent back in full helps nobody and costs the same again on the way out.
"""

import errno
import json
import logging

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError

from app.platform.core.errors import NotFound, UserError
from app.platform.db import is_busy, is_disk_full
from app.platform.modelbase import parse_row_id
from app.web.bodylimit import RequestTooLarge
from app.web.templates import render


def ids_in_range(request: Request) -> None:
    """Router dependency: an id in the path past the 64-bit range is a 404, like any id with no
    row (the route's own lookup would hand it to SQLite, which cannot take it)."""
    for name, value in request.path_params.items():
        if name.endswith("_id") and isinstance(value, str):
            digits = value.removeprefix("-").removeprefix("+")
            if digits.isascii() and digits.isdigit() and parse_row_id(digits) is None:
                raise NotFound("Not found.")


log = logging.getLogger(__name__)
BUSY_MESSAGE = (
    "Sugo is busy writing something else (a large import?). Nothing was changed; try again in a moment."
)
INTERNAL_MESSAGE = "Something went wrong inside Sugo; nothing was changed. The server log has the details."
DISK_FULL_MESSAGE = "The disk is full; nothing was changed."
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
MAX_ECHOED_INPUT = 300  # characters of a refused value sent back in a 422


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(UserError)
    async def _user_error(request: Request, exc: UserError) -> JSONResponse:
        return _answer(request, exc.status_code, str(exc))

    @app.exception_handler(RequestTooLarge)
    async def _too_large(request: Request, exc: RequestTooLarge) -> JSONResponse:
        return _answer(request, 413, exc.detail)

    @app.exception_handler(OperationalError)
    async def _database(request: Request, exc: OperationalError):
        if is_disk_full(exc):
            log.error("the disk is full: %s %s was refused", request.method, request.url.path)
            return _answer(request, 507, DISK_FULL_MESSAGE)
        if is_busy(exc):
            answer = _answer(request, 503, BUSY_MESSAGE)
            answer.headers["Retry-After"] = "5"
            return answer
        log.error("database error on %s %s", request.method, request.url.path, exc_info=exc)
        return _answer(request, 500, INTERNAL_MESSAGE)  # never the SQL text

    @app.exception_handler(OSError)
    async def _os_error(request: Request, exc: OSError):
        if exc.errno in DISK_FULL_ERRNOS:
            log.error("the disk is full: %s %s was refused (%s)", request.method, request.url.path, exc)
            return _answer(request, 507, DISK_FULL_MESSAGE)
        log.error("error on %s %s", request.method, request.url.path, exc_info=exc)
        return _answer(request, 500, INTERNAL_MESSAGE)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> JSONResponse:
        return _answer(request, 404, str(exc.args[0] if exc.args else "Not found."))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(
            {"detail": [_short_echo(e) for e in jsonable_encoder(exc.errors())]}, status_code=422
        )


def _short_echo(error: dict) -> dict:
    """A validation error with its `input` cut to MAX_ECHOED_INPUT characters (a value that is not a
    string, when its JSON is longer, becomes the start of that JSON with an ellipsis)."""
    if "input" not in error:
        return error
    value = error["input"]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > MAX_ECHOED_INPUT:
        error = {**error, "input": text[:MAX_ECHOED_INPUT] + "…"}
    return error


def _answer(request: Request, status: int, message: str):
    if request.url.path.startswith("/api/") or request.headers.get("HX-Request") != "true":
        if not request.url.path.startswith("/api/") and "text/html" in request.headers.get("accept", ""):
            return render(request, "error.html", {"status": status, "message": message}, status_code=status)
        return JSONResponse({"detail": message}, status_code=status)
    # HTMX: show the message in the page's toast area instead of swapping the target.
    return render(
        request,
        "partials/toast.html",
        {"message": message, "kind": "error"},
        status_code=status,
        headers={"HX-Retarget": "#toasts", "HX-Reswap": "beforeend", "HX-Reselect": ".toast"},
    )

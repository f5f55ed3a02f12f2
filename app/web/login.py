"""Login and logout (only meaningful with SUGO_PASSWORD)."""

import secrets

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.web.auth import SESSION_COOKIE, SESSION_MAX_AGE_S, client_address, password_matches
from app.web.templates import HxRequest, render
from app.web.throttle import too_many_tries_message

router = APIRouter(include_in_schema=False)


def _safe_next(target: str | None) -> str:
    # Only same-site paths: an open redirect would let a link send you elsewhere after login.
    return target if target and target.startswith("/") and not target.startswith("//") else "/"


@router.get("/login")
def login_page(request: Request, next: str = "/") -> Response:
    """The login form."""
    if not request.app.state.services.settings.password:
        return RedirectResponse("/", status_code=303)
    return render(request, "login.html", {"next": _safe_next(next)})


@router.post("/login")
async def log_in(request: Request) -> Response:
    """Check the password and start a session."""
    services = request.app.state.services
    form = await request.form()
    target = _safe_next(str(form.get("next") or "/"))
    if not services.settings.password:
        return RedirectResponse("/", status_code=303)
    client = client_address(request.scope)
    if wait := await run_in_threadpool(services.login_throttle.wait_s, client):
        return render(
            request,
            "login.html",
            {"next": target, "error": too_many_tries_message(wait)},
            status_code=429,
            headers={"Retry-After": str(int(wait) + 1)},
        )
    if not password_matches(str(form.get("password") or ""), services.settings.password):
        await run_in_threadpool(services.login_throttle.failed, client)
        return render(request, "login.html", {"next": target, "error": "Wrong password."}, status_code=401)
    await run_in_threadpool(services.login_throttle.succeeded, client)
    token = services.session_signer.dumps({"auth": True, "csrf": secrets.token_urlsafe(32)})
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=SESSION_MAX_AGE_S,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout")
def log_out(request: Request, hx: HxRequest) -> Response:
    """End the session, and every other one (a new session key). Like every change it needs the
    CSRF token (ProtectionMiddleware): the page's button posts it through htmx."""
    if signer := request.app.state.services.session_signer:
        signer.rotate()
    response = (
        Response(status_code=204, headers={"HX-Redirect": "/login"})
        if hx
        else RedirectResponse("/login", status_code=303)
    )
    response.delete_cookie(SESSION_COOKIE)
    return response

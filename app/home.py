"""Login and logout (only meaningful with SUGO_PASSWORD)."""

import secrets

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth import SESSION_COOKIE, SESSION_MAX_AGE_S, password_matches
from app.web import render

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
    settings = request.app.state.services.settings
    form = await request.form()
    target = _safe_next(str(form.get("next") or "/"))
    if not settings.password:
        return RedirectResponse("/", status_code=303)
    if not password_matches(str(form.get("password") or ""), settings.password):
        return render(request, "login.html", {"next": target, "error": "Wrong password."}, status_code=401)
    token = request.app.state.services.session_signer.dumps({"auth": True, "csrf": secrets.token_urlsafe(32)})
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(SESSION_COOKIE, token, max_age=SESSION_MAX_AGE_S, httponly=True, samesite="lax",
                        secure=request.url.scheme == "https")  # fmt: skip
    return response


@router.post("/logout")
def log_out() -> HTMLResponse:
    """End the session."""
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response

"""Settings → Web search (the page; its JSON twin is app/tools/web/api.py)."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from app.platform import forms
from app.platform.core.errors import UserError
from app.tools.web import service
from app.tools.web.service import MAX_KEY_CHARS, WebSearchIn
from app.web.deps import FormDep, KeyBoxDep, SessionDep, SettingsDep
from app.web.templates import HxRequest, render

router = APIRouter(include_in_schema=False)
PAGE = "tools/web.html"


def _page(
    request: Request, session, settings, *, hx: bool = False, status_code: int = 200, **extra
) -> HTMLResponse:
    ctx = {"view": service.show_web_settings(session, settings), "max_key": MAX_KEY_CHARS, **extra}
    return render(request, PAGE, ctx, block="web_settings" if hx else None, status_code=status_code)


@router.get("/settings/web")
def show_web_settings_page(request: Request, session: SessionDep, settings: SettingsDep) -> HTMLResponse:
    """The Brave key, the SearXNG URL, DuckDuckGo, and what SUGO_FETCH_ALLOW lets through."""
    return _page(request, session, settings)


@router.post("/settings/web")
def save_web_settings_page(
    request: Request,
    form: FormDep,
    session: SessionDep,
    keybox: KeyBoxDep,
    settings: SettingsDep,
    hx: HxRequest,
) -> HTMLResponse:
    """Save; a refused value leaves the form as typed (HTMX swaps only the status line)."""
    typed = forms.text(form, "searxng_url")
    try:
        data = WebSearchIn(
            brave_key=forms.text(form, "brave_key") or None,
            searxng_url=typed,
            duckduckgo=forms.checkbox(form, "duckduckgo"),
        )
    except ValidationError as err:
        error = str(forms.invalid(err))
        if hx:  # the typed values stay in the browser's form; only the status line changes
            return render(
                request,
                "tools/_web_error.html",
                {"error": error},
                status_code=UserError.status_code,
                headers={"HX-Retarget": "#web-settings-status", "HX-Reswap": "innerHTML"},
            )
        return _page(request, session, settings, status_code=400, error=error, searxng_typed=typed)
    service.save_web_settings(session, keybox, data)
    return _page(request, session, settings, hx=hx, message="Saved.")


@router.post("/settings/web/brave-key/delete")
def remove_brave_key_page(
    request: Request, session: SessionDep, settings: SettingsDep, hx: HxRequest
) -> HTMLResponse:
    """Forget the saved Brave key."""
    service.remove_brave_key(session)
    return _page(request, session, settings, hx=hx, message="The Brave key was removed.")

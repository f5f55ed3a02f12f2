"""Settings → Web search as JSON (the same service calls as the page)."""

from fastapi import APIRouter
from pydantic import BaseModel

from app.tools.web import service
from app.tools.web.service import WebSearchIn
from app.web.deps import KeyBoxDep, SessionDep, SettingsDep

router = APIRouter(prefix="/api/tools/web", tags=["tools"])


class WebSearchOut(BaseModel):
    has_brave_key: bool  # the key itself is never sent back
    searxng_url: str
    duckduckgo: bool
    fetch_allow: list[str]  # SUGO_FETCH_ALLOW, read-only here


def _out(view: service.WebSearchView) -> WebSearchOut:
    return WebSearchOut(
        has_brave_key=view.has_brave_key,
        searxng_url=view.searxng_url,
        duckduckgo=view.duckduckgo,
        fetch_allow=list(view.fetch_allow),
    )


@router.get("", response_model=WebSearchOut)
def show_web_settings(session: SessionDep, settings: SettingsDep) -> WebSearchOut:
    """The web search engines' settings (whether a Brave key is saved, never the key)."""
    return _out(service.show_web_settings(session, settings))


@router.put("", response_model=WebSearchOut)
def save_web_settings(
    data: WebSearchIn, session: SessionDep, keybox: KeyBoxDep, settings: SettingsDep
) -> WebSearchOut:
    """Save the engines' settings; a `brave_key` left out or empty keeps the saved key."""
    service.save_web_settings(session, keybox, data)
    return _out(service.show_web_settings(session, settings))


@router.delete("/brave-key", response_model=WebSearchOut)
def remove_brave_key(session: SessionDep, settings: SettingsDep) -> WebSearchOut:
    """Forget the saved Brave key."""
    service.remove_brave_key(session)
    return _out(service.show_web_settings(session, settings))

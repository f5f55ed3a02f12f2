"""Settings → Web search: the Brave key (sealed with the key box, never sent back), the SearXNG URL,
DuckDuckGo on or off; and what the search chain reads from them for one search."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field, field_validator
from sqlmodel import Session

from app.connections.crypto import KeyBox
from app.platform.core.errors import UserError
from app.platform.services import Services
from app.platform.settings import Settings
from app.tools.settings import load_tool_settings, save_tool_settings
from app.tools.web.core.searxng import searxng_url
from app.tools.web.engines import EngineSetup

MAX_KEY_CHARS = 200


class WebSearchIn(BaseModel):
    brave_key: str | None = Field(
        None,
        max_length=MAX_KEY_CHARS,
        description="A new Brave Search API key; empty or absent keeps the saved one",
    )
    searxng_url: str = Field(
        "", max_length=2048, description="A SearXNG instance (http or https); empty: none"
    )
    duckduckgo: bool = Field(True, description="Try DuckDuckGo (no key) when the others give nothing")

    @field_validator("brave_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        value = (value or "").strip()
        if any(ch.isspace() for ch in value):
            raise UserError("A Brave API key has no spaces in it; paste the key alone.")
        return value or None

    # Before the length limit, so a URL too long gets the sentence saying so.
    @field_validator("searxng_url", mode="before")
    @classmethod
    def _url(cls, value: object) -> object:
        return searxng_url(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class WebSearchView:
    has_brave_key: bool
    searxng_url: str
    duckduckgo: bool
    fetch_allow: tuple[str, ...]  # SUGO_FETCH_ALLOW, shown so the owner knows what is let through


def show_web_settings(session: Session, settings: Settings) -> WebSearchView:
    tools = load_tool_settings(session)
    return WebSearchView(
        has_brave_key=bool(tools.brave_key_sealed),
        searxng_url=tools.searxng_url,
        duckduckgo=tools.duckduckgo,
        fetch_allow=settings.fetch_allow,
    )


def save_web_settings(session: Session, keybox: KeyBox, data: WebSearchIn) -> None:
    """Write in the caller's transaction; a key left empty keeps the saved one."""
    tools = load_tool_settings(session)
    if data.brave_key:
        tools.brave_key_sealed = keybox.seal(data.brave_key)
    tools.searxng_url = data.searxng_url
    tools.duckduckgo = data.duckduckgo
    save_tool_settings(session, tools)


def remove_brave_key(session: Session) -> None:
    tools = load_tool_settings(session)
    tools.brave_key_sealed = ""
    save_tool_settings(session, tools)


def engine_setup(session: Session, services: Services) -> EngineSetup:
    """What one search reads: the key unsealed here, at the last moment, and kept nowhere."""
    tools = load_tool_settings(session)
    key, key_error = "", ""
    if tools.brave_key_sealed:
        try:
            key = services.keybox.unseal(tools.brave_key_sealed)
        except ValueError:
            key_error = "the saved API key could not be decrypted (the data folder's secret.key changed)"
    return EngineSetup(
        brave_key=key,
        brave_url=services.settings.brave_url,
        searxng_url=tools.searxng_url,
        duckduckgo=tools.duckduckgo,
        allow=services.settings.fetch_allow,
        brave_key_error=key_error,
    )

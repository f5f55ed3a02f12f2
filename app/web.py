"""Jinja2 environment and the one render helper: a full page, or one named block of it for HTMX."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from app.rendering import markdown_filter
from app.timeutil import as_utc

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES_DIR = ROOT / "templates"
STATIC_DIR = ROOT / "static"


def _iso(dt: datetime | None) -> str:
    return as_utc(dt).isoformat() if dt else ""


def _short_time(dt: datetime | None) -> str:
    return as_utc(dt).strftime("%Y-%m-%d %H:%M UTC") if dt else ""


env = Environment(
    loader=FileSystemLoader(TEMPLATES_DIR),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
env.filters["markdown"] = markdown_filter
env.filters["iso"] = _iso
env.filters["short_time"] = _short_time


def is_htmx(request: Request) -> bool:
    return request.headers.get("HX-Request") == "true"


HxRequest = Annotated[bool, Depends(is_htmx)]


def render(
    request: Request,
    name: str,
    context: dict[str, Any] | None = None,
    *,
    block: str | None = None,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """Render a page, or only `block` of it (a fragment for HTMX). Always varies on HX-Request so
    a cache never serves a fragment as a page."""
    ctx = {
        "request": request,
        "csrf_token": request.scope.get("sugo.csrf", ""),
        "auth_enabled": bool(request.app.state.settings.password),
        **(context or {}),
    }
    template = env.get_template(name)
    if block:
        html = "".join(template.blocks[block](template.new_context(ctx)))
    else:
        html = template.render(ctx)
    response = HTMLResponse(html, status_code=status_code, headers=headers)
    response.headers["Vary"] = "HX-Request"
    return response


def _macros(text: str, char: str, user: str) -> str:
    from app.prompt.macros import expand_macros

    return expand_macros(text, char=char, user=user)


env.filters["macros"] = _macros

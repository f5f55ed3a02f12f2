"""Jinja2 environment and the render helpers: a full page, or named blocks of it (plus out-of-band
blocks) for HTMX."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from app.characters.core.expressions import without_expression_tag
from app.generation.reasoning import thought_label
from app.platform.rendering import markdown_filter, middle_truncate, plain_text, plural
from app.platform.timeutil import as_utc, same_minute
from app.prompt.core.macros import expand_macros

ROOT = Path(__file__).resolve().parents[2]
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
    # The templates ship with the app and change only with it (a restart): not checking each one's
    # file on every render (a stat per template, include and import) saved ~5% of a server's time
    # under bench/scale.py's load.
    auto_reload=False,
)
env.filters["markdown"] = markdown_filter
env.filters["iso"] = _iso
env.filters["short_time"] = _short_time
env.filters["plural"] = plural
env.filters["plain"] = plain_text
env.filters["middle_truncate"] = middle_truncate
env.filters["thought_label"] = thought_label
# A reply's [expression: name] tag picks the picture beside the story and is never shown.
env.filters["without_expression_tag"] = without_expression_tag
env.tests["same_minute"] = same_minute
# A global rather than an import in each template: a block rendered on its own never runs the
# template's top-level imports.
env.globals["icon"] = env.get_template("partials/icons.html").module.icon


def is_htmx(request: Request) -> bool:
    return request.headers.get("HX-Request") == "true"


HxRequest = Annotated[bool, Depends(is_htmx)]


def _context(request: Request, context: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "request": request,
        "csrf_token": request.scope.get("sugo.csrf", ""),
        "auth_enabled": bool(request.app.state.services.settings.password),
        **(context or {}),
    }


def _respond(html: str, status_code: int, headers: dict[str, str] | None) -> HTMLResponse:
    response = HTMLResponse(html, status_code=status_code, headers=headers)
    # One URL may answer a page or a fragment: a cache must never serve one for the other.
    response.headers["Vary"] = "HX-Request"
    return response


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
    if block:
        return render_blocks(request, name, context, [block], status_code=status_code, headers=headers)
    return _respond(env.get_template(name).render(_context(request, context)), status_code, headers)


def render_blocks(
    request: Request,
    name: str,
    context: dict[str, Any] | None = None,
    blocks: Sequence[str] = (),
    *,
    oob: Sequence[str] = (),
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """Render `blocks` of a page (what the request's target gets), then the `oob` blocks for what
    else changed: those are rendered with `oob` true, and each puts hx-swap-oob on its root
    element. With the "content" block comes the page's <title>, which htmx sets: that fragment
    is a whole page's change (say, after creating something, its page)."""
    template = env.get_template(name)
    ctx = _context(request, context)
    parts = []
    if "content" in blocks:
        parts.append(f"<title>{''.join(template.blocks['title'](template.new_context(ctx))).strip()}</title>")
    parts += ["".join(template.blocks[b](template.new_context(ctx))) for b in blocks]
    oob_ctx = {**ctx, "oob": True}
    parts += ["".join(template.blocks[b](template.new_context(oob_ctx))) for b in oob]
    return _respond("\n".join(parts), status_code, headers)


def _macros(text: str, char: str, user: str) -> str:
    return expand_macros(text, char=char, user=user)


env.filters["macros"] = _macros


def _pretty_json(text: str | None, limit: int = 4000) -> str:
    """A tool call's arguments (JSON text as the model wrote it) indented for reading; kept as written
    when it is not JSON. Cut at `limit` characters (the page shows a call, it does not archive it)."""
    raw = text or ""
    try:
        raw = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    return raw if len(raw) <= limit else raw[:limit] + f"\n… ({len(raw) - limit:,} more characters)"


env.filters["pretty_json"] = _pretty_json

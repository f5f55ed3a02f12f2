"""Security headers on every answer. The Content-Security-Policy lets the pages run only our own
script files, plus the inline scripts of the templates named at start (the theme bootstrap, which
must run before first paint), each allowed by its SHA-256: text slipped into a page by a message,
a card or a lorebook can neither run script nor load anything from elsewhere. Nothing may frame the
pages (clickjacking), and no page address leaves for another site in a Referer."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def inline_script_hashes(html: str) -> list[str]:
    """CSP sources ('sha256-…') for the inline <script> elements in a template or page; their text
    is hashed exactly as written, as the browser does."""
    return [
        f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"
        for body in _INLINE_SCRIPT.findall(html)
    ]


def content_security_policy(script_hashes: Iterable[str] = (), *, docs: bool = False) -> str:
    """The policy: same-origin everything, no plugins, no <base> change, forms post only here,
    never framed. htmx is configured (base.html) not to inject its indicator <style>, and no template
    uses hx-on or js: values, so neither inline styles nor eval are needed. The API docs page
    (Swagger UI) sets inline styles and draws its icons from data: URLs."""
    style, img = ("'self' 'unsafe-inline'", "'self' data:") if docs else ("'self'", "'self'")
    scripts = " ".join(["'self'", *script_hashes])
    return "; ".join(
        (
            "default-src 'self'",
            f"script-src {scripts}",
            f"style-src {style}",
            f"img-src {img}",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
            "worker-src 'self'",
            "manifest-src 'self'",
        )
    )


class SecurityHeaders:
    """Adds the headers to every HTTP answer; an answer that sets its own policy (the API docs
    page) keeps it."""

    def __init__(self, app: ASGIApp, *, templates: Iterable[str] = ()) -> None:
        self.app = app
        hashes = [h for text in templates for h in inline_script_hashes(text)]
        self.headers = [
            (b"content-security-policy", content_security_policy(hashes).encode()),
            (b"x-frame-options", b"DENY"),
            # Not no-referrer: under it a browser sends `Origin: null` with the pages' own form posts,
            # which the cross-site check (app/web/auth.py) must refuse.
            (b"referrer-policy", b"same-origin"),
            (b"x-content-type-options", b"nosniff"),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in self.headers if name not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)

"""Protection. Always: state-changing requests from another site are refused (a page elsewhere
cannot post to your local Sugo). With SUGO_PASSWORD set: every request needs the login session
(or `Authorization: Bearer <password>` for API clients), and session-authenticated changes need
the CSRF token in the X-CSRF-Token header."""

from __future__ import annotations

import hmac
import json
import logging
import secrets
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import quote, urlsplit

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)

SESSION_COOKIE = "sugo_session"
SESSION_MAX_AGE_S = 30 * 24 * 3600
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
OPEN_PATHS = ("/login", "/healthz", "/static/")


def load_session_secret(path: Path) -> str:
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(48)
    path.write_text(secret)
    path.chmod(0o600)
    return secret


def password_matches(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


class SessionSigner:
    def __init__(self, secret: str) -> None:
        self._s = URLSafeTimedSerializer(secret, salt="sugo-session")

    def dumps(self, data: dict) -> str:
        return self._s.dumps(data)

    def loads(self, token: str) -> dict | None:
        try:
            return self._s.loads(token, max_age=SESSION_MAX_AGE_S)
        except BadSignature:
            return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def _is_cross_site(scope: Scope) -> bool:
    if _header(scope, b"sec-fetch-site") == "cross-site":
        return True
    origin = _header(scope, b"origin")
    if not origin or origin == "null":
        return origin == "null"
    host = _header(scope, b"host") or ""
    return urlsplit(origin).netloc != host


class ProtectionMiddleware:
    def __init__(self, app: ASGIApp, *, password: str | None, signer: SessionSigner | None) -> None:
        self.app = app
        self.password = password
        self.signer = signer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        path = scope["path"]
        if method not in SAFE_METHODS and _is_cross_site(scope):
            await _deny(scope, send, 403, "Cross-site request refused.")
            return
        if not self.password:
            await self.app(scope, receive, send)
            return

        bearer = _header(scope, b"authorization") or ""
        if bearer.lower().startswith("bearer ") and password_matches(bearer[7:].strip(), self.password):
            await self.app(scope, receive, send)
            return

        session = self._read_session(scope)
        scope["sugo.session"] = session
        if session.get("auth"):
            scope["sugo.csrf"] = session.get("csrf", "")
            if method not in SAFE_METHODS and path != "/logout":
                token = _header(scope, b"x-csrf-token") or ""
                if not session.get("csrf") or not hmac.compare_digest(token, session["csrf"]):
                    await _deny(scope, send, 403, "Missing or wrong CSRF token. Reload the page and try again.")
                    return
            await self.app(scope, receive, send)
            return
        if path == "/login" or path == "/healthz" or path.startswith("/static/"):
            await self.app(scope, receive, send)
            return
        await _deny(scope, send, 401, "Log in first.")

    def _read_session(self, scope: Scope) -> dict:
        raw = _header(scope, b"cookie")
        if not raw or not self.signer:
            return {}
        cookie = SimpleCookie()
        try:
            cookie.load(raw)
        except Exception:
            return {}
        morsel = cookie.get(SESSION_COOKIE)
        return (self.signer.loads(morsel.value) if morsel else None) or {}


async def _deny(scope: Scope, send: Send, status: int, message: str) -> None:
    path = scope["path"]
    wants_html = "text/html" in (_header(scope, b"accept") or "") and not path.startswith("/api/")
    if status == 401 and wants_html and scope["method"] == "GET":
        target = path + (("?" + scope["query_string"].decode()) if scope.get("query_string") else "")
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", f"/login?next={quote(target)}".encode())]})
        await send({"type": "http.response.body", "body": b""})
        return
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json")]
    if _header(scope, b"hx-request") == "true" and status == 401:
        headers.append((b"hx-redirect", b"/login"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

"""Protection. Always: a request addressed to a host name this Sugo does not answer to is refused
(a DNS-rebinding page reaches us under its own name), and state-changing requests from any other
origin are refused (a page on another site, or on another port of this computer, cannot post to
your local Sugo). With SUGO_PASSWORD set: every request needs the login session (or
`Authorization: Bearer <password>` for API clients), session-authenticated changes (logging out
included) need the CSRF token in the X-CSRF-Token header, and wrong passwords cost a growing wait
per client address.

Decision, Sugo's own origin: the scheme, host and port the browser used to reach this Sugo. The
host and port come from the Host header, once it has been checked against the names Sugo answers
to (the loopback ones and SUGO_ALLOWED_HOSTS; with "*" it is taken as it comes); the scheme is the
connection's, or what a reverse proxy named in SUGO_TRUSTED_PROXIES says in X-Forwarded-Proto
(uvicorn applies it only for those, see app/__main__.py). So behind a proxy serving https on 443
the proxy must pass the browser's Host header on and say X-Forwarded-Proto; no setting repeats the
public address. A change is accepted when its Origin (or, without one, its Referer) has exactly
that scheme, host and port, and its Sec-Fetch-Site, when sent, is `same-origin` or `none`. A
request with neither Origin nor Referer is no browser's form or fetch (curl, scripts): it passes
this check, and with a password still needs the Bearer token or a session with its CSRF token."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import re
import secrets
import time
from collections.abc import Callable, Iterable
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import quote, urlsplit

from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from app.platform.shared_secrets import SESSION, ensure_secret, read_secret, replace_secret
from app.web.throttle import LoginThrottle, too_many_tries_message

log = logging.getLogger(__name__)

SESSION_COOKIE = "sugo_session"
SESSION_MAX_AGE_S = 30 * 24 * 3600
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
OPEN_PATHS = ("/login", "/healthz", "/static/")
# What a phone fetches to install Sugo as an app and to show it is offline: no user data in them.
INSTALL_FILES = frozenset({"/manifest.webmanifest", "/sw.js"})
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
_HOST = re.compile(r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9._-]+))(?::\d{1,5})?")


def host_name(netloc: str) -> str | None:
    """The host name of a Host header or an origin's netloc ("[::1]:8000" -> "::1"), lower-case;
    None when it is not a plain name or address (user info, odd characters)."""
    match = _HOST.fullmatch(netloc.strip().lower())
    if match is None:
        return None
    return match["v6"] or match["name"].rstrip(".")


def allowed_host_names(extra: Iterable[str]) -> frozenset[str] | None:
    """The loopback names plus SUGO_ALLOWED_HOSTS; None when that list holds "*" (any host)."""
    names = set(LOOPBACK_NAMES)
    for item in extra:
        if item.strip() == "*":
            return None
        name = host_name(item) or host_name(f"[{item.strip()}]")  # a bare IPv6 address
        if name:
            names.add(name)
    return frozenset(names)


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def open_listening_refusal(host: str, *, password: str | None, allow_open: bool) -> str | None:
    """Why Sugo must not start listening on `host`, or None. Without a password anyone who can
    reach a non-loopback address could use Sugo and its saved keys."""
    if is_loopback(host) or password or allow_open:
        return None
    return (
        f"Refusing to listen on {host} without a password: anyone who can reach this address could use "
        "Sugo and the API keys saved in it. Set SUGO_PASSWORD, or listen on 127.0.0.1, or set "
        "SUGO_ALLOW_OPEN=1 if that is what you mean (for example behind a proxy that asks for a login)."
    )


def _read_file(path: Path | None) -> str | None:
    if path is None or not path.exists():
        return None
    return path.read_text().strip() or None


def password_matches(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


class SessionSigner:
    """Signs the login cookie with a key derived from the database's session secret and the
    password: a new password ends every session, and so does logging out, which replaces the secret
    (every device logs in again, on every server: each reads the secret again at most every
    `refresh_s`, off the event loop, see ProtectionMiddleware)."""

    def __init__(
        self,
        engine: Engine,
        password: str,
        *,
        carried_over: Path | None = None,
        refresh_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._password = password
        self._refresh_s = refresh_s
        self._clock = clock
        # The session.key file of a Sugo before the secret moved into the database: its cookies keep
        # working. The file goes once the database holds the secret (one place, not two).
        secret = ensure_secret(engine, SESSION, lambda: _read_file(carried_over) or secrets.token_urlsafe(48))
        if carried_over is not None:
            carried_over.unlink(missing_ok=True)
        self._use(secret)

    def _use(self, secret: str) -> None:
        self._secret = secret
        self._read_at = self._clock()
        key = hmac.new(secret.encode(), self._password.encode(), hashlib.sha256).hexdigest()
        self._s = URLSafeTimedSerializer(key, salt="sugo-session")

    def stale(self) -> bool:
        """Time to read the secret again (another server may have replaced it)."""
        return self._clock() - self._read_at >= self._refresh_s

    def refresh(self) -> None:
        found = read_secret(self._engine, SESSION)
        if found is None:  # cannot happen once made; keep the one in hand rather than fail requests
            self._read_at = self._clock()
            return
        if found[0] != self._secret:
            self._use(found[0])
        else:
            self._read_at = self._clock()

    def rotate(self) -> None:
        """End every session, on every server: a new secret."""
        secret = secrets.token_urlsafe(48)
        replace_secret(self._engine, SESSION, secret)
        self._use(secret)

    def dumps(self, data: dict) -> str:
        return self._s.dumps(data)

    def loads(self, token: str) -> dict | None:
        try:
            return self._s.loads(token, max_age=SESSION_MAX_AGE_S)
        except BadSignature:
            return None


def client_address(scope: Scope) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]  # scheme, host name, port


def parse_origin(value: str) -> Origin | None:
    """(scheme, host, port) of an Origin header or of a URL's beginning (a Referer); None for
    "null", another scheme, or anything odd (user info, a bad port)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or "@" in parts.netloc:
        return None
    host = host_name(parts.netloc)
    return (scheme, host, port or DEFAULT_PORTS[scheme]) if host else None


def own_origin(scheme: str, host_header: str | None) -> Origin | None:
    """Sugo's origin as the browser sees it for this request (see the module's docstring)."""
    return parse_origin(f"{scheme}://{host_header}") if host_header else None


def _show(origin: Origin | None, raw: str) -> str:
    if origin is None:
        return raw[:100] or "an unknown page"
    scheme, host, port = origin
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" + ("" if DEFAULT_PORTS[scheme] == port else f":{port}")


def cross_origin_refusal(
    *, scheme: str, host: str | None, origin: str | None, referer: str | None, fetch_site: str | None
) -> str | None:
    """Why a change must be refused as coming from another origin, or None. The browser says where
    a request comes from (Origin; Referer when an older one leaves Origin out; Sec-Fetch-Site); a
    page on another port of the same computer is "same-site" to it, and another origin to us."""
    source = origin if origin is not None else referer
    if source is not None:
        own, theirs = own_origin(scheme, host), parse_origin(source)
        if own is None or theirs != own:
            return (
                f"Refused: this change came from {_show(theirs, source)}, not from this Sugo "
                f"({_show(own, host or '')}). Behind a reverse proxy, pass the browser's Host header on and "
                "name the proxy in SUGO_TRUSTED_PROXIES so its X-Forwarded-Proto counts."
            )
    if fetch_site is not None and fetch_site.strip().lower() not in ("same-origin", "none"):
        return (
            f"Refused: this change came from another page (Sec-Fetch-Site: {fetch_site.strip()[:40]}), "
            "not from Sugo's own pages."
        )
    return None  # Sugo's own page, or not a browser's form or fetch (curl, scripts)


class ProtectionMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        password: str | None,
        signer: SessionSigner | None,
        allowed_hosts: frozenset[str] | None = LOOPBACK_NAMES,
        throttle: LoginThrottle | None = None,
    ) -> None:
        self.app = app
        self.password = password
        self.signer = signer
        self.allowed_hosts = allowed_hosts
        self.throttle = throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        path = scope["path"]
        if (
            self.allowed_hosts is not None
            and host_name(_header(scope, b"host") or "") not in self.allowed_hosts
        ):
            names = ", ".join(sorted(self.allowed_hosts))
            await _deny(
                scope,
                send,
                400,
                f"This Sugo answers only at {names}. To reach it under another name "
                "or address, add that to SUGO_ALLOWED_HOSTS.",
            )
            return
        if method not in SAFE_METHODS and (
            refusal := cross_origin_refusal(
                scheme=scope.get("scheme", "http"),
                host=_header(scope, b"host"),
                origin=_header(scope, b"origin"),
                referer=_header(scope, b"referer"),
                fetch_site=_header(scope, b"sec-fetch-site"),
            )
        ):
            await _deny(scope, send, 403, refusal)
            return
        if not self.password:
            await self.app(scope, receive, send)
            return

        bearer = _header(scope, b"authorization") or ""
        if bearer.lower().startswith("bearer "):
            client = client_address(scope)
            # The throttle is counted in the database: off the event loop.
            if self.throttle and (wait := await run_in_threadpool(self.throttle.wait_s, client)):
                await _deny(scope, send, 429, too_many_tries_message(wait), retry_after=wait)
                return
            if password_matches(bearer[7:].strip(), self.password):
                if self.throttle:
                    await run_in_threadpool(self.throttle.succeeded, client)
                await self.app(scope, receive, send)
                return
            if self.throttle:
                await run_in_threadpool(self.throttle.failed, client)

        if self.signer and self.signer.stale():
            await run_in_threadpool(self.signer.refresh)
        session = self._read_session(scope)
        scope["sugo.session"] = session
        if session.get("auth"):
            scope["sugo.csrf"] = session.get("csrf", "")
            if method not in SAFE_METHODS:  # logging out too: one cross-site post would end every session
                token = _header(scope, b"x-csrf-token") or ""
                if not session.get("csrf") or not hmac.compare_digest(token, session["csrf"]):
                    await _deny(
                        scope, send, 403, "Missing or wrong CSRF token. Reload the page and try again."
                    )
                    return
            await self.app(scope, receive, send)
            return
        if path in ("/login", "/healthz") or path in INSTALL_FILES or path.startswith("/static/"):
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


async def _deny(
    scope: Scope, send: Send, status: int, message: str, *, retry_after: float | None = None
) -> None:
    path = scope["path"]
    wants_html = "text/html" in (_header(scope, b"accept") or "") and not path.startswith("/api/")
    if status == 401 and wants_html and scope["method"] == "GET":
        target = path + (("?" + scope["query_string"].decode()) if scope.get("query_string") else "")
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", f"/login?next={quote(target)}".encode())],
            }
        )
        await send({"type": "http.response.body", "body": b""})
        return
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json")]
    if retry_after is not None:
        headers.append((b"retry-after", str(int(retry_after) + 1).encode()))
    if _header(scope, b"hx-request") == "true" and status == 401:
        headers.append((b"hx-redirect", b"/login"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

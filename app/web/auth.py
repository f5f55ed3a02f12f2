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
import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
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


def _write_private(path: Path, data: str) -> None:
    # Created with owner-only permissions from the start (no moment where others could read it),
    # then moved into place, so a crash never leaves half a key.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".new")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(data)
    os.replace(tmp, path)


def load_session_secret(path: Path) -> str:
    if path.exists():
        path.chmod(0o600)
        return path.read_text().strip()
    secret = secrets.token_urlsafe(48)
    _write_private(path, secret)
    return secret


def password_matches(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


class SessionSigner:
    """Signs the login cookie with a key derived from the data folder's session.key and the
    password: a new password ends every session, and so does logging out, which replaces
    session.key (every device logs in again)."""

    def __init__(self, key_path: Path, password: str) -> None:
        self._path = key_path
        self._password = password
        self._use(load_session_secret(key_path))

    def _use(self, secret: str) -> None:
        key = hmac.new(secret.encode(), self._password.encode(), hashlib.sha256).hexdigest()
        self._s = URLSafeTimedSerializer(key, salt="sugo-session")

    def rotate(self) -> None:
        """End every session: a new session.key."""
        secret = secrets.token_urlsafe(48)
        _write_private(self._path, secret)
        self._use(secret)

    def dumps(self, data: dict) -> str:
        return self._s.dumps(data)

    def loads(self, token: str) -> dict | None:
        try:
            return self._s.loads(token, max_age=SESSION_MAX_AGE_S)
        except BadSignature:
            return None


def backoff_s(failures: int, *, free: int, first_wait_s: float, max_wait_s: float) -> float:
    """How long a client waits after `failures` wrong passwords in a row: nothing for the first
    `free` ones (typos), then a wait that doubles with each further one."""
    if failures < free:
        return 0.0
    return min(max_wait_s, first_wait_s * 2 ** (failures - free))


class LoginThrottle:
    """Wrong passwords per client address (login form and Bearer tokens alike). One per app; it
    remembers at most `max_clients` addresses, the least recently wrong forgotten first."""

    def __init__(
        self,
        *,
        free: int = 5,
        first_wait_s: float = 30.0,
        max_wait_s: float = 900.0,
        forget_after_s: float = 3600.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free, self.first_wait_s, self.max_wait_s = free, first_wait_s, max_wait_s
        self.forget_after_s, self.max_clients, self._clock = forget_after_s, max_clients, clock
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()  # client -> (count, last time)
        self._lock = threading.Lock()

    def _current(self, client: str, now: float) -> tuple[int, float]:
        count, last = self._failures.get(client, (0, now))
        if count and now - last > max(self.forget_after_s, self._wait(count)):
            del self._failures[client]
            return 0, now
        return count, last

    def _wait(self, count: int) -> float:
        return backoff_s(count, free=self.free, first_wait_s=self.first_wait_s, max_wait_s=self.max_wait_s)

    def wait_s(self, client: str) -> float:
        """Seconds before `client` may try a password again (0: now)."""
        with self._lock:
            now = self._clock()
            count, last = self._current(client, now)
            return max(0.0, last + self._wait(count) - now) if count else 0.0

    def failed(self, client: str) -> None:
        with self._lock:
            now = self._clock()
            count, _ = self._current(client, now)
            self._failures[client] = (count + 1, now)
            self._failures.move_to_end(client)
            while len(self._failures) > self.max_clients:
                self._failures.popitem(last=False)

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)


def too_many_tries_message(wait_s: float) -> str:
    return f"Too many wrong passwords from your address. Try again in {int(wait_s) + 1} seconds."


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
            if self.throttle and (wait := self.throttle.wait_s(client)):
                await _deny(scope, send, 429, too_many_tries_message(wait), retry_after=wait)
                return
            if password_matches(bearer[7:].strip(), self.password):
                if self.throttle:
                    self.throttle.succeeded(client)
                await self.app(scope, receive, send)
                return
            if self.throttle:
                self.throttle.failed(client)

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

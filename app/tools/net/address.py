"""The one address check every outgoing fetch goes through (URL reading, web search engines, MCP
servers): http(s) only; the host resolved once, every address it resolves to checked
(app/tools/core/addresses.py), and the first one handed back so the caller connects to exactly that
address (pinned: a second DNS answer cannot swap in 127.0.0.1). A host the owner lists in
SUGO_FETCH_ALLOW (names or IP addresses, comma-separated) skips the address rules; the scheme rule
stays."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.tools.core.addresses import refusal

MAX_URL_CHARS = 2048


class AddressRefused(Exception):
    """A URL Sugo will not fetch; the message says why, for the model and the user."""


@dataclass(frozen=True)
class CheckedUrl:
    url: str
    scheme: str  # "http" | "https"
    host: str  # as written (lower case, no brackets): the Host header and TLS server name
    port: int
    address: str  # the resolved address to connect to


def _split(url: str) -> tuple[str, str, int]:
    if len(url) > MAX_URL_CHARS:
        raise AddressRefused(f"The URL is longer than {MAX_URL_CHARS} characters.")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as err:
        raise AddressRefused(f"The URL could not be read ({err}).") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise AddressRefused("Only http and https URLs can be fetched.")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise AddressRefused("The URL has no host name.")
    if parts.username or parts.password:
        raise AddressRefused("URLs with a user name or password in them are not fetched.")
    return scheme, host, port or (443 if scheme == "https" else 80)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def check_url(url: str, *, allow: Collection[str] = ()) -> CheckedUrl:
    """Resolve and check `url`; raises AddressRefused. `allow`: Settings.fetch_allow."""
    scheme, host, port = _split(url)
    allowed = {a.lower().strip("[]") for a in allow}
    if _is_ip(host):
        addresses = [host]
    else:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
            )
        except (OSError, UnicodeError):
            raise AddressRefused(f"The host name {host} could not be resolved.") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not addresses:
            raise AddressRefused(f"The host name {host} could not be resolved.")
    if host not in allowed:
        for address in addresses:
            if address in allowed:
                continue
            if reason := refusal(address):
                shown = host if host == address else f"{host} ({reason.split(' is ', 1)[0]})"
                raise AddressRefused(f"{shown} is not fetched: {reason}.")
    return CheckedUrl(url=url.strip(), scheme=scheme, host=host, port=port, address=addresses[0])

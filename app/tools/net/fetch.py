"""The one way a tool fetches from the web (URL reading, the Brave and SearXNG engines): every hop
goes through the address check (app/tools/net/address.py) and the connection is PINNED to the
address that check resolved and approved.

Decisions:
- Pinned, not re-resolved: the request goes to the checked IP address itself, with the Host header
  and (for https) the TLS server name set to the host as written, so the certificate is still checked
  against the real name (httpcore's `sni_hostname` extension). A DNS answer that changes between the
  check and the connection (rebinding) cannot swap in 127.0.0.1.
- Redirects are followed by hand, at most `max_redirects`, and each new URL is checked again: a public
  page redirecting to 169.254.169.254 is refused at that hop.
- The body is read as a stream and cut at `max_bytes` (after decompression, so a small gzip bomb
  cannot grow past it); `truncated` says so.
- One short-lived httpx client per fetch, closed by `async with` whatever happens: it shares no pool
  with the providers' clients and leaks no socket. `trust_env=False`: a proxy from the environment
  would connect to the host by name and undo the pinning.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx

from app.tools.net.address import AddressRefused, CheckedUrl, check_url

log = logging.getLogger(__name__)

PAGE_MAX_BYTES = 2 * 1024 * 1024  # what a web page may weigh (fetch_url)
DEFAULT_TIMEOUT_S = 15.0
USER_AGENT = "Sugo/1.0 (self-hosted chat; fetches on a user's request)"
_REDIRECTS = {301, 302, 303, 307, 308}

__all__ = ["AddressRefused", "FetchError", "Fetched", "fetch"]


class FetchError(Exception):
    """A fetch that did not work out (no answer, too many redirects, a TLS failure); the message is
    a sentence for the model and the user."""


@dataclass(frozen=True)
class Fetched:
    status: int
    url: str  # the final URL, after redirects (as written, never the pinned IP)
    headers: Mapping[str, str]
    body: bytes
    content_type: str  # lower case, without parameters ("text/html")
    truncated: bool  # the body was longer than max_bytes and was cut there

    @property
    def charset(self) -> str | None:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            name, _, value = part.strip().partition("=")
            if name.strip().lower() == "charset" and value.strip():
                return value.strip().strip('"').lower()
        return None


def _bracketed(host: str) -> str:
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


def _pinned_request(
    client: httpx.AsyncClient,
    checked: CheckedUrl,
    *,
    method: str,
    headers: Mapping[str, str] | None,
    params: Mapping[str, str] | None,
) -> httpx.Request:
    """A request for `checked.url` that connects to `checked.address` and says `checked.host`."""
    logical = httpx.URL(checked.url)
    default_port = 443 if checked.scheme == "https" else 80
    host_header = _bracketed(checked.host) + ("" if checked.port == default_port else f":{checked.port}")
    pinned = logical.copy_with(host=checked.address, port=checked.port)
    extensions = {"sni_hostname": checked.host} if checked.scheme == "https" else {}
    request = client.build_request(
        method,
        pinned,
        headers={"User-Agent": USER_AGENT, **(headers or {}), "Host": host_header},
        params=params,
        extensions=extensions,
    )
    return request


async def fetch(
    url: str,
    *,
    allow: Collection[str],
    max_bytes: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    max_redirects: int = 3,
) -> Fetched:
    """Fetch `url` pinned to its checked address; raises AddressRefused or FetchError.
    `allow`: the hosts the owner lets through (Settings.fetch_allow)."""
    try:
        async with asyncio.timeout(timeout_s):
            return await _fetch(
                url,
                allow=allow,
                max_bytes=max_bytes,
                timeout_s=timeout_s,
                method=method,
                headers=headers,
                params=params,
                max_redirects=max_redirects,
            )
    except TimeoutError:
        raise FetchError(f"{_short(url)} did not answer within {timeout_s:g} seconds.") from None


async def _fetch(
    url: str,
    *,
    allow: Collection[str],
    max_bytes: int,
    timeout_s: float,
    method: str,
    headers: Mapping[str, str] | None,
    params: Mapping[str, str] | None,
    max_redirects: int,
) -> Fetched:
    current = url
    async with httpx.AsyncClient(
        follow_redirects=False, trust_env=False, timeout=httpx.Timeout(timeout_s)
    ) as client:
        for hop in range(max_redirects + 1):
            checked = await check_url(current, allow=allow)
            request = _pinned_request(client, checked, method=method, headers=headers, params=params)
            try:
                response = await client.send(request, stream=True)
            except httpx.TimeoutException:
                raise FetchError(f"{_short(current)} did not answer within {timeout_s:g} seconds.") from None
            except httpx.ConnectError as err:
                raise FetchError(f"{_short(current)} could not be reached ({_reason(err)}).") from None
            except httpx.HTTPError as err:
                raise FetchError(f"Fetching {_short(current)} failed ({_reason(err)}).") from None
            try:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    target = urljoin(checked.url, response.headers["location"])
                    if hop == max_redirects:
                        raise FetchError(f"{_short(url)} redirected more than {max_redirects} times.")
                    log.debug("redirect %s -> %s", checked.url, target)
                    if response.status_code == 303 or (
                        response.status_code in (301, 302) and method == "POST"
                    ):
                        method = "GET"
                    params = None  # the Location is the whole next URL
                    current = target
                    continue
                body, truncated = await _read(response, max_bytes)
            except httpx.TimeoutException:
                raise FetchError(f"{_short(current)} stopped answering (timed out).") from None
            except httpx.HTTPError as err:
                raise FetchError(f"Reading {_short(current)} failed ({_reason(err)}).") from None
            finally:
                await response.aclose()
            content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
            return Fetched(
                status=response.status_code,
                url=checked.url,
                headers=dict(response.headers),
                body=body,
                content_type=content_type,
                truncated=truncated,
            )
    raise AssertionError("unreachable")  # the loop returns or raises


async def _read(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > max_bytes:
            chunks.append(chunk[: max_bytes - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _short(url: str, limit: int = 120) -> str:
    return url if len(url) <= limit else url[: limit - 1] + "…"


def _reason(err: Exception) -> str:
    text = str(err).strip() or type(err).__name__
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "its TLS certificate could not be verified"
    return text[:200]

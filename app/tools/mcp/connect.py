"""Talking to one MCP server over Streamable HTTP with the official `mcp` SDK (2.x), one connection per
discovery or call.

Decisions:
- Every connection goes through the one address check first (`check_url` with SUGO_FETCH_ALLOW), and
  the HTTP client is pinned to the address that check resolved: `_PinnedTransport` connects to that
  IP while the Host header and the TLS server name stay the host's, so a second DNS answer cannot
  swap in 127.0.0.1. The SDK follows a redirect only within the endpoint's origin (same scheme, host
  and port), which the pin covers; a request to any other host is refused here.
- One connection per call, opened and closed inside the call's time limit (`anyio.fail_after` around
  connecting, the request AND closing): a server that hangs anywhere costs at most the limit, and
  leaving the scope closes the session's tasks and the client's sockets. No pool to leak or go stale;
  the cost is a handshake per call, small next to a model's turn.
- The SDK speaks `httpx2` (its own fork of httpx), not the app's httpx: the client here is an
  `httpx2.AsyncClient`, with `trust_env=False` so no proxy from the environment bypasses the pin.
- Errors come out of the SDK's task groups wrapped in exception groups and, for HTTP errors, as a
  bare "Server returned an error response": `_reason` digs out the first real cause and the last HTTP
  status seen, and says it in one sentence.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from app.tools.net.address import AddressRefused, CheckedUrl, check_url

log = logging.getLogger(__name__)
T = TypeVar("T")


class McpFailure(Exception):
    """A discovery or call that did not work; the message is one sentence for the user and the model."""


@dataclass(frozen=True)
class Endpoint:
    name: str  # the server's name in Sugo, for messages
    url: str
    token: str | None  # plain, unsealed for this connection only


class _PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends every request to the checked address, keeping the host name for Host and TLS."""

    def __init__(self, checked: CheckedUrl) -> None:
        self._checked = checked
        self._inner = httpx2.AsyncHTTPTransport(retries=0)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        c = self._checked
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        if (url.scheme, (url.host or "").lower().strip("[]"), port) != (c.scheme, c.host, c.port):
            raise httpx2.ConnectError(f"Refused a request to {url.host}: only {c.host} was checked.")
        request.url = url.copy_with(host=c.address)
        if c.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": c.host}
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class _Seen:
    statuses: list[int] = field(default_factory=list)


async def with_session(
    endpoint: Endpoint,
    work: Callable[[Client], Awaitable[T]],
    *,
    timeout_s: float,
    allow: Collection[str],
    what: str,
) -> T:
    """Connect to `endpoint`, run `work(client)`, close; all within `timeout_s`. Raises McpFailure
    (`what` names the step in the message: "Discovery", "The call")."""
    seen = _Seen()

    async def note(response: httpx2.Response) -> None:
        seen.statuses.append(response.status_code)

    try:
        with anyio.fail_after(timeout_s):
            checked = await check_url(endpoint.url, allow=allow)
            headers = {"Authorization": f"Bearer {endpoint.token}"} if endpoint.token else None
            async with httpx2.AsyncClient(
                transport=_PinnedTransport(checked),
                headers=headers,
                timeout=httpx2.Timeout(timeout_s),
                trust_env=False,
                event_hooks={"response": [note]},
            ) as http:
                async with Client(
                    streamable_http_client(checked.url, http_client=http), cache=None
                ) as client:
                    return await work(client)
    except AddressRefused as err:
        hint = " A server on this machine or your own network needs its host listed in SUGO_FETCH_ALLOW."
        raise McpFailure(f"{endpoint.name}: {err}{hint if 'not fetched' in str(err) else ''}") from None
    except TimeoutError:
        raise McpFailure(
            f"{what} timed out: {endpoint.name} did not answer within {timeout_s:g} s."
        ) from None
    except McpFailure:
        raise
    except Exception as err:  # the SDK's and httpx2's many kinds, often inside exception groups
        reason = _reason(err, seen.statuses)
        log.info("MCP server %s: %s failed: %s", endpoint.name, what.lower(), reason, exc_info=err)
        raise McpFailure(f"{what} failed: {endpoint.name} {reason}") from None


def _first_cause(err: BaseException) -> BaseException:
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


def _reason(err: BaseException, statuses: list[int]) -> str:
    cause = _first_cause(err)
    failed = [s for s in statuses if s >= 400]
    if failed and failed[-1] in (401, 403):
        return f"refused the token (HTTP {failed[-1]}). Check the token."
    if failed:
        return f"answered HTTP {failed[-1]}. Check the URL (the endpoint often ends in /mcp)."
    if isinstance(cause, httpx2.ConnectError):
        return "could not be reached (is it running, and is the URL right?)."
    if isinstance(cause, httpx2.TimeoutException):
        return "took too long to answer."
    if isinstance(cause, MCPError):
        return f"answered with an error: {cause}."
    return f"failed ({type(cause).__name__}: {cause})."


async def list_tools(endpoint: Endpoint, *, timeout_s: float, allow: Collection[str]) -> list[Any]:
    """Every tool the server lists (pages followed, at most 10 pages), as the SDK's Tool objects."""

    async def work(client: Client) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(10):
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    return await with_session(endpoint, work, timeout_s=timeout_s, allow=allow, what="Discovery")


async def call_tool(
    endpoint: Endpoint, tool: str, arguments: dict[str, Any], *, timeout_s: float, allow: Collection[str]
) -> Any:
    """The server's CallToolResult for one call (is_error is the caller's to read)."""

    async def work(client: Client) -> Any:
        return await client.call_tool(tool, arguments)

    return await with_session(endpoint, work, timeout_s=timeout_s, allow=allow, what="The call")

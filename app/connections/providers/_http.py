"""HTTP plumbing shared by the providers: clients, SSE decoding, and errors worded for people.

Every failure leaves this module as a ProviderError whose message names the cause in plain words
and carries the server's own explanation when it sent one.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
import logging
import re
import socket
import ssl
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from app.connections.providers.base import ErrorKind, ProviderConfig, ProviderError

logger = logging.getLogger(__name__)

USER_AGENT = "Sugo/0.1"

# Marks the end of an OpenAI stream; never a valid JSON payload, so it cannot collide with one.
SSE_DONE = "[DONE]"

_MAX_SERVER_MESSAGE = 500
# A long model list (OpenRouter has hundreds) would drown the connection test message.
_MAX_LISTED_MODELS = 10


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs tens of milliseconds; one context serves every client.
    return httpx.create_ssl_context()


# One pooled client per event loop and timeout setting: keep-alive connections to a provider are
# reused from reply to reply, which saves a TCP (and for remote providers a TLS) handshake on every
# message. Weak keys, because tests and tools run several short-lived loops.
_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[float, float], httpx.AsyncClient]
] = weakref.WeakKeyDictionary()


def shared_client(config: ProviderConfig) -> httpx.AsyncClient:
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    key = (config.timeout_s, config.connect_timeout_s)
    client = per_loop.get(key)
    if client is None or client.is_closed:
        timeout = httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s)
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=30)
        # TCP_NODELAY: httpx writes a request's headers and body separately, and without it Nagle's
        # algorithm holds the body until the server acknowledges the headers (a delayed ACK costs up
        # to 40 ms before the provider even sees the prompt).
        transport = httpx.AsyncHTTPTransport(
            verify=_ssl_context(), limits=limits, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        )
        client = httpx.AsyncClient(timeout=timeout, transport=transport, follow_redirects=False)
        per_loop[key] = client
    return client


@contextlib.asynccontextmanager
async def make_client(config: ProviderConfig) -> AsyncIterator[httpx.AsyncClient]:
    """The pooled client for this loop; leaving the block does not close it."""
    yield shared_client(config)


async def close_clients() -> None:
    """Close this loop's pooled clients (at server shutdown)."""
    per_loop = _clients.pop(asyncio.get_running_loop(), {})
    for client in per_loop.values():
        await client.aclose()


def clean_base_url(url: str) -> str:
    return url.strip().rstrip("/")


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` on top of `base`: nested dicts merge, anything else replaces. Neither input is changed
    (only the dicts along merged paths are copied: deep-copying a whole prompt cost milliseconds)."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


@dataclass
class CallState:
    """What had happened when a call failed, which decides how the failure is worded."""

    base_url: str
    config: ProviderConfig
    streaming: bool = True
    response_started: bool = False
    text_seen: bool = False
    # Said after a 404 that names no model, when the API is one of several a server may or may not
    # speak (the text-completion shapes): what to choose instead.
    endpoint_hint: str = ""


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _with_detail(prefix: str, detail: str | None) -> str:
    return _sentence(f"{prefix}: {detail}") if detail else _sentence(prefix)


def _redact(text: str, config: ProviderConfig) -> str:
    # Some servers quote the rejected key (or api-key header) back; it must not reach logs or the UI.
    for secret in (config.api_key, *config.extra_headers.values()):
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def _tidy(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > _MAX_SERVER_MESSAGE:
        text = text[: _MAX_SERVER_MESSAGE - 1].rstrip() + "…"
    return text


def _looks_like_html(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith(("<!doctype", "<html")) or "<html" in head or "<body" in head


def message_from_error_object(err: Any) -> str | None:
    """The human text inside an `error` value, whichever of the common shapes it has."""
    if isinstance(err, str):
        return _tidy(err) or None
    if isinstance(err, dict):
        for key in ("message", "msg", "detail", "type", "code"):
            value = err.get(key)
            if isinstance(value, str) and value.strip():
                return _tidy(value)
    return None


def server_message(body: bytes | str) -> str | None:
    """The explanation a server put in an error body: OpenAI, Anthropic, FastAPI or plain-text shapes."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except ValueError:
        # An HTML error page says nothing useful in a one-line message.
        return None if _looks_like_html(text) else _tidy(text)
    if not isinstance(data, dict):
        return _tidy(text)
    if "error" in data and data["error"]:
        found = message_from_error_object(data["error"])
        if found:
            return found
    detail = data.get("detail")
    if isinstance(detail, str) and detail.strip():
        return _tidy(detail)
    if isinstance(detail, list):
        parts = [message_from_error_object(item) for item in detail]
        joined = "; ".join(p for p in parts if p)
        if joined:
            return _tidy(joined)
    message = data.get("message")
    if isinstance(message, str) and message.strip():
        return _tidy(message)
    return None


def _kind_for_status(status: int) -> ErrorKind:
    if status in (401, 403):
        return "auth"
    if status in (404, 405):
        return "not_found"
    if status == 408:
        return "timeout"
    if status == 429:
        return "rate_limit"
    if status >= 500:
        return "server"
    if 300 <= status < 400:
        return "not_found"
    return "bad_request"


def error_for_status(response: httpx.Response, body: bytes, state: CallState) -> ProviderError:
    status = response.status_code
    detail = server_message(body)
    kind = _kind_for_status(status)
    config = state.config
    hint = ""
    if kind == "auth":
        label = f"{status} {response.reason_phrase}".strip()
        prefix = (
            f"The server rejected the API key ({label})"
            if config.api_key
            else f"The server requires an API key, and none is set ({label})"
        )
    elif 300 <= status < 400:
        location = response.headers.get("location", "another address")
        prefix = f"The server redirected the request to {location} ({status})"
        hint = " Check the base URL."
    elif kind == "not_found":
        if state.endpoint_hint and not (detail and "model" in detail.lower()):
            prefix = f"Nothing was found at {response.request.url} ({status})"
            hint = " " + state.endpoint_hint
        elif config.model and response.request.method == "POST":
            prefix = f"Model '{config.model}' was not found, or the URL is wrong ({status})"
        else:
            prefix = f"Nothing was found at {response.request.url} ({status})"
            hint = " Check the base URL."
    elif kind == "timeout":
        prefix = f"The server at {state.base_url} gave up waiting for the request ({status})"
    elif kind == "rate_limit":
        prefix = f"Rate limited by the provider ({status})"
    elif kind == "server":
        if status in (502, 503, 504):
            prefix = f"The server, or a proxy in front of it, is unavailable ({status})"
        elif status == 529:
            prefix = f"The provider is overloaded ({status})"
        else:
            prefix = f"The server failed with an internal error ({status})"
    else:
        prefix = f"The server rejected the request ({status})"
    message = _redact(_with_detail(prefix, detail) + hint, config)
    logger.warning("Provider request to %s failed: %s", state.base_url, message)
    return ProviderError(kind, message, status=status)


_ERROR_TYPE_KINDS: tuple[tuple[str, ErrorKind], ...] = (
    ("auth", "auth"),
    ("permission", "auth"),
    ("api_key", "auth"),
    ("not_found", "not_found"),
    ("rate_limit", "rate_limit"),
    ("quota", "rate_limit"),
    ("too_large", "bad_request"),
    ("invalid_request", "bad_request"),
    ("context_length", "bad_request"),
    ("timeout", "timeout"),
    ("overloaded", "server"),
)


def error_from_stream_payload(err: Any, state: CallState) -> ProviderError:
    """An error the server sent inside a stream that had already started with a 200."""
    kind: ErrorKind = "server"
    status: int | None = None
    if isinstance(err, dict):
        for key in ("code", "status"):
            value = err.get(key)
            if isinstance(value, int) and 400 <= value < 600:
                status = value
                break
            if isinstance(value, str) and value.isascii() and value.isdigit() and 400 <= int(value) < 600:
                status = int(value)
                break
        if status is not None:
            kind = _kind_for_status(status)
        else:
            labels = " ".join(str(err.get(k) or "") for k in ("type", "code")).lower()
            kind = next((k for needle, k in _ERROR_TYPE_KINDS if needle in labels), "server")
    detail = message_from_error_object(err)
    message = _redact(_with_detail("The server reported an error during the reply", detail), state.config)
    logger.warning("Provider stream from %s reported an error: %s", state.base_url, message)
    return ProviderError(kind, message, status=status)


def _find_in_chain(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        todo.extend(getattr(current, "exceptions", ()))
    return None


def _connect_reason(exc: httpx.ConnectError) -> str:
    if _find_in_chain(exc, ConnectionRefusedError) is not None:
        return "connection refused. Is the server running?"
    text = str(exc)
    lowered = text.lower()
    if "refused" in lowered:
        return "connection refused. Is the server running?"
    if _find_in_chain(exc, ssl.SSLError) is not None or "ssl" in lowered or "certificate" in lowered:
        return f"the secure (TLS) connection failed ({_tidy(text)})"
    if (
        "name or service not known" in lowered
        or "nodename nor servname" in lowered
        or "getaddrinfo" in lowered
    ):
        return "the host name could not be resolved. Check the URL and your network"
    if "unreachable" in lowered:
        return "the network or host is unreachable"
    return _tidy(text) or type(exc).__name__


def error_for_exception(exc: httpx.HTTPError, state: CallState) -> ProviderError:
    base = state.base_url
    config = state.config
    kind: ErrorKind
    if isinstance(exc, httpx.ConnectTimeout):
        kind = "timeout"
        message = (
            f"The server at {base} did not accept the connection within {_seconds(config.connect_timeout_s)}."
        )
    elif isinstance(exc, httpx.TimeoutException):
        kind = "timeout"
        if state.text_seen:
            message = (
                f"The server at {base} stopped sending in the middle of the reply "
                f"for more than {_seconds(config.timeout_s)}."
            )
        else:
            message = f"The server at {base} did not answer within {_seconds(config.timeout_s)}."
    elif isinstance(exc, httpx.ConnectError):
        kind = "connection"
        message = _sentence(f"Could not connect to {base}: {_connect_reason(exc)}")
    elif isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        kind = "connection"
        message = f"The base URL '{base}' is not a valid http:// or https:// address."
    elif isinstance(exc, httpx.DecodingError):
        kind = "bad_response"
        message = f"The answer from {base} could not be decoded ({_tidy(str(exc))})."
    elif isinstance(exc, httpx.TransportError):
        # Protocol and read errors: where they happened decides what the user can do about them.
        if state.response_started:
            kind = "stream_broken"
            if state.text_seen:
                message = "The connection dropped in the middle of the reply."
            elif state.streaming:
                message = "The connection dropped before the reply arrived."
            else:
                message = "The connection dropped while the answer was being received."
        else:
            kind = "connection"
            message = f"The server at {base} closed the connection without answering."
    else:
        kind = "connection"
        message = _sentence(f"The request to {base} failed: {_tidy(str(exc)) or type(exc).__name__}")
    logger.warning("Provider request to %s failed (%s): %s", base, type(exc).__name__, exc)
    return ProviderError(kind, message)


@asynccontextmanager
async def translate_errors(state: CallState) -> AsyncIterator[None]:
    try:
        yield
    except httpx.HTTPError as exc:
        raise error_for_exception(exc, state) from exc


def content_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


def error_for_unreadable(response: httpx.Response, body: bytes, state: CallState) -> ProviderError:
    text = body.decode("utf-8", "replace")
    if _looks_like_html(text) or content_type(response) == "text/html":
        message = (
            f"The server at {state.base_url} answered with a web page instead of an API response; "
            "check the base URL (it usually ends in /v1)."
        )
    elif not text.strip():
        message = f"The server at {state.base_url} sent an empty answer."
    else:
        message = f"The answer from {state.base_url} is not valid JSON: {_tidy(text)[:200]}"
    logger.warning("Unreadable provider answer from %s: %s", state.base_url, message)
    return ProviderError("bad_response", message, status=response.status_code)


def parse_json_body(response: httpx.Response, body: bytes, state: CallState) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        raise error_for_unreadable(response, body, state) from None
    if not isinstance(data, dict):
        raise ProviderError(
            "bad_response",
            f"The answer from {state.base_url} is JSON but not an object: {_tidy(body.decode('utf-8', 'replace'))[:200]}",
        )
    return data


async def request_json(
    state: CallState,
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One non-streamed request whose answer is a JSON object; every failure is a ProviderError."""
    state.streaming = False
    async with translate_errors(state), make_client(state.config) as client:
        async with client.stream(method, url, headers=headers, json=body) as response:
            state.response_started = True
            raw = await response.aread()
            if response.status_code >= 300:
                raise error_for_status(response, raw, state)
            return parse_json_body(response, raw, state)


async def check_stream_response(response: httpx.Response, state: CallState) -> dict[str, Any] | None:
    """Raise for error statuses and web pages; return the parsed body when the server ignored `stream`."""
    state.response_started = True
    if response.status_code >= 300:
        raw = await response.aread()
        raise error_for_status(response, raw, state)
    kind = content_type(response)
    if kind == "application/json":
        raw = await response.aread()
        return parse_json_body(response, raw, state)
    if kind == "text/html":
        raw = await response.aread()
        raise error_for_unreadable(response, raw, state)
    return None


def _decode_sse_data(data: str, state: CallState) -> list[Any]:
    if data.strip() == SSE_DONE:
        return [SSE_DONE]
    try:
        return [json.loads(data)]
    except ValueError:
        pass
    # Some servers forget the blank line between events, which glues several payloads together.
    pieces: list[Any] = []
    for line in data.split("\n"):
        if not line.strip():
            continue
        if line.strip() == SSE_DONE:
            pieces.append(SSE_DONE)
            continue
        try:
            pieces.append(json.loads(line))
        except ValueError:
            raise ProviderError(
                "bad_response",
                f"The server at {state.base_url} sent a streamed piece that is not valid JSON: {_tidy(data)[:200]}",
            ) from None
    return pieces


async def iter_sse_json(response: httpx.Response, state: CallState) -> AsyncIterator[tuple[str, Any]]:
    """(event name, parsed JSON payload or SSE_DONE) for each server-sent event of the response."""
    event = ""
    data_lines: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data_lines:
                for payload in _decode_sse_data("\n".join(data_lines), state):
                    yield event or "message", payload
            event, data_lines = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data_lines.append(value)
        elif field == "event":
            event = value
    if data_lines:
        for payload in _decode_sse_data("\n".join(data_lines), state):
            yield event or "message", payload


async def iter_ndjson(response: httpx.Response, state: CallState) -> AsyncIterator[tuple[str, Any]]:
    """("message", parsed JSON payload) for each line of a newline-delimited JSON stream (Ollama's)."""
    async for line in response.aiter_lines():
        if not line.strip():
            continue
        try:
            payload = json.loads(line)
        except ValueError:
            raise ProviderError(
                "bad_response",
                f"The server at {state.base_url} sent a streamed line that is not valid JSON: {_tidy(line)[:200]}",
            ) from None
        yield "message", payload


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def models_message(names: list[str]) -> str:
    if not names:
        return "Connected, but the server lists no models."
    shown = ", ".join(names[:_MAX_LISTED_MODELS])
    more = len(names) - _MAX_LISTED_MODELS
    return f"Connected. Models available: {shown}" + (f", and {more} more." if more > 0 else "")

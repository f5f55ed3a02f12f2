"""Anthropic Messages API (`POST {base_url}/messages`).

Usage is reported with the same meaning as OpenAI's: `input_tokens` counts the whole prompt, cached part
included, and `cached_input_tokens` is the part read from the cache. Anthropic's own `input_tokens` counts
only the uncached rest, so the three numbers it sends are added up here.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from app.connections.providers import _http
from app.connections.providers.base import (
    Completion,
    GenerationParams,
    ProbeResult,
    ProviderConfig,
    ProviderError,
    StreamEvent,
    Usage,
)

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
API_VERSION = "2023-06-01"
# Anthropic refuses requests without max_tokens; this is what we ask for when the user set no limit.
DEFAULT_MAX_TOKENS = 1024
SYSTEM_NOTE_PREFIX = "[System note] "
CONTINUE_TEXT = "(continue)"

_EPHEMERAL = {"type": "ephemeral"}


def _base_url(config: ProviderConfig) -> str:
    return _http.clean_base_url(config.base_url) or DEFAULT_BASE_URL


def _headers(config: ProviderConfig, *, stream: bool) -> dict[str, str]:
    headers = {
        "anthropic-version": API_VERSION,
        "Content-Type": "application/json",
        "Accept": "text/event-stream" if stream else "application/json",
        "User-Agent": _http.USER_AGENT,
    }
    if config.api_key:
        headers["x-api-key"] = config.api_key
    headers.update(config.extra_headers)
    return headers


def _text_block(text: str, cache: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cache:
        block["cache_control"] = dict(_EPHEMERAL)
    return block


def convert_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Provider-neutral messages -> (system blocks, Anthropic turns).

    Anthropic wants the system prompt outside the turns, strictly user-first turns, and no empty text.
    A "cache" marker becomes a cache breakpoint on that message's own block, so a marked message is
    never merged with what follows it: the cached prefix must end exactly where the caller said.
    """
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    leading = True
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else ("" if content is None else str(content))
        cache = bool(message.get("cache"))
        if role == "system" and leading:
            if text.strip():
                system.append(_text_block(text, cache))
            elif cache and system:
                system[-1]["cache_control"] = dict(_EPHEMERAL)
            continue
        leading = False
        if role == "system":
            role, text = "user", (SYSTEM_NOTE_PREFIX + text if text.strip() else "")
        elif role != "assistant":
            role = "user"
        if not text.strip():
            # Anthropic rejects blank text blocks; keep a requested breakpoint on the previous block.
            if cache:
                previous = turns[-1]["content"][-1] if turns else (system[-1] if system else None)
                if previous is not None:
                    previous["cache_control"] = dict(_EPHEMERAL)
            continue
        if turns and turns[-1]["role"] == role:
            last_block = turns[-1]["content"][-1]
            if "cache_control" in last_block:
                turns[-1]["content"].append(_text_block(text, cache))
            else:
                last_block["text"] += "\n\n" + text
                if cache:
                    last_block["cache_control"] = dict(_EPHEMERAL)
        else:
            turns.append({"role": role, "content": [_text_block(text, cache)]})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [_text_block(CONTINUE_TEXT, False)]})
    if turns[-1]["role"] == "assistant":
        # A trailing assistant turn is a prefill, and Anthropic rejects prefills ending in whitespace.
        last_block = turns[-1]["content"][-1]
        last_block["text"] = last_block["text"].rstrip()
    for turn in turns:
        blocks = turn["content"]
        if len(blocks) == 1 and "cache_control" not in blocks[0]:
            turn["content"] = blocks[0]["text"]
    return system, turns


def build_body(
    config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams, *, stream: bool
) -> dict[str, Any]:
    system, turns = convert_messages(messages)
    body: dict[str, Any] = {
        "model": config.model,
        "max_tokens": params.max_tokens if params.max_tokens is not None else DEFAULT_MAX_TOKENS,
        "messages": turns,
        "stream": stream,
    }
    if system:
        body["system"] = system
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.stop:
        body["stop_sequences"] = list(params.stop)
    return _http.deep_merge(body, config.extra_body)


class _UsageTally:
    """Anthropic spreads usage over message_start and message_delta; later numbers win."""

    def __init__(self) -> None:
        self.fields: dict[str, int] = {}

    def update(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            return
        for key in (
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        ):
            value = _http.as_int(raw.get(key))
            if value is not None:
                self.fields[key] = value

    def usage(self) -> Usage | None:
        if not self.fields:
            return None
        f = self.fields
        parts = [f.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
        known = [p for p in parts if p is not None]
        return Usage(
            input_tokens=sum(known) if known else None,
            output_tokens=f.get("output_tokens"),
            cached_input_tokens=f.get("cache_read_input_tokens"),
        )


def _completion_from(data: dict[str, Any], state: _http.CallState) -> Completion:
    if data.get("type") == "error" or data.get("error"):
        raise _http.error_from_stream_payload(data.get("error"), state)
    content = data.get("content")
    if not isinstance(content, list):
        raise ProviderError("bad_response", f"The answer from {state.base_url} has no content list in it.")
    blocks = [block for block in content if isinstance(block, dict)]
    text = "".join(_block_text(b, "text") for b in blocks if b.get("type") == "text")
    # Extended thinking: its blocks come before the text ("redacted_thinking" ones are encrypted).
    reasoning = "\n\n".join(t for b in blocks if b.get("type") == "thinking" if (t := _block_text(b, "thinking")))
    tally = _UsageTally()
    tally.update(data.get("usage"))
    return Completion(
        text=text, model=data.get("model") or None, usage=tally.usage(), finish_reason=data.get("stop_reason"),
        reasoning=reasoning,
    )


def _block_text(block: dict[str, Any], key: str) -> str:
    value = block.get(key)
    return value if isinstance(value, str) else ""


async def stream_chat(
    config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams
) -> AsyncIterator[StreamEvent]:
    """Text and thinking deltas as they arrive, then exactly one closing event with usage, stop reason
    and model."""
    base = _base_url(config)
    state = _http.CallState(base_url=base, config=config)
    body = build_body(config, messages, params, stream=True)
    logger.debug("Streaming message from %s (model %r, %d messages)", base, config.model, len(messages))
    model: str | None = None
    stop_reason: str | None = None
    tally = _UsageTally()
    events_seen = 0
    async with _http.translate_errors(state), _http.make_client(config) as client:
        async with client.stream(
            "POST", f"{base}/messages", headers=_headers(config, stream=True), json=body
        ) as response:
            whole = await _http.check_stream_response(response, state)
            if whole is not None:
                completion = _completion_from(whole, state)
                if completion.text or completion.reasoning:
                    yield StreamEvent(text=completion.text, reasoning=completion.reasoning)
                yield StreamEvent(
                    usage=completion.usage, finish_reason=completion.finish_reason, model=completion.model
                )
                return
            async for event, payload in _http.iter_sse_json(response, state):
                events_seen += 1
                if not isinstance(payload, dict):
                    continue
                kind = payload.get("type") or event
                if kind == "message_start":
                    message = payload.get("message") if isinstance(payload.get("message"), dict) else {}
                    model = message.get("model") or model
                    tally.update(message.get("usage"))
                elif kind == "content_block_delta":
                    delta = payload.get("delta") if isinstance(payload.get("delta"), dict) else {}
                    text = delta.get("text")
                    thinking = delta.get("thinking")
                    if delta.get("type") == "text_delta" and isinstance(text, str) and text:
                        state.text_seen = True
                        yield StreamEvent(text=text)
                    elif delta.get("type") == "thinking_delta" and isinstance(thinking, str) and thinking:
                        state.text_seen = True
                        yield StreamEvent(reasoning=thinking)
                elif kind == "message_delta":
                    delta = payload.get("delta") if isinstance(payload.get("delta"), dict) else {}
                    stop_reason = delta.get("stop_reason") or stop_reason
                    tally.update(payload.get("usage"))
                elif kind == "message_stop":
                    break
                elif kind == "error":
                    raise _http.error_from_stream_payload(payload.get("error"), state)
    if not events_seen:
        raise ProviderError("bad_response", f"The server at {base} answered, but sent no streamed events.")
    yield StreamEvent(usage=tally.usage(), finish_reason=stop_reason, model=model)


async def complete_chat(
    config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams
) -> Completion:
    base = _base_url(config)
    state = _http.CallState(base_url=base, config=config)
    body = build_body(config, messages, params, stream=False)
    logger.debug("Message from %s (model %r, %d messages)", base, config.model, len(messages))
    data = await _http.request_json(
        state, "POST", f"{base}/messages", headers=_headers(config, stream=False), body=body
    )
    return _completion_from(data, state)


async def list_models(config: ProviderConfig) -> list[str]:
    """Model ids from `GET {base_url}/models` (first page, newest first as Anthropic sorts them)."""
    base = _base_url(config)
    state = _http.CallState(base_url=base, config=config)
    data = await _http.request_json(
        state, "GET", f"{base}/models?limit=100", headers=_headers(config, stream=False)
    )
    entries = data.get("data")
    if not isinstance(entries, list):
        raise ProviderError("bad_response", f"The model list from {base} has no 'data' list in it.")
    return [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"]]


async def probe(config: ProviderConfig) -> ProbeResult:
    """'Test connection': a one-token message, or the model list when no model is chosen."""
    try:
        if not config.model:
            names = await list_models(config)
            return ProbeResult(
                ok=True, model=names[0] if names else None, message=_http.models_message(names), models=tuple(names)
            )
        completion = await complete_chat(
            config, [{"role": "user", "content": "Hi"}], GenerationParams(max_tokens=1)
        )
    except ProviderError as err:
        return ProbeResult(ok=False, model=None, message=str(err))
    name = completion.model or config.model
    return ProbeResult(ok=True, model=name, message=f"Connected to {name}.")

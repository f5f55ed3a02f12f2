"""Anthropic Messages API (`POST {base_url}/messages`).

Usage is reported with the same meaning as OpenAI's: `input_tokens` counts the whole prompt, cached part
included, and `cached_input_tokens` is the part read from the cache. Anthropic's own `input_tokens` counts
only the uncached rest, so the three numbers it sends are added up here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from app.connections.core.toolcalls import ToolCallAssembler
from app.connections.providers import _calls, _http
from app.connections.providers.base import (
    Completion,
    GenerationParams,
    ProviderConfig,
    ProviderError,
    StreamEvent,
    Usage,
)

DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
API_VERSION = "2023-06-01"
# Anthropic refuses requests without max_tokens; this is what we ask for when the user set no limit.
DEFAULT_MAX_TOKENS = 1024
SYSTEM_NOTE_PREFIX = "[System note] "
CONTINUE_TEXT = "(continue)"

_EPHEMERAL = {"type": "ephemeral"}


def _text_block(text: str, cache: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cache:
        block["cache_control"] = dict(_EPHEMERAL)
    return block


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    try:
        arguments = json.loads(call["arguments"] or "{}")
    except ValueError:
        arguments = {}  # the loop answered the bad JSON with an error result; the call itself stays
    return {
        "type": "tool_use",
        "id": call["id"],
        "name": call["name"],
        "input": arguments if isinstance(arguments, dict) else {},
    }


def convert_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Provider-neutral messages -> (system blocks, Anthropic turns).

    Anthropic wants the system prompt outside the turns, strictly user-first turns, and no empty text.
    A "cache" marker becomes a cache breakpoint on that message's own block, so a marked message is
    never merged with what follows it: the cached prefix must end exactly where the caller said.
    Tool calls become tool_use blocks of the assistant's turn, and their results tool_result blocks of
    the user turn after it (all of a round's results in that one turn, as the API requires).
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
        if role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": text or "[empty]",
            }
            if message.get("is_error"):
                block["is_error"] = True
            if (
                turns
                and turns[-1]["role"] == "user"
                and turns[-1]["content"][-1].get("type") == "tool_result"
            ):
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
            continue
        calls = [_tool_use(c) for c in message.get("tool_calls") or ()] if role == "assistant" else []
        if role == "system":
            role, text = "user", (SYSTEM_NOTE_PREFIX + text if text.strip() else "")
        elif role != "assistant":
            role = "user"
        if not text.strip() and not calls:
            # Anthropic rejects blank text blocks; keep a requested breakpoint on the previous block.
            if cache:
                previous = turns[-1]["content"][-1] if turns else (system[-1] if system else None)
                if previous is not None:
                    previous["cache_control"] = dict(_EPHEMERAL)
            continue
        blocks = ([_text_block(text, cache and not calls)] if text.strip() else []) + calls
        if turns and turns[-1]["role"] == role:
            last_block = turns[-1]["content"][-1]
            if (
                blocks[0]["type"] == "text"
                and last_block.get("type") == "text"
                and "cache_control" not in last_block
            ):
                last_block["text"] += "\n\n" + blocks[0]["text"]
                if "cache_control" in blocks[0]:
                    last_block["cache_control"] = dict(_EPHEMERAL)
                blocks = blocks[1:]
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [_text_block(CONTINUE_TEXT, False)]})
    if turns[-1]["role"] == "assistant" and turns[-1]["content"][-1].get("type") == "text":
        # A trailing assistant turn is a prefill, and Anthropic rejects prefills ending in whitespace.
        last_block = turns[-1]["content"][-1]
        last_block["text"] = last_block["text"].rstrip()
    for turn in turns:
        blocks = turn["content"]
        if len(blocks) == 1 and blocks[0].get("type") == "text" and "cache_control" not in blocks[0]:
            turn["content"] = blocks[0]["text"]
    return system, turns


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


def _block_text(block: dict[str, Any], key: str) -> str:
    value = block.get(key)
    return value if isinstance(value, str) else ""


class MessagesApi(_calls.ProviderApi):
    """What Anthropic's API does its own way; the calls are shared (_calls.py)."""

    chat_path = "/messages"
    # First page only, newest first as Anthropic sorts them.
    models_path = "/models?limit=100"

    def base_url(self, config: ProviderConfig) -> str:
        return _http.clean_base_url(config.base_url) or DEFAULT_BASE_URL

    def headers(self, config: ProviderConfig, *, stream: bool) -> dict[str, str]:
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

    def build_body(
        self, config: ProviderConfig, messages: _calls.Messages, params: GenerationParams, *, stream: bool
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
        if params.tools:
            body["tools"] = [
                {"name": t["name"], "description": t.get("description", ""), "input_schema": t["parameters"]}
                for t in params.tools
            ]
        body.update(_calls.sampling_fields(params))
        if params.stop:
            body["stop_sequences"] = list(params.stop)
        return _http.deep_merge(body, config.extra_body)

    def completion_from(self, data: dict[str, Any], state: _http.CallState) -> Completion:
        if data.get("type") == "error" or data.get("error"):
            raise _http.error_from_stream_payload(data.get("error"), state)
        content = data.get("content")
        if not isinstance(content, list):
            raise ProviderError(
                "bad_response", f"The answer from {state.base_url} has no content list in it."
            )
        blocks = [block for block in content if isinstance(block, dict)]
        text = "".join(_block_text(b, "text") for b in blocks if b.get("type") == "text")
        # Extended thinking: its blocks come before the text ("redacted_thinking" ones are encrypted).
        reasoning = "\n\n".join(
            t for b in blocks if b.get("type") == "thinking" if (t := _block_text(b, "thinking"))
        )
        tally = _UsageTally()
        tally.update(data.get("usage"))
        calls = ToolCallAssembler()
        for index, block in enumerate(blocks):
            if block.get("type") == "tool_use":
                raw = block.get("input")
                calls.add(
                    index,
                    id=block.get("id") if isinstance(block.get("id"), str) else None,
                    name=block.get("name") if isinstance(block.get("name"), str) else None,
                    arguments=json.dumps(raw if isinstance(raw, dict) else {}),
                )
        return Completion(
            text=text,
            model=data.get("model") or None,
            usage=tally.usage(),
            finish_reason=data.get("stop_reason"),
            reasoning=reasoning,
            tool_calls=calls.calls(),
        )

    async def read_events(
        self, events: AsyncIterator[tuple[str, Any]], state: _http.CallState, end: _calls.ReplyEnd
    ) -> AsyncIterator[StreamEvent]:
        """Text and thinking deltas; model, stop reason, usage and the assembled tool calls go into `end`."""
        tally = _UsageTally()
        calls = ToolCallAssembler()
        async for event, payload in events:
            if not isinstance(payload, dict):
                continue
            kind = payload.get("type") or event
            if kind == "message_start":
                message = payload.get("message") if isinstance(payload.get("message"), dict) else {}
                end.model = message.get("model") or end.model
                tally.update(message.get("usage"))
            elif kind == "content_block_start":
                block = payload.get("content_block") if isinstance(payload.get("content_block"), dict) else {}
                index = payload.get("index")
                if block.get("type") == "tool_use" and isinstance(index, int):
                    raw = block.get("input")
                    calls.add(
                        index,
                        id=block.get("id") if isinstance(block.get("id"), str) else None,
                        name=block.get("name") if isinstance(block.get("name"), str) else None,
                        # The input arrives as input_json_delta pieces; a non-empty one here is whole.
                        arguments=json.dumps(raw) if isinstance(raw, dict) and raw else "",
                    )
            elif kind == "content_block_delta":
                delta = payload.get("delta") if isinstance(payload.get("delta"), dict) else {}
                text = delta.get("text")
                thinking = delta.get("thinking")
                partial = delta.get("partial_json")
                if delta.get("type") == "text_delta" and isinstance(text, str) and text:
                    yield StreamEvent(text=text)
                elif delta.get("type") == "thinking_delta" and isinstance(thinking, str) and thinking:
                    yield StreamEvent(reasoning=thinking)
                elif delta.get("type") == "input_json_delta" and isinstance(partial, str):
                    index = payload.get("index")
                    if isinstance(index, int):
                        calls.add(index, arguments=partial)
            elif kind == "message_delta":
                delta = payload.get("delta") if isinstance(payload.get("delta"), dict) else {}
                end.finish_reason = delta.get("stop_reason") or end.finish_reason
                tally.update(payload.get("usage"))
            elif kind == "message_stop":
                break
            elif kind == "error":
                raise _http.error_from_stream_payload(payload.get("error"), state)
        end.usage = tally.usage()
        end.tool_calls = calls.calls()

    def model_names(self, data: dict[str, Any]) -> list[str] | None:
        entries = data.get("data")
        if not isinstance(entries, list):
            return None
        return [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"]]


_API = MessagesApi()
# The module is the provider (get_provider hands it out), and the prompt report asks it for the body.
build_body = _API.build_body
stream_chat = _API.stream_chat
complete_chat = _API.complete_chat
probe = _API.probe

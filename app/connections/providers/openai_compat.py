"""OpenAI-compatible chat completions: OpenAI itself, OpenRouter, llama.cpp, Ollama, vLLM, LM Studio, KoboldCpp…

All of them take `POST {base_url}/chat/completions`; `base_url` already ends in /v1 for every preset.
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
    ToolCall,
    Usage,
)


def read_usage(raw: Any) -> Usage | None:
    """Usage as OpenAI-compatible servers report it, chat and text completions alike."""
    if not isinstance(raw, dict):
        return None
    details = raw.get("prompt_tokens_details")
    cached = _http.as_int(details.get("cached_tokens")) if isinstance(details, dict) else None
    return Usage(
        input_tokens=_http.as_int(raw.get("prompt_tokens")),
        output_tokens=_http.as_int(raw.get("completion_tokens")),
        cached_input_tokens=cached,
    )


def _reasoning(part: Any) -> str:
    """The reasoning a message or a stream delta carries apart from its content: `reasoning_content`
    (DeepSeek, llama.cpp, vLLM, LM Studio) or `reasoning` (OpenRouter, Ollama, newer vLLM); a server
    sending both sends the same text twice, so the first one found is taken."""
    if not isinstance(part, dict):
        return ""
    for key in ("reasoning_content", "reasoning"):
        value = part.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _wire_message(message: dict[str, Any]) -> dict[str, Any]:
    """A provider-neutral message as chat completions take it: only the keys the API knows (strict
    servers reject unknown ones such as our "cache" marker); tool calls and results in OpenAI's shape."""
    role = message["role"]
    if role == "tool":
        return {"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"] or ""}
    wire = {"role": role, "content": message["content"]}
    if role == "assistant" and message.get("tool_calls"):
        wire["content"] = message["content"] or None
        wire["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in message["tool_calls"]
        ]
    return wire


def _calls_of(raw: Any) -> tuple[ToolCall, ...]:
    """The tool calls of a whole (not streamed) message."""
    assembler = ToolCallAssembler()
    for index, call in enumerate(raw if isinstance(raw, list) else []):
        _add_piece(assembler, call, index)
    return assembler.calls()


def _add_piece(assembler: ToolCallAssembler, piece: Any, default_index: int) -> None:
    if not isinstance(piece, dict):
        return
    function = piece.get("function") if isinstance(piece.get("function"), dict) else {}
    index = piece.get("index")
    arguments = function.get("arguments")
    if isinstance(arguments, dict):  # a few local servers send an object, not its JSON text
        arguments = json.dumps(arguments)
    assembler.add(
        index if isinstance(index, int) else default_index,
        id=piece.get("id") if isinstance(piece.get("id"), str) else None,
        name=function.get("name") if isinstance(function.get("name"), str) else None,
        arguments=arguments if isinstance(arguments, str) else "",
    )


class ChatCompletionsApi(_calls.ProviderApi):
    """What the OpenAI-compatible API does its own way; the calls are shared (_calls.py)."""

    chat_path = "/chat/completions"
    models_path = "/models"

    def base_url(self, config: ProviderConfig) -> str:
        base = _http.clean_base_url(config.base_url)
        if not base:
            raise ProviderError("connection", "No base URL is set for this connection.")
        return base

    def headers(self, config: ProviderConfig, *, stream: bool) -> dict[str, str]:
        headers = {
            "Accept": "text/event-stream" if stream else "application/json",
            "User-Agent": _http.USER_AGENT,
        }
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        headers.update(config.extra_headers)
        return headers

    def build_body(
        self, config: ProviderConfig, messages: _calls.Messages, params: GenerationParams, *, stream: bool
    ) -> dict[str, Any]:
        """The request body; `config.extra_body` goes on top so users can pass server-specific options."""
        body: dict[str, Any] = {
            "model": config.model,
            "messages": [_wire_message(m) for m in messages],
            "stream": stream,
        }
        if params.tools:
            body["tools"] = [{"type": "function", "function": dict(t)} for t in params.tools]
        if stream:
            body["stream_options"] = {"include_usage": True}
        body.update(_calls.sampling_fields(params))
        # Local servers' names (vLLM, tabbyAPI, KoboldCpp, text-generation-webui); OpenAI itself has none.
        if params.min_p is not None:
            body["min_p"] = params.min_p
        if params.repetition_penalty is not None:
            body["repetition_penalty"] = params.repetition_penalty
        for name in ("frequency_penalty", "presence_penalty"):
            if getattr(params, name) is not None:
                body[name] = getattr(params, name)
        if params.max_tokens is not None:
            body["max_tokens"] = params.max_tokens
        if params.stop:
            body["stop"] = list(params.stop)
        return _http.deep_merge(body, config.extra_body)

    def completion_from(self, data: dict[str, Any], state: _http.CallState) -> Completion:
        if data.get("error"):
            raise _http.error_from_stream_payload(data["error"], state)
        self._check_shape(data, state)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ProviderError("bad_response", f"The answer from {state.base_url} has no choices in it.")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        content = message.get("content")
        return Completion(
            text=content if isinstance(content, str) else "",
            model=data.get("model") or None,
            usage=read_usage(data.get("usage")),
            finish_reason=choice.get("finish_reason"),
            reasoning=_reasoning(message),
            tool_calls=_calls_of(message.get("tool_calls")),
        )

    async def read_events(
        self, events: AsyncIterator[tuple[str, Any]], state: _http.CallState, end: _calls.ReplyEnd
    ) -> AsyncIterator[StreamEvent]:
        """Text and reasoning deltas from the streamed chunks; model, usage, finish reason and the
        assembled tool calls go into `end`."""
        calls = ToolCallAssembler()
        async for _event, payload in events:
            if payload == _http.SSE_DONE:
                break
            if not isinstance(payload, dict):
                raise ProviderError(
                    "bad_response",
                    f"The server at {state.base_url} sent a streamed piece that is not an object.",
                )
            if payload.get("error"):
                raise _http.error_from_stream_payload(payload["error"], state)
            self._check_shape(payload, state)
            end.model = payload.get("model") or end.model
            end.usage = read_usage(payload.get("usage")) or end.usage
            choices = payload.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                continue
            choice = choices[0]
            delta = choice.get("delta")
            text = delta.get("content") if isinstance(delta, dict) else None
            text = text if isinstance(text, str) else ""
            reasoning = _reasoning(delta)
            if text or reasoning:
                yield StreamEvent(text=text, reasoning=reasoning)
            pieces = delta.get("tool_calls") if isinstance(delta, dict) else None
            for n, piece in enumerate(pieces if isinstance(pieces, list) else []):
                _add_piece(calls, piece, n)
            end.finish_reason = choice.get("finish_reason") or end.finish_reason
        end.tool_calls = calls.calls()

    def _check_shape(self, payload: dict[str, Any], state: _http.CallState) -> None:
        """A text-completion answer (`choices[].text`, llama.cpp's `content`, Ollama's `response`)
        would read as an empty reply: the URL leads to a text endpoint, or the server answers chat
        requests in another API's shape."""
        shape = _calls.answer_shape(payload)
        if shape is not None and shape != "chat":
            raise _calls.wrong_shape(state.base_url + self.chat_path, shape, expected="chat")

    def model_names(self, data: dict[str, Any]) -> list[str] | None:
        """Model ids in the server's order."""
        entries = data.get("data")
        if not isinstance(entries, list):
            # Ollama's native shape, in case the URL points at its /api rather than /v1.
            entries = data.get("models")
        if not isinstance(entries, list):
            return None
        names: list[str] = []
        for entry in entries:
            name = (entry.get("id") or entry.get("name")) if isinstance(entry, dict) else entry
            if isinstance(name, str) and name:
                names.append(name)
        return names


_API = ChatCompletionsApi()
# The module is the provider (get_provider hands it out), and the prompt report asks it for the body.
build_body = _API.build_body
stream_chat = _API.stream_chat
complete_chat = _API.complete_chat
probe = _API.probe

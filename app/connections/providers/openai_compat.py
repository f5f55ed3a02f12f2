"""OpenAI-compatible chat completions: OpenAI itself, OpenRouter, llama.cpp, Ollama, vLLM, LM Studio, KoboldCpp…

All of them take `POST {base_url}/chat/completions`; `base_url` already ends in /v1 for every preset.
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


def _base_url(config: ProviderConfig) -> str:
    base = _http.clean_base_url(config.base_url)
    if not base:
        raise ProviderError("connection", "No base URL is set for this connection.")
    return base


def _headers(config: ProviderConfig, *, stream: bool) -> dict[str, str]:
    headers = {
        "Accept": "text/event-stream" if stream else "application/json",
        "User-Agent": _http.USER_AGENT,
    }
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    headers.update(config.extra_headers)
    return headers


def build_body(
    config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams, *, stream: bool
) -> dict[str, Any]:
    """The request body; `config.extra_body` goes on top so users can pass server-specific options."""
    body: dict[str, Any] = {
        "model": config.model,
        # Only role and content: strict servers reject unknown keys such as our "cache" marker.
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.max_tokens is not None:
        body["max_tokens"] = params.max_tokens
    if params.stop:
        body["stop"] = list(params.stop)
    return _http.deep_merge(body, config.extra_body)


def _usage(raw: Any) -> Usage | None:
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


def _completion_from(data: dict[str, Any], state: _http.CallState) -> Completion:
    if data.get("error"):
        raise _http.error_from_stream_payload(data["error"], state)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ProviderError("bad_response", f"The answer from {state.base_url} has no choices in it.")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    content = message.get("content")
    if content is None:
        # Some local servers answer in the legacy completions shape.
        content = choice.get("text")
    return Completion(
        text=content if isinstance(content, str) else "",
        model=data.get("model") or None,
        usage=_usage(data.get("usage")),
        finish_reason=choice.get("finish_reason"),
        reasoning=_reasoning(message),
    )


async def stream_chat(
    config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams
) -> AsyncIterator[StreamEvent]:
    """Text and reasoning deltas as they arrive, then exactly one closing event with usage, finish
    reason and model."""
    base = _base_url(config)
    state = _http.CallState(base_url=base, config=config)
    body = build_body(config, messages, params, stream=True)
    logger.debug("Streaming chat from %s (model %r, %d messages)", base, config.model, len(messages))
    model: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    events_seen = 0
    async with _http.translate_errors(state), _http.make_client(config) as client:
        async with client.stream(
            "POST", f"{base}/chat/completions", headers=_headers(config, stream=True), json=body
        ) as response:
            whole = await _http.check_stream_response(response, state)
            if whole is not None:
                # The server ignored "stream": hand the whole answer over as one delta.
                completion = _completion_from(whole, state)
                if completion.text or completion.reasoning:
                    yield StreamEvent(text=completion.text, reasoning=completion.reasoning)
                yield StreamEvent(
                    usage=completion.usage, finish_reason=completion.finish_reason, model=completion.model
                )
                return
            async for _event, payload in _http.iter_sse_json(response, state):
                events_seen += 1
                if payload == _http.SSE_DONE:
                    break
                if not isinstance(payload, dict):
                    raise ProviderError(
                        "bad_response", f"The server at {base} sent a streamed piece that is not an object."
                    )
                if payload.get("error"):
                    raise _http.error_from_stream_payload(payload["error"], state)
                model = payload.get("model") or model
                usage = _usage(payload.get("usage")) or usage
                choices = payload.get("choices")
                if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                    continue
                choice = choices[0]
                delta = choice.get("delta")
                text = delta.get("content") if isinstance(delta, dict) else None
                text = text if isinstance(text, str) else ""
                reasoning = _reasoning(delta)
                if text or reasoning:
                    state.text_seen = True
                    yield StreamEvent(text=text, reasoning=reasoning)
                finish_reason = choice.get("finish_reason") or finish_reason
    if not events_seen:
        raise ProviderError("bad_response", f"The server at {base} answered, but sent no streamed events.")
    yield StreamEvent(usage=usage, finish_reason=finish_reason, model=model)


async def complete_chat(
    config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams
) -> Completion:
    base = _base_url(config)
    state = _http.CallState(base_url=base, config=config)
    body = build_body(config, messages, params, stream=False)
    logger.debug("Chat completion from %s (model %r, %d messages)", base, config.model, len(messages))
    data = await _http.request_json(
        state, "POST", f"{base}/chat/completions", headers=_headers(config, stream=False), body=body
    )
    return _completion_from(data, state)


async def list_models(config: ProviderConfig) -> list[str]:
    """Model ids from `GET {base_url}/models`, in the server's order."""
    base = _base_url(config)
    state = _http.CallState(base_url=base, config=config)
    data = await _http.request_json(state, "GET", f"{base}/models", headers=_headers(config, stream=False))
    entries = data.get("data")
    if not isinstance(entries, list):
        # Ollama's native shape, in case the URL points at its /api rather than /v1.
        entries = data.get("models")
    if not isinstance(entries, list):
        raise ProviderError("bad_response", f"The model list from {base} has no 'data' list in it.")
    names: list[str] = []
    for entry in entries:
        name = (entry.get("id") or entry.get("name")) if isinstance(entry, dict) else entry
        if isinstance(name, str) and name:
            names.append(name)
    return names


async def probe(config: ProviderConfig) -> ProbeResult:
    """'Test connection': list models when no model is chosen, otherwise a one-token chat request."""
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

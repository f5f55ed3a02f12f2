"""The calls every provider makes the same way: stream a reply, complete one, list models, test the
connection.

A provider module subclasses `ProviderApi` with what its API does differently (paths, headers, request
body, how its answers and streamed events read) and exposes the calls of its one instance as its
`stream_chat`, `complete_chat` and `probe`: a fix to how a reply is streamed, or a failure worded,
lands in every provider at once. The text-completion backends (text_completion.py) send a prompt, not
messages: they share `HttpApi`, the part under the chat calls.

An answer in another API's shape (a chat reply from a text endpoint, or the reverse) is named as such
(`answer_shape`, `wrong_shape`): read as this API's, it would come out empty.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import httpx

from app.connections.providers import _http
from app.connections.providers.base import (
    Completion,
    GenerationParams,
    ProbeResult,
    ProviderConfig,
    ProviderError,
    StreamEvent,
    TextApi,
    ToolCall,
    Usage,
)

logger = logging.getLogger(__name__)

# The provider-neutral messages of the prompt builder (their shape: base.py).
Messages = list[dict[str, Any]]


@dataclass
class ReplyEnd:
    """What the closing event of a streamed reply carries. Providers spread it over several events,
    so the event reader fills it in as they arrive."""

    model: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


def sampling_fields(params: GenerationParams) -> dict[str, float]:
    """The sampling settings both chat APIs name alike, where set (max_tokens and the stop sequences
    they do not)."""
    fields: dict[str, float] = {}
    if params.temperature is not None:
        fields["temperature"] = params.temperature
    if params.top_p is not None:
        fields["top_p"] = params.top_p
    if params.top_k is not None:
        fields["top_k"] = params.top_k
    return fields


# The shapes an answer comes in: chat completions, or one of the text-completion APIs.
AnswerShape = Literal["chat", "openai_completions", "llamacpp", "ollama"]

_SHAPE_NAMES: dict[AnswerShape, str] = {
    "chat": "chat-completions",
    "openai_completions": "OpenAI text-completions (choices[].text)",
    "llamacpp": "llama.cpp /completion",
    "ollama": "Ollama /api/generate",
}
TEXT_API_NAMES: dict[TextApi, str] = {
    "openai_completions": "OpenAI-compatible completions",
    "llamacpp": "llama.cpp",
    "ollama": "Ollama",
}


def answer_shape(payload: dict[str, Any]) -> AnswerShape | None:
    """The API whose shape a JSON answer, or a streamed piece of one, has; None when it shows none of
    their marks (a usage-only piece, an error)."""
    choices = payload.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        first = choices[0]
        if "message" in first or "delta" in first:
            return "chat"
        return "openai_completions" if "text" in first else None
    if "done" in payload:
        if isinstance(payload.get("message"), dict):
            return "chat"  # Ollama's own /api/chat
        if "response" in payload:
            return "ollama"
    if "content" in payload and "stop" in payload:
        return "llamacpp"
    return None


def wrong_shape(url: str, shape: AnswerShape, *, expected: AnswerShape) -> ProviderError:
    """The error for an answer in `shape` from `url`, asked for in `expected`'s: what to choose instead."""
    if shape == "chat":
        advice = "choose the chat connection kind, or the right text-completion API"
    elif expected == "chat":
        advice = f"choose the text-completion connection kind, with the {TEXT_API_NAMES[shape]} API"
    else:
        advice = f"choose the {TEXT_API_NAMES[shape]} text-completion API"
    message = f"{url} answered in the {_SHAPE_NAMES[shape]} shape: {advice}."
    logger.warning("Answer in the wrong shape: %s", message)
    return ProviderError("bad_response", message)


class _CountedEvents:
    """The response's server-sent events, counted as the reader takes them: a 200 that streams none
    is a bad answer, not an empty reply."""

    def __init__(self, events: AsyncIterator[tuple[str, Any]]) -> None:
        self._events = events
        self.count = 0

    def __aiter__(self) -> _CountedEvents:
        return self

    async def __anext__(self) -> tuple[str, Any]:
        item = await self._events.__anext__()
        self.count += 1
        return item


class HttpApi(abc.ABC):
    """An HTTP API answering with a model's reply, whole or streamed: the abstract parts are what
    differs between APIs, the rest the calls that go the same way for all of them."""

    models_path: ClassVar[str]  # appended to the base URL for the model list
    ndjson: ClassVar[bool] = False  # streams newline-delimited JSON (Ollama), not server-sent events

    @abc.abstractmethod
    def base_url(self, config: ProviderConfig) -> str:
        """The base URL without its trailing slash."""

    @abc.abstractmethod
    def headers(self, config: ProviderConfig, *, stream: bool) -> dict[str, str]: ...

    @abc.abstractmethod
    def completion_from(self, data: dict[str, Any], state: _http.CallState) -> Completion:
        """A whole answer read, or the error it reports raised."""

    @abc.abstractmethod
    def read_events(
        self, events: AsyncIterator[tuple[str, Any]], state: _http.CallState, end: ReplyEnd
    ) -> AsyncIterator[StreamEvent]:
        """Text and reasoning deltas from (event name, payload) pairs, up to the API's end marker;
        what closes the reply goes into `end`."""

    @abc.abstractmethod
    def model_names(self, data: dict[str, Any]) -> list[str] | None:
        """The model ids in a model list answer; None when it holds no list."""

    def events(self, response: httpx.Response, state: _http.CallState) -> AsyncIterator[tuple[str, Any]]:
        """The streamed response as (event name, payload) pairs, read the way its content type says
        (a server streaming in another API's way then has its answer named by its shape), else the
        API's own way."""
        content_type = _http.content_type(response)
        if content_type == "application/x-ndjson" or (self.ndjson and content_type != "text/event-stream"):
            return _http.iter_ndjson(response, state)
        return _http.iter_sse_json(response, state)

    def call_state(self, config: ProviderConfig) -> _http.CallState:
        return _http.CallState(base_url=self.base_url(config), config=config)

    async def stream_reply(
        self, state: _http.CallState, url: str, body: dict[str, Any], end: ReplyEnd
    ) -> AsyncIterator[StreamEvent]:
        """Text and reasoning deltas as they arrive, then exactly one closing event with usage, finish
        reason and model (filled into `end` as they arrive, for a caller that stops early)."""
        config = state.config
        async with _http.translate_errors(state), _http.make_client(config) as client:
            async with client.stream(
                "POST", url, headers=self.headers(config, stream=True), json=body
            ) as response:
                whole = await _http.check_stream_response(response, state)
                if whole is not None:
                    # The server ignored "stream": hand the whole answer over as one delta.
                    completion = self.completion_from(whole, state)
                    if completion.text or completion.reasoning:
                        yield StreamEvent(text=completion.text, reasoning=completion.reasoning)
                    yield StreamEvent(
                        usage=completion.usage,
                        finish_reason=completion.finish_reason,
                        model=completion.model,
                        tool_calls=completion.tool_calls,
                    )
                    return
                events = _CountedEvents(self.events(response, state))
                # Closed with this generator (the user's Stop), before the response it reads is.
                async with contextlib.aclosing(self.read_events(events, state, end)) as deltas:
                    async for delta in deltas:
                        # A failure from here on is worded as one in the middle of the reply.
                        state.text_seen = True
                        yield delta
                if not events.count:
                    raise ProviderError(
                        "bad_response",
                        f"The server at {state.base_url} answered, but sent no streamed events.",
                    )
        # After the response is closed: a consumer that stops at the closing event holds no connection.
        yield StreamEvent(
            usage=end.usage, finish_reason=end.finish_reason, model=end.model, tool_calls=end.tool_calls
        )

    async def complete_reply(self, state: _http.CallState, url: str, body: dict[str, Any]) -> Completion:
        data = await _http.request_json(
            state, "POST", url, headers=self.headers(state.config, stream=False), body=body
        )
        return self.completion_from(data, state)

    async def list_models(self, config: ProviderConfig) -> list[str]:
        state = self.call_state(config)
        data = await _http.request_json(
            state, "GET", state.base_url + self.models_path, headers=self.headers(config, stream=False)
        )
        names = self.model_names(data)
        if names is None:
            raise ProviderError("bad_response", f"The model list from {state.base_url} has no list in it.")
        return names


class ProviderApi(HttpApi):
    """A chat API: messages in, the calls every chat provider makes the same way."""

    chat_path: ClassVar[str]  # appended to the base URL for a chat request

    @abc.abstractmethod
    def build_body(
        self, config: ProviderConfig, messages: Messages, params: GenerationParams, *, stream: bool
    ) -> dict[str, Any]: ...

    async def stream_chat(
        self, config: ProviderConfig, messages: Messages, params: GenerationParams
    ) -> AsyncIterator[StreamEvent]:
        """Text and reasoning deltas as they arrive, then exactly one closing event with usage, finish
        reason and model."""
        state = self.call_state(config)
        body = self.build_body(config, messages, params, stream=True)
        url = state.base_url + self.chat_path
        logger.debug("Streaming from %s (model %r, %d messages)", url, config.model, len(messages))
        async with contextlib.aclosing(self.stream_reply(state, url, body, ReplyEnd())) as events:
            async for event in events:
                yield event

    async def complete_chat(
        self, config: ProviderConfig, messages: Messages, params: GenerationParams
    ) -> Completion:
        state = self.call_state(config)
        body = self.build_body(config, messages, params, stream=False)
        url = state.base_url + self.chat_path
        logger.debug("Completion from %s (model %r, %d messages)", url, config.model, len(messages))
        return await self.complete_reply(state, url, body)

    async def probe(self, config: ProviderConfig) -> ProbeResult:
        """'Test connection': the model list when no model is chosen, otherwise a one-token chat request."""
        try:
            if not config.model:
                names = await self.list_models(config)
                return ProbeResult(
                    ok=True,
                    model=names[0] if names else None,
                    message=_http.models_message(names),
                    models=tuple(names),
                )
            completion = await self.complete_chat(
                config, [{"role": "user", "content": "Hi"}], GenerationParams(max_tokens=1)
            )
        except ProviderError as err:
            return ProbeResult(ok=False, model=None, message=str(err))
        name = completion.model or config.model
        return ProbeResult(ok=True, model=name, message=f"Connected to {name}.")

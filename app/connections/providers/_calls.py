"""The calls every provider makes the same way: stream a reply, complete one, list models, test the
connection.

A provider module subclasses `ProviderApi` with what its API does differently (paths, headers, request
body, how its answers and streamed events read) and exposes the calls of its one instance as its
`stream_chat`, `complete_chat` and `probe`: a fix to how a reply is streamed, or a failure worded,
lands in both providers at once.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar

from app.connections.providers import _http
from app.connections.providers.base import (
    Completion,
    GenerationParams,
    ProbeResult,
    ProviderConfig,
    ProviderError,
    StreamEvent,
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
    """The sampling settings both APIs name alike, where set (max_tokens and the stop sequences they
    do not)."""
    fields: dict[str, float] = {}
    if params.temperature is not None:
        fields["temperature"] = params.temperature
    if params.top_p is not None:
        fields["top_p"] = params.top_p
    return fields


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


class ProviderApi(abc.ABC):
    """One provider's HTTP API: the abstract parts are what differs between providers, the rest the
    calls that go the same way for all of them."""

    chat_path: ClassVar[str]  # appended to the base URL for a chat request
    models_path: ClassVar[str]  # likewise for the model list

    @abc.abstractmethod
    def base_url(self, config: ProviderConfig) -> str:
        """The base URL without its trailing slash."""

    @abc.abstractmethod
    def headers(self, config: ProviderConfig, *, stream: bool) -> dict[str, str]: ...

    @abc.abstractmethod
    def build_body(
        self, config: ProviderConfig, messages: Messages, params: GenerationParams, *, stream: bool
    ) -> dict[str, Any]: ...

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

    async def stream_chat(
        self, config: ProviderConfig, messages: Messages, params: GenerationParams
    ) -> AsyncIterator[StreamEvent]:
        """Text and reasoning deltas as they arrive, then exactly one closing event with usage, finish
        reason and model."""
        base = self.base_url(config)
        state = _http.CallState(base_url=base, config=config)
        body = self.build_body(config, messages, params, stream=True)
        url = base + self.chat_path
        logger.debug("Streaming from %s (model %r, %d messages)", url, config.model, len(messages))
        end = ReplyEnd()
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
                events = _CountedEvents(_http.iter_sse_json(response, state))
                # Closed with this generator (the user's Stop), before the response it reads is.
                async with contextlib.aclosing(self.read_events(events, state, end)) as deltas:
                    async for delta in deltas:
                        # A failure from here on is worded as one in the middle of the reply.
                        state.text_seen = True
                        yield delta
                if not events.count:
                    raise ProviderError(
                        "bad_response", f"The server at {base} answered, but sent no streamed events."
                    )
        # After the response is closed: a consumer that stops at the closing event holds no connection.
        yield StreamEvent(
            usage=end.usage, finish_reason=end.finish_reason, model=end.model, tool_calls=end.tool_calls
        )

    async def complete_chat(
        self, config: ProviderConfig, messages: Messages, params: GenerationParams
    ) -> Completion:
        base = self.base_url(config)
        state = _http.CallState(base_url=base, config=config)
        body = self.build_body(config, messages, params, stream=False)
        url = base + self.chat_path
        logger.debug("Completion from %s (model %r, %d messages)", url, config.model, len(messages))
        data = await _http.request_json(
            state, "POST", url, headers=self.headers(config, stream=False), body=body
        )
        return self.completion_from(data, state)

    async def list_models(self, config: ProviderConfig) -> list[str]:
        base = self.base_url(config)
        state = _http.CallState(base_url=base, config=config)
        data = await _http.request_json(
            state, "GET", base + self.models_path, headers=self.headers(config, stream=False)
        )
        names = self.model_names(data)
        if names is None:
            raise ProviderError("bad_response", f"The model list from {base} has no 'data' list in it.")
        return names

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

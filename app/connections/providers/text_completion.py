"""Text completion: Sugo writes the whole prompt itself (instruct templates) and a local backend
continues it. The backend speaks one of three endpoint shapes, chosen by `config.text_api`:

- "openai_completions": `POST {base}/completions`, server-sent `choices[].text` pieces ending in
  [DONE]; models at `GET {base}/models` (KoboldCpp, vLLM, tabbyAPI, text-generation-webui).
- "llamacpp": `POST {root}/completion`, server-sent `{content, stop}` pieces, the last one with the
  stop reason and token counts; the model it runs at `GET {root}/props`.
- "ollama": `POST {root}/api/generate` with `raw: true` (no template of Ollama's around ours),
  newline-delimited `{response, done}` lines; models at `GET {root}/api/tags`.

The calls mirror the chat providers' (base.py): `stream_text`, `complete_text`, `probe`.

Decisions:
- Base URL. The OpenAI shape takes what the user pasted as it is, as the chat kind does, except a bare
  `http://host:port` (what servers print at start), which gets the /v1 every OpenAI-compatible server
  puts its API under. llama.cpp and Ollama are addressed at their root: a trailing /v1 (their
  OpenAI-compatible part, the address a chat connection uses) is dropped, and for Ollama /api too.
- Samplers go out under each backend's own names (repetition_penalty / repeat_penalty, max_tokens /
  n_predict / num_predict); one left None is not sent, so the backend's default applies. The OpenAI
  shape always says max_tokens: OpenAI and vLLM stop after 16 tokens without it.
- Ollama's keep_alive is not sent: the server's own setting (OLLAMA_KEEP_ALIVE) applies, and
  `extra_body` sets one per connection. `extra_body` merges over every body, options included.
- Stop strings are sent, and kept here too (core/stops.py): a backend that ignores them still ends the
  reply at the first one, even cut across deltas; the finish reason is then "stop". The stream is
  closed there, so a backend still generating stops with it, and such a reply has no usage.
- Reasoning stays in the text: the one reader of model answers (core/answers.py) splits `<think>`
  blocks downstream, as for the chat kind.
- An answer in another API's shape (chat completions, or another text shape) is an error naming the
  endpoint and what to choose instead; a 404 that names no model names the endpoint and the other
  shapes.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from pathlib import PurePosixPath
from typing import Any, ClassVar
from urllib.parse import urlsplit

from app.connections.core.stops import StopScanner, find_stop
from app.connections.providers import _calls, _http
from app.connections.providers.base import (
    Completion,
    GenerationParams,
    ProbeResult,
    ProviderConfig,
    ProviderError,
    StreamEvent,
    TextApi,
    Usage,
)
from app.connections.providers.openai_compat import read_usage

logger = logging.getLogger(__name__)

# Sent when no limit is set, where the API's own default is tiny (16 tokens for OpenAI and vLLM).
DEFAULT_MAX_TOKENS = 1024


def _put(target: dict[str, Any], name: str, value: Any) -> None:
    """A sampler under the backend's name, when it is set."""
    if value is not None:
        target[name] = value


def _file_name(value: Any) -> str | None:
    """A model's name from its file path (llama.cpp names models by their GGUF file)."""
    if not isinstance(value, str) or not value.strip():
        return None
    return PurePosixPath(value.strip().replace("\\", "/")).name or None


def _listed_ids(data: dict[str, Any]) -> list[str] | None:
    """The model ids of an OpenAI-shaped model list."""
    entries = data.get("data")
    if not isinstance(entries, list):
        return None
    return [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"]]


class TextBackend(_calls.HttpApi):
    """One text-completion endpoint shape: what it does its own way; the calls are the module's."""

    api: ClassVar[TextApi]
    path: ClassVar[str]  # the completion endpoint, after the base URL
    names_models: ClassVar[bool] = True  # requests name a model, so the connection test lists them
    stream_accept: ClassVar[str] = "text/event-stream"

    def base_url(self, config: ProviderConfig) -> str:
        base = _http.clean_base_url(config.base_url)
        if not base:
            raise ProviderError("connection", "No base URL is set for this connection.")
        return self.normalise(base)

    def normalise(self, base: str) -> str:
        return base

    def headers(self, config: ProviderConfig, *, stream: bool) -> dict[str, str]:
        headers = {
            "Accept": self.stream_accept if stream else "application/json",
            "User-Agent": _http.USER_AGENT,
        }
        if config.api_key:  # llama.cpp's --api-key, or a proxy in front of the backend
            headers["Authorization"] = f"Bearer {config.api_key}"
        headers.update(config.extra_headers)
        return headers

    def call_state(self, config: ProviderConfig) -> _http.CallState:
        state = super().call_state(config)
        others = " or ".join(name for api, name in _calls.TEXT_API_NAMES.items() if api != self.api)
        state.endpoint_hint = (
            f"If the server does not speak the {_calls.TEXT_API_NAMES[self.api]} API, choose another "
            f"text-completion API ({others}); if it does, check the base URL."
        )
        return state

    @abc.abstractmethod
    def build_body(
        self, config: ProviderConfig, prompt: str, params: GenerationParams, *, stream: bool
    ) -> dict[str, Any]:
        """The request body; `config.extra_body` goes on top so users can pass server-specific options."""

    def check_shape(self, payload: dict[str, Any], state: _http.CallState) -> None:
        """Another API's answer would read as an empty reply: say whose it is instead."""
        shape = _calls.answer_shape(payload)
        if shape is not None and shape != self.api:
            raise _calls.wrong_shape(state.base_url + self.path, shape, expected=self.api)

    def check_payload(self, payload: Any, state: _http.CallState) -> dict[str, Any]:
        """A streamed piece as an object of this API's shape, or the error it is or reports raised."""
        if not isinstance(payload, dict):
            raise ProviderError(
                "bad_response", f"The server at {state.base_url} sent a streamed piece that is not an object."
            )
        if payload.get("error"):
            raise _http.error_from_stream_payload(payload["error"], state)
        self.check_shape(payload, state)
        return payload

    def answer_field(self, data: dict[str, Any], key: str, state: _http.CallState) -> str:
        """The text of a whole answer, which must be there."""
        if data.get("error"):
            raise _http.error_from_stream_payload(data["error"], state)
        self.check_shape(data, state)
        text = data.get(key)
        if not isinstance(text, str):
            raise ProviderError(
                "bad_response", f"The answer from {state.base_url}{self.path} has no '{key}' text in it."
            )
        return text

    async def served_model(self, config: ProviderConfig) -> str | None:
        """The model the server says it runs, for the connection test; None when it does not say."""
        return None


class OpenAICompletions(TextBackend):
    api = "openai_completions"
    path = "/completions"
    models_path = "/models"

    def normalise(self, base: str) -> str:
        return base if urlsplit(base).path else base + "/v1"

    def build_body(
        self, config: ProviderConfig, prompt: str, params: GenerationParams, *, stream: bool
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": config.model,
            "prompt": prompt,
            "stream": stream,
            "max_tokens": params.max_tokens if params.max_tokens is not None else DEFAULT_MAX_TOKENS,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        _put(body, "temperature", params.temperature)
        _put(body, "top_p", params.top_p)
        _put(body, "top_k", params.top_k)
        _put(body, "min_p", params.min_p)
        _put(body, "repetition_penalty", params.repetition_penalty)
        _put(body, "frequency_penalty", params.frequency_penalty)
        _put(body, "presence_penalty", params.presence_penalty)
        if params.stop:
            body["stop"] = list(params.stop)
        return _http.deep_merge(body, config.extra_body)

    def _choice(self, data: dict[str, Any]) -> dict[str, Any] | None:
        choices = data.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            return choices[0]
        return None

    def completion_from(self, data: dict[str, Any], state: _http.CallState) -> Completion:
        if data.get("error"):
            raise _http.error_from_stream_payload(data["error"], state)
        self.check_shape(data, state)
        choice = self._choice(data)
        if choice is None:
            raise ProviderError(
                "bad_response", f"The answer from {state.base_url}{self.path} has no choices in it."
            )
        text = choice.get("text")
        return Completion(
            text=text if isinstance(text, str) else "",
            model=data.get("model") or None,
            usage=read_usage(data.get("usage")),
            finish_reason=choice.get("finish_reason"),
        )

    async def read_events(
        self, events: AsyncIterator[tuple[str, Any]], state: _http.CallState, end: _calls.ReplyEnd
    ) -> AsyncIterator[StreamEvent]:
        async for _event, payload in events:
            if payload == _http.SSE_DONE:
                break
            payload = self.check_payload(payload, state)
            end.model = payload.get("model") or end.model
            end.usage = read_usage(payload.get("usage")) or end.usage
            choice = self._choice(payload)
            if choice is None:
                continue  # the usage piece
            text = choice.get("text")
            if isinstance(text, str) and text:
                yield StreamEvent(text=text)
            end.finish_reason = choice.get("finish_reason") or end.finish_reason

    def model_names(self, data: dict[str, Any]) -> list[str] | None:
        return _listed_ids(data)


def _llamacpp_end(data: dict[str, Any]) -> tuple[str, Usage, str | None]:
    """(finish reason, usage, model) from llama.cpp's last piece or whole answer."""
    # Newer builds say stop_type ("eos", "word", "limit"); older ones stopped_eos/_word/_limit.
    cut = data.get("stop_type") == "limit" or data.get("stopped_limit") is True
    timings = data.get("timings") if isinstance(data.get("timings"), dict) else {}
    usage = Usage(
        input_tokens=_http.as_int(data.get("tokens_evaluated")),
        output_tokens=_http.as_int(data.get("tokens_predicted")),
        cached_input_tokens=_http.as_int(timings.get("cache_n")),
    )
    return ("length" if cut else "stop"), usage, _file_name(data.get("model"))


class LlamaCpp(TextBackend):
    api = "llamacpp"
    path = "/completion"
    models_path = "/v1/models"
    names_models = False  # a llama.cpp server runs the one model it was started with

    def normalise(self, base: str) -> str:
        return base.removesuffix("/v1")

    def build_body(
        self, config: ProviderConfig, prompt: str, params: GenerationParams, *, stream: bool
    ) -> dict[str, Any]:
        # cache_prompt: the slot keeps the prompt's evaluated tokens, so the next turn (the same prompt
        # and a little more) only evaluates what is new. Off by default in older builds.
        body: dict[str, Any] = {"prompt": prompt, "stream": stream, "cache_prompt": True}
        if config.model:  # llama.cpp ignores it; a proxy in front (llama-swap) picks the model by it
            body["model"] = config.model
        _put(body, "n_predict", params.max_tokens)
        _put(body, "temperature", params.temperature)
        _put(body, "top_p", params.top_p)
        _put(body, "top_k", params.top_k)
        _put(body, "min_p", params.min_p)
        _put(body, "repeat_penalty", params.repetition_penalty)
        if params.stop:
            body["stop"] = list(params.stop)
        return _http.deep_merge(body, config.extra_body)

    def completion_from(self, data: dict[str, Any], state: _http.CallState) -> Completion:
        text = self.answer_field(data, "content", state)
        finish, usage, model = _llamacpp_end(data)
        return Completion(text=text, model=model, usage=usage, finish_reason=finish)

    async def read_events(
        self, events: AsyncIterator[tuple[str, Any]], state: _http.CallState, end: _calls.ReplyEnd
    ) -> AsyncIterator[StreamEvent]:
        async for _event, payload in events:
            if payload == _http.SSE_DONE:
                break
            payload = self.check_payload(payload, state)
            text = payload.get("content")
            if isinstance(text, str) and text:
                yield StreamEvent(text=text)
            if payload.get("stop") is True:
                end.finish_reason, end.usage, model = _llamacpp_end(payload)
                end.model = model or end.model
                break

    def model_names(self, data: dict[str, Any]) -> list[str] | None:
        return _listed_ids(data)

    async def served_model(self, config: ProviderConfig) -> str | None:
        state = self.call_state(config)
        headers = self.headers(config, stream=False)
        try:
            props = await _http.request_json(state, "GET", state.base_url + "/props", headers=headers)
        except ProviderError as err:
            if err.kind != "not_found":
                raise
            # Older builds and some proxies have no /props; /health at least says the server is up.
            health = self.call_state(config)
            await _http.request_json(health, "GET", health.base_url + "/health", headers=headers)
            return None
        return _file_name(props.get("model_alias")) or _file_name(props.get("model_path"))


def _ollama_usage(data: dict[str, Any]) -> Usage | None:
    usage = Usage(
        input_tokens=_http.as_int(data.get("prompt_eval_count")),
        output_tokens=_http.as_int(data.get("eval_count")),
    )
    return usage if usage != Usage() else None


def _ollama_thinking(data: dict[str, Any]) -> str:
    # Only with `think` set (extra_body): raw prompts otherwise keep any reasoning in the text.
    thinking = data.get("thinking")
    return thinking if isinstance(thinking, str) else ""


class Ollama(TextBackend):
    api = "ollama"
    path = "/api/generate"
    models_path = "/api/tags"
    stream_accept = "application/x-ndjson"
    ndjson = True

    def normalise(self, base: str) -> str:
        return base.removesuffix("/v1").removesuffix("/api")

    def build_body(
        self, config: ProviderConfig, prompt: str, params: GenerationParams, *, stream: bool
    ) -> dict[str, Any]:
        options: dict[str, Any] = {}
        _put(options, "num_predict", params.max_tokens)
        _put(options, "num_ctx", config.context_size)
        if params.stop:
            options["stop"] = list(params.stop)
        _put(options, "temperature", params.temperature)
        _put(options, "top_k", params.top_k)
        _put(options, "top_p", params.top_p)
        _put(options, "min_p", params.min_p)
        _put(options, "repeat_penalty", params.repetition_penalty)
        body: dict[str, Any] = {"model": config.model, "prompt": prompt, "stream": stream, "raw": True}
        if options:
            body["options"] = options
        return _http.deep_merge(body, config.extra_body)

    def completion_from(self, data: dict[str, Any], state: _http.CallState) -> Completion:
        text = self.answer_field(data, "response", state)
        return Completion(
            text=text,
            model=data.get("model") or None,
            usage=_ollama_usage(data),
            finish_reason=data.get("done_reason") or "stop",
            reasoning=_ollama_thinking(data),
        )

    async def read_events(
        self, events: AsyncIterator[tuple[str, Any]], state: _http.CallState, end: _calls.ReplyEnd
    ) -> AsyncIterator[StreamEvent]:
        async for _event, payload in events:
            payload = self.check_payload(payload, state)
            text = payload.get("response")
            text = text if isinstance(text, str) else ""
            reasoning = _ollama_thinking(payload)
            if text or reasoning:
                yield StreamEvent(text=text, reasoning=reasoning)
            end.model = payload.get("model") or end.model
            if payload.get("done") is True:
                end.usage = _ollama_usage(payload)
                end.finish_reason = payload.get("done_reason") or "stop"
                break

    def model_names(self, data: dict[str, Any]) -> list[str] | None:
        entries = data.get("models")
        if not isinstance(entries, list):
            return None
        names = [e.get("name") or e.get("model") for e in entries if isinstance(e, dict)]
        return [n for n in names if isinstance(n, str) and n]


BACKENDS: dict[TextApi, TextBackend] = {
    "openai_completions": OpenAICompletions(),
    "llamacpp": LlamaCpp(),
    "ollama": Ollama(),
}


def backend_for(config: ProviderConfig) -> TextBackend:
    """The endpoint shape the connection chose."""
    backend = BACKENDS.get(config.text_api)  # type: ignore[arg-type]
    if backend is None:
        choices = ", ".join(_calls.TEXT_API_NAMES.values())
        raise ProviderError(
            "bad_request",
            f"No text-completion API is chosen for this connection ({config.text_api!r}); choose one of: {choices}.",
        )
    return backend


async def stream_text(
    config: ProviderConfig, prompt: str, params: GenerationParams
) -> AsyncIterator[StreamEvent]:
    """Text deltas as they arrive, up to the first stop string, then exactly one closing event with
    usage, finish reason and model."""
    backend = backend_for(config)
    state = backend.call_state(config)
    url = state.base_url + backend.path
    body = backend.build_body(config, prompt, params, stream=True)
    logger.debug("Streaming text from %s (model %r, %d characters of prompt)", url, config.model, len(prompt))
    stops = StopScanner(params.stop)
    end = _calls.ReplyEnd()
    async with contextlib.aclosing(backend.stream_reply(state, url, body, end)) as events:
        try:
            async for event in events:
                if not event.text and not event.reasoning:  # the closing event
                    if rest := stops.finish():
                        yield StreamEvent(text=rest)
                    yield event
                    return
                text = stops.feed(event.text)
                if text or event.reasoning:
                    yield StreamEvent(text=text, reasoning=event.reasoning)
                if stops.stopped:
                    break
        except ProviderError:
            # What was held for a stop string that never came is the model's: the partial reply keeps it.
            if rest := stops.finish():
                yield StreamEvent(text=rest)
            raise
    # Ended at a stop string the backend did not keep: the stream is closed, and the backend with it.
    yield StreamEvent(finish_reason="stop", model=end.model, usage=end.usage)


async def complete_text(config: ProviderConfig, prompt: str, params: GenerationParams) -> Completion:
    """A whole reply, up to the first stop string."""
    backend = backend_for(config)
    state = backend.call_state(config)
    url = state.base_url + backend.path
    body = backend.build_body(config, prompt, params, stream=False)
    logger.debug(
        "Text completion from %s (model %r, %d characters of prompt)", url, config.model, len(prompt)
    )
    completion = await backend.complete_reply(state, url, body)
    cut = find_stop(completion.text, params.stop)
    if cut is None:
        return completion
    return dataclasses.replace(completion, text=completion.text[:cut], finish_reason="stop")


async def probe(config: ProviderConfig) -> ProbeResult:
    """'Test connection': the model list when the API names models and none is chosen; otherwise a
    one-token completion (llama.cpp is first asked which model it runs)."""
    try:
        backend = backend_for(config)
        if backend.names_models and not config.model:
            names = await backend.list_models(config)
            return ProbeResult(
                ok=True,
                model=names[0] if names else None,
                message=_http.models_message(names),
                models=tuple(names),
            )
        served = await backend.served_model(config)
        completion = await complete_text(config, "Hi", GenerationParams(max_tokens=1))
    except ProviderError as err:
        return ProbeResult(ok=False, model=None, message=str(err))
    name = served or completion.model or config.model
    if not name:
        return ProbeResult(ok=True, model=None, message="Connected.")
    return ProbeResult(ok=True, model=name, message=f"Connected to {name}.", models=(name,) if served else ())

"""What every provider speaks: plain configs in, text deltas out, errors that name their cause.

A provider module exposes three coroutines with these signatures:

    stream_chat(config, messages, params) -> AsyncIterator[StreamEvent]   # text and reasoning deltas
    complete_chat(config, messages, params) -> Completion
    probe(config) -> ProbeResult          # "Test connection": a tiny real request

`messages` is the provider-neutral list built by the prompt builder:
[{"role": "system" | "user" | "assistant", "content": str}, ...], optionally with
"cache": True on the last message of the stable prefix (Anthropic marks a cache breakpoint there).
Tool rounds add two shapes: an assistant message with "tool_calls": [{"id", "name", "arguments"
(a JSON string)}] (its content may be ""), and {"role": "tool", "tool_call_id", "name", "content",
"is_error"} for each result; each provider writes them as its API expects. `params.tools` declares
the tools ({name, description, parameters (JSON schema)}); none declared, none are sent.

Text completion (`text_completion`, kind "text") speaks the same contract with a prompt Sugo built
itself in place of the messages: stream_text(config, prompt, params), complete_text(config, prompt,
params), probe(config); `config.text_api` says which endpoint shape the backend has.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# Re-exported: the providers' contract names it.
from app.connections.core.toolcalls import ToolCall as ToolCall

ProviderKind = Literal["openai", "anthropic", "text"]
# The endpoint shapes a text-completion backend ("text" kind; providers/text_completion.py) speaks:
# OpenAI-compatible `/completions` (KoboldCpp, vLLM, tabbyAPI, text-generation-webui), llama.cpp's own
# `/completion`, Ollama's `/api/generate`.
TextApi = Literal["openai_completions", "llamacpp", "ollama"]

# The causes a user can act on; the UI words each one differently.
ErrorKind = Literal[
    "auth",  # 401/403: bad or missing key
    "not_found",  # 404: wrong model name or wrong base URL
    "rate_limit",  # 429: slow down or top up credit
    "timeout",  # no answer in time
    "connection",  # refused / DNS / TLS: nothing is listening there
    "bad_request",  # 400/422: the server rejected the request (context too long, bad parameter)
    "server",  # 5xx
    "bad_response",  # the answer could not be understood (not JSON, broken SSE)
    "stream_broken",  # the connection dropped in the middle of a streamed reply
]


@dataclass(frozen=True)
class ProviderConfig:
    kind: ProviderKind
    base_url: str
    model: str
    api_key: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 300.0
    # Text completion (kind "text"): the instruct and context templates, as their SillyTavern files.
    instruct_template: dict[str, Any] = field(default_factory=dict)
    context_template: dict[str, Any] = field(default_factory=dict)
    connect_timeout_s: float = 10.0
    # Text completion only: the backend's endpoint shape, and the context size Ollama is told (num_ctx:
    # its default is a few thousand tokens, and it silently drops the start of a longer prompt).
    text_api: TextApi | None = None
    context_size: int | None = None


@dataclass(frozen=True)
class GenerationParams:
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    # Samplers most chat APIs lack; None: not sent, the server's default applies.
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    # OpenAI's penalties (a preset's, from SillyTavern or Marinara); sent by the OpenAI-shaped APIs only.
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    # Tool declarations offered to the model, provider-neutral: {name, description, parameters}.
    tools: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None


@dataclass(frozen=True)
class StreamEvent:
    """One piece of a streamed reply: a text delta, a delta of the provider's own reasoning field
    (OpenAI-compatible `reasoning_content`/`reasoning`, Anthropic thinking), or the closing
    usage/finish reason. Reasoning inside the text (`<think>`) is left there: the one reader of model
    answers (app/connections/core/answers.py) splits both kinds."""

    text: str = ""
    usage: Usage | None = None
    finish_reason: str | None = None
    model: str | None = None
    reasoning: str = ""
    # On the closing event only: the tool calls the answer asked for, in order.
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class Completion:
    text: str
    model: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    reasoning: str = ""  # the provider's own reasoning field, as in StreamEvent
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    model: str | None
    message: str
    models: tuple[str, ...] = ()  # the server's model list, when it was asked for one (the form offers them)


class ProviderError(Exception):
    """A failure with a cause the user can act on. `str(err)` is a complete sentence for the UI."""

    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.status = status


class Provider(Protocol):
    def stream_chat(
        self, config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams
    ) -> AsyncIterator[StreamEvent]: ...

    async def complete_chat(
        self, config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams
    ) -> Completion: ...

    async def probe(self, config: ProviderConfig) -> ProbeResult: ...

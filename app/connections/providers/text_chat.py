"""The text-completion connection kind ("text") behind the chat providers' contract (base.py): the
messages are written into one raw prompt with the connection's templates (core/chat_as_text.py) and
sent by `text_completion`. Every caller (replies, summaries, scene checks) reaches a text connection
the way it reaches a chat one; a reply's prompt arrives already written (one "raw" message)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from app.connections.core.chat_as_text import chat_as_text
from app.connections.core.template_files import TemplateError
from app.connections.providers import text_completion
from app.connections.providers.base import (
    Completion,
    GenerationParams,
    ProbeResult,
    ProviderConfig,
    ProviderError,
    StreamEvent,
)


def _prompt(config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams):
    try:
        raw = chat_as_text(messages, config.instruct_template, config.context_template)
    except TemplateError as err:
        raise ProviderError("bad_request", f"The connection's template cannot be used: {err}") from err
    stops = tuple(dict.fromkeys((*params.stop, *raw.stop)))
    return raw.text, dataclasses.replace(params, stop=stops, tools=())


async def stream_chat(
    config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams
) -> AsyncIterator[StreamEvent]:
    prompt, params = _prompt(config, messages, params)
    async for event in text_completion.stream_text(config, prompt, params):
        yield event


async def complete_chat(
    config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams
) -> Completion:
    prompt, params = _prompt(config, messages, params)
    return await text_completion.complete_text(config, prompt, params)


async def probe(config: ProviderConfig) -> ProbeResult:
    return await text_completion.probe(config)

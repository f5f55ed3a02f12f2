"""Model providers: one module per wire protocol, each speaking the contract in `base`; what their calls
share (streaming, failures, the connection test) is `_calls`, the HTTP plumbing under it `_http`.

A text-completion connection ("text") is reached through `text_chat`, which writes the messages into
one raw prompt with the connection's templates and sends it with `text_completion` (`config.text_api`
picks the endpoint shape)."""

from __future__ import annotations

import asyncio
from typing import Any

from app.connections.providers import _http, anthropic, openai_compat, text_chat
from app.connections.providers.base import Completion, GenerationParams, Provider, ProviderConfig

_PROVIDERS: dict[str, Provider] = {
    "openai": openai_compat,
    "anthropic": anthropic,
    "text": text_chat,
}


def get_provider(kind: str) -> Provider:
    """The provider module for a connection kind ("openai", "anthropic" or "text")."""
    try:
        return _PROVIDERS[kind]
    except KeyError:
        raise ValueError(
            f"Unknown provider kind {kind!r}; expected one of: {', '.join(_PROVIDERS)}"
        ) from None


def complete_chat_blocking(
    config: ProviderConfig, messages: list[dict[str, Any]], params: GenerationParams
) -> Completion:
    """A whole reply, asked from a worker thread (background summaries, scene checks and recaps) on a
    loop of its own. The loop's pooled clients are closed with it: left open, their connections would
    hold a socket each until the garbage collector came by (hundreds over a day of background work)."""

    async def call() -> Completion:
        try:
            return await get_provider(config.kind).complete_chat(config, messages, params)
        finally:
            await _http.close_clients()

    return asyncio.run(call())

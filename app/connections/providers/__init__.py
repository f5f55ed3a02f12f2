"""Model providers: one module per wire protocol, each speaking the contract in `base`; what their calls
share (streaming, failures, the connection test) is `_calls`, the HTTP plumbing under it `_http`.

`text_completion` sends a prompt Sugo built, not messages, so `get_provider` (which hands out chat
providers) does not list it: callers import it by name, and `config.text_api` picks its endpoint shape."""

from __future__ import annotations

import asyncio
from typing import Any

from app.connections.providers import _http, anthropic, openai_compat
from app.connections.providers.base import Completion, GenerationParams, Provider, ProviderConfig

_PROVIDERS: dict[str, Provider] = {
    "openai": openai_compat,
    "anthropic": anthropic,
}


def get_provider(kind: str) -> Provider:
    """The provider module for a connection kind ("openai" or "anthropic")."""
    if kind == "text":
        raise ValueError("A text-completion connection has no chat provider: call providers.text_completion.")
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

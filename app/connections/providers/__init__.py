"""Model providers: one module per wire protocol, each speaking the contract in `base`."""

from __future__ import annotations

from app.connections.providers import anthropic, openai_compat
from app.connections.providers.base import Provider

_PROVIDERS: dict[str, Provider] = {
    "openai": openai_compat,
    "anthropic": anthropic,
}


def get_provider(kind: str) -> Provider:
    """The provider module for a connection kind ("openai" or "anthropic")."""
    try:
        return _PROVIDERS[kind]
    except KeyError:
        raise ValueError(
            f"Unknown provider kind {kind!r}; expected one of: {', '.join(_PROVIDERS)}"
        ) from None

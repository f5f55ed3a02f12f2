"""Reading a provider's stream of events in a test: all of it, or up to the error that ends it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.connections.providers.base import ProviderError, StreamEvent


async def collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


async def collect_until_error(events: AsyncIterator[StreamEvent]) -> tuple[str, ProviderError]:
    """The text streamed before the error, and the error (the test fails if none comes)."""
    text = ""
    with pytest.raises(ProviderError) as caught:
        async for event in events:
            text += event.text
    return text, caught.value

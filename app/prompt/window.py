"""Which messages of the history may enter the prompt: the newest `limit` visible ones.
(The batch-dropping window that keeps the prompt prefix stable replaces this in a later step.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

DEFAULT_RECENT_LIMIT = 80
MIN_RECENT_LIMIT = 20
MAX_RECENT_LIMIT = 100


def recent_window(messages: Sequence[T], limit: int) -> list[T]:
    limit = max(1, limit)
    return list(messages[-limit:])

"""The recent-message window: which messages of the history may enter the prompt.

It grows to the limit, then drops the oldest messages in one batch (30% of the limit, rounded down
to an even number: 24 at the default 80), keeping the chat's first message. Between drops the
messages before the newest ones do not change, so the prompt prefix stays byte-identical from turn
to turn and providers' prompt caches keep hitting; a plain sliding window would shift it on every
message. The plan depends only on how many messages there are, so it needs no stored state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_RECENT_LIMIT = 80
MIN_RECENT_LIMIT = 20
MAX_RECENT_LIMIT = 100


def batch_size(limit: int) -> int:
    """30% of the limit rounded down to an even number: 24 at 80, 6 at 20 and at 25, 30 at 100."""
    size = (limit * 3) // 10
    return max(2, size - size % 2)


@dataclass(frozen=True)
class HistoryMessage:
    """One message as the prompt reads it."""

    id: int
    role: str  # "user" | "assistant" | "system"
    name: str
    content: str
    hidden: bool = False
    # The tool calls of the shown version ({id, name, arguments, result, error, at, ...}), for replay.
    tool_calls: tuple[dict, ...] = ()


@dataclass(frozen=True)
class WindowPlan:
    pinned: int  # 1 when the chat's first message is kept at the top of the window, else 0
    dropped: int  # how many of the messages after it were dropped, a whole number of batches
    size: int  # messages in the window, the pinned one included

    @property
    def recent(self) -> int:
        return self.size - self.pinned


def plan_window(total: int, limit: int, *, keep_first: bool = True) -> WindowPlan:
    """The window over `total` messages (oldest first). `keep_first` is false after a refresh mark,
    where the window starts at the mark."""
    limit = max(1, limit)
    pinned = 1 if keep_first and total > 1 else 0
    over = total - limit
    if over <= 0:
        return WindowPlan(pinned, 0, total)
    batch = batch_size(limit)
    dropped = -(-over // batch) * batch
    dropped = min(dropped, total - pinned - 1)  # the newest message always stays
    return WindowPlan(pinned, dropped, total - dropped)


def fit_window(sizes: Sequence[int], budget: int, *, pinned: int, batch: int) -> tuple[int, int]:
    """When the window's messages (token sizes, oldest first, pinned first) exceed the token budget,
    drop more of the oldest recent ones, again in whole batches so the prefix stays stable between
    turns. Returns (how many recent messages to drop, how many pinned to drop); the newest message
    always stays, and the pinned first message goes only when nothing else is left to drop."""
    total = sum(sizes)
    if total <= budget:
        return 0, 0
    recent = sizes[pinned:]
    drop = 0
    while total > budget and drop < len(recent) - 1:
        step = min(batch, len(recent) - 1 - drop)
        total -= sum(recent[drop : drop + step])
        drop += step
    drop_pinned = 0
    if total > budget and pinned:
        drop_pinned = pinned
    return drop, drop_pinned

"""What the user is waiting for right now, for background work to give way to (issue 23).

A reply being written is the one thing in Sugo a person watches happen: its prompt is built, its first
words are awaited, its text streams in. Background work that uses the same CPU (Memory Recall embedding
a chat's messages with the built-in model, seconds per batch on a small machine) then waits at its next
batch until no reply is being written, and goes on after: nothing of it is lost, it only starts later.
A reply's after-reply work schedules more of it, which then runs in the pause while the person reads
and types.

One per app, kept in `Services` (two apps in one process wait for their own replies only). The reply
path marks its replies (`reply()`); background loops call `wait_for_quiet()` between batches."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

# A reply that never ends (a provider that hangs past every timeout) must not stop background work for
# good: after this long the work goes on beside it.
LONGEST_WAIT_S = 300.0


class Foreground:
    """The replies this app is writing now, and the background threads waiting for them to end."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._replies = 0
        self._waiting = 0

    @contextmanager
    def reply(self) -> Iterator[None]:
        """A reply is being written for as long as this block runs."""
        with self._changed:
            self._replies += 1
        try:
            yield
        finally:
            with self._changed:
                self._replies -= 1
                self._changed.notify_all()

    @property
    def replying(self) -> bool:
        with self._changed:
            return self._replies > 0

    @property
    def waiting(self) -> int:
        """How many background threads are waiting for the replies to end (the tests watch it)."""
        with self._changed:
            return self._waiting

    def wait_for_quiet(self, longest_s: float = LONGEST_WAIT_S) -> None:
        """Return once no reply is being written (at once when none is), or after `longest_s`."""
        with self._changed:
            if not self._replies:
                return
            self._waiting += 1
            try:
                self._changed.wait_for(lambda: not self._replies, timeout=longest_s)
            finally:
                self._waiting -= 1

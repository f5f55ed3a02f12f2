"""Stop strings kept on Sugo's side: a reply ends at the first one even when the backend ignored `stop`
(some text-completion servers do, and an instruct template's end marker then runs on into the next turn).
Pure: no I/O.

Decisions:
- The reply ends where the stop string that completes first begins; of two completing at the same
  character, the one starting earlier wins ("\\nUser:" over "User:"). That is where a backend checking
  after each token stops. The stop string itself and everything after it are dropped.
- While streaming, the end of what arrived is held back only while it can still grow into a stop
  string (the longest end that begins one, at most the longest stop string less one character): a
  stop string cut across deltas is never shown, and text that cannot begin one is never delayed.
- Empty stop strings are ignored (every text would "contain" one).
"""

from __future__ import annotations

from collections.abc import Iterable


def _usable(stops: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for s in stops if s))


def find_stop(text: str, stops: Iterable[str]) -> int | None:
    """Where the reply in `text` ends because of a stop string; None when none is in it."""
    best: tuple[int, int] | None = None  # (end, start) of the match that completes first
    for stop in _usable(stops):
        start = text.find(stop)
        if start >= 0 and (best is None or (start + len(stop), start) < best):
            best = (start + len(stop), start)
    return None if best is None else best[1]


def _unfinished(text: str, stops: tuple[str, ...]) -> int:
    """How many characters at the end of `text` may still become a stop string."""
    longest = max((len(s) for s in stops), default=0)
    for size in range(min(len(text), longest - 1), 0, -1):
        tail = text[-size:]
        if any(len(s) > size and s.startswith(tail) for s in stops):
            return size
    return 0


class StopScanner:
    """A streamed reply cut at its first stop string. `feed` takes a delta and gives back the text to
    show now; once a stop string is complete it gives back what came before it and `stopped` is True
    (later deltas give nothing). `finish` gives back what was held when the reply ended without one."""

    def __init__(self, stops: Iterable[str]) -> None:
        self._stops = _usable(stops)
        self._held = ""
        self.stopped = False

    def feed(self, delta: str) -> str:
        if self.stopped:
            return ""
        if not self._stops:
            return delta
        text = self._held + delta
        cut = find_stop(text, self._stops)
        if cut is not None:
            self.stopped, self._held = True, ""
            return text[:cut]
        keep = _unfinished(text, self._stops)
        self._held = text[len(text) - keep :]
        return text[: len(text) - keep]

    def finish(self) -> str:
        held, self._held = self._held, ""
        return held

"""A reply's reasoning as it streams: split from the text by the one reader of model answers
(app/connections/core/answers.py), timed, and judged once the stream has ended.

Each version of a reply keeps its reasoning apart from its text, in the version's record beside
`usage` and `gen_started`: `reasoning` (the text) and `reasoning_ms` (how long the model thought). The
text (`content`) never holds it, so what reads `content` (later prompts, Memory Recall's chunks, Chat
Summary, scenes and recaps, exports) never sees it. The page shows it folded above the reply
("Thought for 12 s"), and a live "Thinking…" fold while it streams.

Decisions:
- How long the model thought runs from the moment the provider was asked (the prompt built) to the end
  of its reasoning: the first reply text after it, or the end of the stream. The wait for a local
  model to read the prompt is part of the wait the user sees, and a provider that sends its whole
  answer at once still gets a time.
- A reply that says nothing is a failed reply (status "error", so later prompts leave it out like every
  failed reply): "The model used its whole answer thinking; nothing was said." when it reasoned, "The
  model returned an empty reply." when it did not. Its reasoning stays with the version (the user can
  read what the model was doing), and Regenerate sits beside the sentence.
- Continue: a continuation that says nothing leaves the reply exactly as it was (text, state and
  reasoning), and the page is told why nothing was added. A continuation's reasoning is added after the
  version's own, and its time to the version's.
- Impersonate: only the text reaches the composer; the reasoning is dropped.
- Reasoning tags already inside a stored reply's text are read by the same reader wherever they come
  from: a migration moved those of replies written before into their versions' reasoning, an imported
  SillyTavern chat's replies are split on import (app/chats/st_io.py, with SillyTavern's own
  `extra.reasoning`), and whatever is left (a hand edit that types a `<think>` block) is kept in the
  text the user wrote but left out of the prompt's history (app/chats/history.py). Memory Recall,
  summaries and scenes read `content`, which holds no reasoning once it has come in by these paths.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app.connections.core.answers import EMPTY_REPLY, ONLY_THINKING, Piece, ReasoningSplitter

__all__ = ["EMPTY_REPLY", "ONLY_THINKING", "ReplyReading", "thought_label", "version_reasoning"]
REASONING_FIELDS = ("reasoning", "reasoning_ms")


class ReplyReading:
    """The reply's text apart from its reasoning, piece by piece, and how long the model thought.
    Made when the provider is asked: that is where the thinking time starts."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._splitter = ReasoningSplitter()
        self._clock = clock
        self._asked = clock()
        self._thinking = False
        self._ended_at: float | None = None
        self._ended_unsaid = False  # reasoning just ended: `take_thought` reports it once

    def feed(self, text: str, reasoning: str = "") -> list[Piece]:
        pieces = self._splitter.feed_reasoning(reasoning) + self._splitter.feed(text)
        self._time(pieces)
        return pieces

    def finish(self) -> list[Piece]:
        pieces = self._splitter.finish()
        self._time(pieces)
        if self._thinking:
            self._ended_at, self._thinking = self._clock(), False
        return pieces

    def _time(self, pieces: list[Piece]) -> None:
        for piece in pieces:
            if piece.kind != "text":
                self._thinking = True
            elif self._thinking:
                self._ended_at, self._thinking, self._ended_unsaid = self._clock(), False, True

    @property
    def reasoning(self) -> str:
        return self._splitter.reasoning

    @property
    def had_reasoning(self) -> bool:
        return self._splitter.had_reasoning

    @property
    def reasoning_ms(self) -> int | None:
        if not self.reasoning:
            return None
        end = self._ended_at if self._ended_at is not None else self._clock()
        return max(0, round((end - self._asked) * 1000))

    def take_thought(self) -> int | None:
        """How long the model thought, once, when its reasoning has just ended and the reply text begun."""
        if not self._ended_unsaid:
            return None
        self._ended_unsaid = False
        return self.reasoning_ms

    def silence(self, said: str) -> tuple[str, str] | None:
        """(kind, sentence) when the reply text `said` says nothing, else None."""
        if said.strip():
            return None
        return ("only_thinking", ONLY_THINKING) if self.had_reasoning else ("empty", EMPTY_REPLY)


def version_reasoning(kept: dict, reading: ReplyReading | None) -> dict:
    """The version's reasoning fields: what it had (`kept`, Continue) and what this stream added."""
    texts = [kept.get("reasoning") or "", reading.reasoning if reading else ""]
    text = "\n\n".join(t for t in texts if t)
    if not text:
        return {}
    times = [kept.get("reasoning_ms"), reading.reasoning_ms if reading else None]
    known = [t for t in times if isinstance(t, int)]
    return {"reasoning": text, "reasoning_ms": sum(known) if known else None}


def thought_label(ms: int | None) -> str:
    """The fold's title: "Thought for 12 s"; "Reasoning" when the time is not known (an imported or
    older reply)."""
    if not isinstance(ms, int) or isinstance(ms, bool):
        return "Reasoning"
    seconds = round(ms / 1000)
    if seconds < 1:
        return "Thought for less than a second"
    if seconds < 60:
        return f"Thought for {seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"Thought for {minutes} min {rest} s" if rest else f"Thought for {minutes} min"

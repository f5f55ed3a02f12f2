"""Reading a model's answer: what it says apart from how it reasoned. Pure: no I/O, no clock.

One reader serves the reply path (a stream, read piece by piece as it arrives: `ReasoningSplitter`) and
every helper call (summaries, scene checks, recaps: a whole answer, `read_answer`); the whole-answer
reader is the splitter fed at once, so both read any answer alike however the stream cut it.

Decisions:
- Reasoning is recognised in `<think>`, `<thinking>` and `<reasoning>` blocks (any case, attributes
  allowed) anywhere in the answer. An opener and a closer need not share a name; an opener inside a
  block is part of the reasoning (blocks do not nest).
- A block left open makes the rest of the answer reasoning: the model stopped while still thinking.
- A closer before any opener makes everything before it reasoning: R1/QwQ-style templates put
  `<think>` in the prompt, so the answer starts inside the block. While streaming, that text was
  shown as the reply until the closer came; the splitter then says `moved`, and the page moves it into
  the fold. Closers after the first tag, outside a block, are dropped.
- The providers' own reasoning (OpenAI-compatible `reasoning_content` or `reasoning`, Anthropic
  thinking blocks) arrives apart (`feed_reasoning`) and joins the blocks' reasoning in arrival order.
- Whitespace right after reasoning is dropped from the text ("</think>\n\nHello" says "Hello"); the
  reply path otherwise keeps the text as the model wrote it, while `read_answer` trims it.
- A tag may be cut across deltas: the splitter holds back the end of a piece only while it can still
  become a tag (at most one `<` and the 200 characters an opener's attributes may take), so the text
  shown while streaming never flashes a `<think>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# re.ASCII: the tag names are ASCII, and Unicode case folding (the Kelvin sign folds to "k") would make
# the regexes and the splitter's own prefix check disagree about what may still become a tag.
_FLAGS = re.IGNORECASE | re.ASCII
_NAMES = ("think", "thinking", "reasoning")
MAX_ATTRIBUTES = 200
THINK_OPEN = re.compile(rf"<(?:think|thinking|reasoning)\b[^<>]{{0,{MAX_ATTRIBUTES}}}>", _FLAGS)
THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)\s*>", _FLAGS)
_ANY_TAG = re.compile(f"(?P<close>{THINK_CLOSE.pattern})|(?P<open>{THINK_OPEN.pattern})", _FLAGS)
_WORD = re.compile(r"\w", re.ASCII)
_SPACE = re.compile(r"\s*", re.ASCII)

PieceKind = Literal["text", "reasoning", "moved"]

# What a reply that says nothing is stored with (a failed version; app/generation/reasoning.py).
ONLY_THINKING = "The model used its whole answer thinking; nothing was said."
EMPTY_REPLY = "The model returned an empty reply."


@dataclass(frozen=True)
class Piece:
    """What a delta added: reply text, reasoning, or `moved` (all the text so far was reasoning: a
    closer came before any opener; `text` is empty and the reader's `reasoning` holds it now)."""

    kind: PieceKind
    text: str = ""


@dataclass(frozen=True)
class Answer:
    text: str  # what the model said, trimmed
    reasoning: str  # how it got there, trimmed ("" when it gave none)
    had_reasoning: bool  # a reasoning tag or field was there, even an empty one


@dataclass(frozen=True)
class Stripped:
    """`strip_thinking`'s answer (the summaries' readers were written against it)."""

    answer: str
    had_thinking: bool


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


def _may_become_tag(tail: str, *, openers: bool) -> bool:
    """Whether `tail` (from the last "<" to the end of what arrived) can still grow into a tag the
    regexes above match: a closer, or also an opener when `openers`."""
    low = _lower(tail)
    if low == "<":
        return True
    if low.startswith("</"):
        body = low[2:]
        return any(
            name.startswith(body) or (body.startswith(name) and _SPACE.fullmatch(body, len(name)) is not None)
            for name in _NAMES
        )
    if not openers:
        return False
    body = low[1:]
    for name in _NAMES:
        if name.startswith(body):
            return True
        rest = body[len(name) :]
        if (
            body.startswith(name)
            and len(rest) <= MAX_ATTRIBUTES
            and "<" not in rest
            and ">" not in rest
            and not _WORD.match(rest)
        ):
            return True
    return False


class ReasoningSplitter:
    """A streamed answer split into text and reasoning as it arrives.

    `feed` takes a delta of the answer's text, `feed_reasoning` one of the provider's reasoning field;
    each returns the pieces to show now. `finish` gives back what was held for a tag that never
    completed. `text` is the reply text so far (raw), `reasoning` the reasoning so far (trimmed)."""

    def __init__(self) -> None:
        self._pending = ""  # arrived, not yet read: at most the start of a tag
        self._in_block = False
        self._seen_tag = False  # a closer before any tag moves the text so far into reasoning
        self._after_reasoning = False  # whitespace at the start of the next text is dropped
        self._text: list[str] = []
        self._parts: list[list[str]] = []  # one per block (or per run of the provider's reasoning)
        self._field_open = False  # the provider's reasoning goes on in the last part
        self.had_reasoning = False

    @property
    def text(self) -> str:
        return "".join(self._text)

    @property
    def reasoning(self) -> str:
        return "\n\n".join(t for t in ("".join(p).strip() for p in self._parts) if t)

    def feed_reasoning(self, delta: str) -> list[Piece]:
        if not delta:
            return []
        self.had_reasoning = self._after_reasoning = True
        if not self._field_open:
            self._parts.append([])
            self._field_open = True
        self._parts[-1].append(delta)
        return [Piece("reasoning", delta)]

    def feed(self, delta: str) -> list[Piece]:
        if not delta:
            return []
        self._pending += delta
        return self._read(final=False)

    def finish(self) -> list[Piece]:
        return self._read(final=True)

    def _read(self, *, final: bool) -> list[Piece]:
        out: list[Piece] = []
        buf, pos = self._pending, 0
        self._pending = ""
        while pos < len(buf):
            # One regex for both tags outside a block: the earliest tag in one scan, so a flood of
            # one kind with none of the other is still read in linear time.
            tag = (THINK_CLOSE if self._in_block else _ANY_TAG).search(buf, pos)
            if tag is None:
                cut = buf.rfind("<", pos)
                if not final and cut >= 0 and _may_become_tag(buf[cut:], openers=not self._in_block):
                    self._emit(out, buf[pos:cut])
                    self._pending = buf[cut:]
                else:
                    self._emit(out, buf[pos:])
                break
            if tag.start() > pos:
                self._emit(out, buf[pos : tag.start()])
            pos = tag.end()
            self._tag(out, is_closer=self._in_block or tag.lastgroup == "close")
        return out

    def _tag(self, out: list[Piece], *, is_closer: bool) -> None:
        first, self._seen_tag = not self._seen_tag, True
        self._field_open = False
        if self._in_block:
            if is_closer:  # (only closers are looked for inside a block)
                self._in_block, self._after_reasoning = False, True
            return
        if not is_closer:
            self._in_block = self.had_reasoning = True
            self._parts.append([])
            return
        if first:
            # The template opened the block in the prompt: all the text so far was reasoning.
            self.had_reasoning = self._after_reasoning = True
            self._parts.append(self._text)
            self._text = []
            out.append(Piece("moved"))
        # A closer outside a block after the first tag is dropped.

    def _emit(self, out: list[Piece], chunk: str) -> None:
        if not chunk:
            return
        if self._in_block:
            self._parts[-1].append(chunk)
            out.append(Piece("reasoning", chunk))
            return
        if self._after_reasoning:
            chunk = chunk.lstrip()
            if not chunk:
                return
            self._after_reasoning = False
        self._field_open = False
        self._text.append(chunk)
        out.append(Piece("text", chunk))


def read_answer(text: str, reasoning: str = "") -> Answer:
    """A whole answer: its text and its reasoning, from the reasoning blocks in the text and the
    provider's reasoning field (`reasoning`, which comes first)."""
    splitter = ReasoningSplitter()
    splitter.feed_reasoning(reasoning)
    splitter.feed(text)
    splitter.finish()
    return Answer(splitter.text.strip(), splitter.reasoning, splitter.had_reasoning)


def strip_thinking(text: str) -> Stripped:
    """The answer without the model's reasoning, trimmed, and whether it had any."""
    answer = read_answer(text)
    return Stripped(answer.text, answer.had_reasoning)


def without_reasoning(text: str) -> str:
    """Stored text as the model should read it again: unchanged when it holds no reasoning tag, else
    the answer's text alone (replies stored before Sugo read reasoning, imported chats, hand edits)."""
    if _ANY_TAG.search(text) is None:
        return text
    return read_answer(text).text

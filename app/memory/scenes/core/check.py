"""The scene check (issue 14): after a reply, once enough new messages have arrived, the helper model reads
the messages since the last check and names the exact messages that end a scene. Pure functions: the
caller counts the messages, sends the request, stores the ends and moves its "last checked" mark.

    check_due(new_messages, interval)          -> is a check due now
    check_window(messages, last_checked, n)    -> CheckWindow: the anchor and the messages to check
    history_window(messages, last_checked, n)  -> CheckWindow: Prepare's next window, the oldest unchecked
    windows_left(messages, last_checked, n)    -> how many history windows remain
    check_request(anchor, messages, max_chars=) -> the provider messages (system + user)
    read_scene_ends(answer, finish_reason, allowed_numbers) -> SceneEnds | Failure

Decisions (the issue and the spec are silent on these):
- A message's `number` is its 1-based position as the user sees it; the caller passes the messages the
  check may read (hidden ones left out, so numbers may have gaps). Persona and character messages both
  count, towards the interval and in the transcript.
- The interval is clamped to 1–100 (default 5) rather than refused: a bad setting must not stop replies.
  A check is due once `new_messages >= interval`.
- The window is the newest `2 × interval` unchecked messages. Older unchecked ones (the helper was down,
  processing was paused) are skipped, not checked in a later call: the recent messages decide where the
  current window restarts, and a backlog checked one window per reply would lag behind forever while a
  fast chat keeps growing. `CheckWindow.skipped` names their range so the caller can show it; Re-scan
  scenes (or Prepare existing history) covers them. A skipped stretch joins the open scene.
- Prepare existing history walks every unchecked message instead, oldest first, in consecutive windows
  of 2 × interval (`history_window`), each anchored on the previous window's last message.
- The anchor is the message just before the window: normally the message where the last check ended,
  the newest skipped one otherwise. It is context, marked as already checked, but its number is an
  allowed end: "the last message before a real location change" can only be seen once the next message
  exists, which the last check did not have. An end the caller already has stored is not a new scene.
- The request's user message is at most `max_chars` characters (clamped to 32,000–400,000; default
  48,000, ~12k tokens of English, so a helper with a 16k context still has room for the instructions and
  its answer). Characters, not tokens: the cut must be exact and cheap; a Cyrillic transcript of that size
  counts ~19k tokens. Short messages are kept whole and the long ones share what is left evenly; a cut
  message keeps its first third and its last two thirds around " […] ", because a scene's end is in a
  message's end and a location change in its start. Names are cut at 60 characters.
- Message text cannot forge the transcript: `<message` and `</message` inside it are defused.
- Reading the answer uses the summaries' rules (answers.precheck, answers.find_object): thinking is
  stripped; fences, prose around the JSON, single quotes and trailing commas are tolerated. `{"ends": []}`
  means "no scene ends here". Helpers answer in other shapes too, and each common one is read (issue 21:
  a helper answering `{"scenes": []}` stopped Prepare at its first batch for good):
  - the list under `ends` or a key naming what it holds (`scenes`, `boundaries`, `sceneEnds`, `breaks`,
    `endings`… END_LIST_KEYS), a bare list (`[42]`, `[]`), one entry not in a list (`{"ends": 42}`),
    or an object that is itself the one entry (`{"messageNumber": 42}`);
  - an entry: a number, a string `"42"` / `"#42"` / `"message 42"`, or an object whose number is its
    end (`messageNumber`, `end`, `endMessage`, `to`… END_FIELDS), else a generic number field
    (`message`, `messageId`; in a list of ends, not of scenes, also `number`, `index`, `id`). Every
    number is the message's number as the transcript shows it, never a 0-based index: the transcript
    shows no other numbering;
  - a scene range (`{"start": 3, "end": 10}`) ends at its end, except one running to the last message
    shown: that is the scene still going on (a helper listing scenes lists the open one too), and if it
    did end there the next check sees that message as its anchor and may name it.
  Numbers outside the allowed ones are dropped and counted, duplicates removed, the rest sorted.
- A cut-off, empty, thinking-only or non-JSON answer, one without a list of ends, or one with an entry
  that is not a message number (a bool, `null`, `"the fight"`, an object without a number) is a
  Failure: an unreadable entry may be a real scene end, so guessing "none" could lose it. The caller
  asks once more (checks.ask_scene_ends); still unreadable (`unreadable`), the user is offered "Treat
  this batch as having no scene end" beside Retry. On a Failure the caller leaves the scene open and
  does not move its "last checked" mark, so a later reply checks these messages again (paced by
  answers.retry_delay); a cut-off answer (`retry_larger`) is asked again at once with
  answers.request_max_tokens. Re-scan scenes offers no such skip: it changes nothing until every window
  of the range is read, and the user chose the range (Re-scan again, or a narrower range).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.memory.summaries.core.answers import Failure, find_object, loose_field, precheck

DEFAULT_INTERVAL = 5
MIN_INTERVAL, MAX_INTERVAL = 1, 100
WINDOW_FACTOR = 2  # the "up to twice the interval"

DEFAULT_MAX_CHARS = 48_000
MIN_MAX_CHARS = 32_000  # the largest window (201 messages, long names) still gets ~50 characters each
MAX_MAX_CHARS = 400_000  # answers.MAX_ANSWER_CHARS's size: no helper reads more
MAX_NAME_CHARS = 60
MIN_TEXT_CHARS = 12  # below this a cut message is only the marker
CUT_MARK = " […] "
MAX_END_ENTRIES = 1_000  # more entries than any window has messages: not an answer
MAX_NUMBER_DIGITS = 9
MAX_LIST_CHARS = 200_000  # a bare list longer than this is not a list of message numbers

SCENE_CHECK_PROMPT = """\
You find where scenes end in a roleplay. Read the numbered messages you are given and report the exact \
messageNumber whose END clearly finishes a scene: a resolved episode, a completed combat, or the last \
message before a real location change or major time skip. A mood change alone is not a scene ending. \
Uncertainty means no boundary: when in doubt, report nothing.
Messages written by the user's persona and by characters both count.
The message marked checked="earlier" was read in an earlier check and is context. Report it only when \
the message after it clearly starts a new scene (a real location change or major time skip).
Several scenes may end among the messages; most often none does.
Do not continue the story and do not explain. Answer with JSON only, in this shape:
{"ends":[{"messageNumber":42}]}
One entry per scene end, using the numbers shown. When no scene ends, answer {"ends":[]}"""


@dataclass(frozen=True)
class NumberedMessage:
    """One message as the check reads it: its 1-based position in the chat, its author and its text."""

    number: int
    name: str
    text: str


@dataclass(frozen=True)
class CheckWindow:
    anchor: NumberedMessage | None  # the message just before `messages`, already checked
    messages: tuple[NumberedMessage, ...]  # the messages to check, oldest first; empty: nothing to do
    skipped: tuple[int, int] | None = None  # first and last number of unchecked messages left out

    @property
    def allowed_ends(self) -> frozenset[int]:
        """The numbers an answer may name: the checked messages and the anchor."""
        numbers = {m.number for m in self.messages}
        if self.anchor is not None and self.messages:
            numbers.add(self.anchor.number)
        return frozenset(numbers)

    @property
    def last_number(self) -> int | None:
        """Where this check ends: the caller's new "last checked" mark once the answer is read."""
        return self.messages[-1].number if self.messages else None


@dataclass(frozen=True)
class SceneEnds:
    numbers: tuple[int, ...]  # the messages that end a scene, ascending, each once; empty: none
    ignored: int = 0  # readable numbers the answer gave outside the allowed ones (for diagnostics)


def clamp_interval(interval: int) -> int:
    return min(max(int(interval), MIN_INTERVAL), MAX_INTERVAL)


def check_due(new_messages: int, interval: int) -> bool:
    """Whether a check is due: `new_messages` messages arrived since the last check ended."""
    return new_messages >= clamp_interval(interval)


def check_window(
    messages: Sequence[NumberedMessage], last_checked_number: int | None, interval: int
) -> CheckWindow:
    """The messages after `last_checked_number` (None or 0: never checked), at most 2 × interval, the
    newest ones; the anchor is the message just before them."""
    ordered = _ordered(messages)
    last = last_checked_number or 0
    pending = [m for m in ordered if m.number > last]
    if not pending:
        return CheckWindow(None, ())
    window = pending[-WINDOW_FACTOR * clamp_interval(interval) :]
    skipped = (pending[0].number, pending[-len(window) - 1].number) if len(window) < len(pending) else None
    before = [m for m in ordered if m.number < window[0].number]
    return CheckWindow(before[-1] if before else None, tuple(window), skipped)


def _ordered(messages: Sequence[NumberedMessage]) -> list[NumberedMessage]:
    return sorted({m.number: m for m in reversed(messages)}.values(), key=lambda m: m.number)


def history_window(
    messages: Sequence[NumberedMessage], last_checked_number: int | None, interval: int
) -> CheckWindow:
    """Prepare existing history's next window: the OLDEST 2 × interval messages after
    `last_checked_number` (None or 0: from the first message), the anchor the message just before them
    (the previous window's last). Walked window after window, nothing is skipped."""
    ordered = _ordered(messages)
    last = last_checked_number or 0
    pending = [m for m in ordered if m.number > last]
    if not pending:
        return CheckWindow(None, ())
    window = pending[: WINDOW_FACTOR * clamp_interval(interval)]
    before = [m for m in ordered if m.number < window[0].number]
    return CheckWindow(before[-1] if before else None, tuple(window))


def windows_left(messages: Sequence[NumberedMessage], last_checked_number: int | None, interval: int) -> int:
    """How many history windows remain after `last_checked_number`."""
    last = last_checked_number or 0
    pending = len({m.number for m in messages if m.number > last})
    size = WINDOW_FACTOR * clamp_interval(interval)
    return -(-pending // size)


# The request ---------------------------------------------------------------------------------------

_TAG = re.compile(r"<(/?)(message)", re.IGNORECASE)


def _defuse(text: str) -> str:
    return _TAG.sub(lambda m: "‹" + m.group(1) + m.group(2), text)  # same length, so the cut stays exact


def _name(name: str) -> str:
    name = " ".join(name.split()).replace('"', "'") or "?"
    return name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 1] + "…"


def _cut(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    room = max(cap - len(CUT_MARK), 0)
    head = room // 3
    return text[:head].rstrip() + CUT_MARK + text[len(text) - (room - head) :].lstrip()


def _caps(lengths: Sequence[int], budget: int) -> list[int]:
    """Per text, the characters it may keep: short texts whole, the long ones an even share of the rest."""
    caps = list(lengths)
    left, count = budget, len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        share = left // count if count else 0
        if lengths[i] > share:
            caps[i] = max(share, MIN_TEXT_CHARS)
        left -= caps[i]
        count -= 1
    return caps


def _header(message: NumberedMessage, earlier: bool) -> str:
    mark = ' checked="earlier"' if earlier else ""
    return f'<message number="{message.number}" name="{_name(message.name)}"{mark}>\n'


def check_request(
    anchor: NumberedMessage | None,
    messages: Sequence[NumberedMessage],
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> list[dict[str, str]]:
    """The helper's request: the instructions with the output format, then the numbered transcript (the
    anchor first, marked as checked earlier), at most `max_chars` characters."""
    limit = min(max(max_chars, MIN_MAX_CHARS), MAX_MAX_CHARS)
    shown = ([anchor] if anchor is not None else []) + list(messages)
    first, last = (messages[0].number, messages[-1].number) if messages else (0, 0)
    span = f"#{first}" if first == last else f"#{first} to #{last}"
    intro = f"Messages to check: {span}."
    if anchor is not None:
        intro += f" Message #{anchor.number} was checked earlier and is context."
    outro = 'Answer with JSON only: {"ends":[{"messageNumber":N}]} or {"ends":[]}.'
    headers = [_header(m, m is anchor) for m in shown]
    closer = "\n</message>"
    texts = [_defuse(m.text.strip()) or "(no text)" for m in shown]
    fixed = len(intro) + len(outro) + 4 + sum(len(h) + len(closer) + 2 for h in headers)
    caps = _caps([len(t) for t in texts], limit - fixed)
    body = "\n\n".join(h + _cut(t, c) + closer for h, t, c in zip(headers, texts, caps, strict=True))
    return [
        {"role": "system", "content": SCENE_CHECK_PROMPT},
        {"role": "user", "content": f"{intro}\n\n{body}\n\n{outro}"},
    ]


# The answer ---------------------------------------------------------------------------------------

# The list of ends may come under any of these keys (matched as answers.loose_field does); a model
# that was asked for {"ends": [...]} often names it after what it found.
END_LIST_KEYS = (
    "ends",
    "sceneends",
    "endmessages",
    "scenes",
    "boundaries",
    "sceneboundaries",
    "endings",
    "breaks",
    "scenebreaks",
    "end",
    "sceneend",
    "boundary",
)
# An entry object's message number, first match wins: the end of a range before any generic field,
# so {"start": 3, "end": 8} ends at 8 and {"id": 2, "endMessage": 8} too.
END_FIELDS = (
    "messagenumber",
    "endmessagenumber",
    "endmessage",
    "end",
    "endsat",
    "endnumber",
    "endindex",
    "lastmessage",
    "lastmessagenumber",
    "to",
)
NUMBER_FIELDS = ("message", "messageindex", "messageid", "msg")
# Read as the message number only in a list of ends: in a list of scenes, {"number": 2, "title": …} is
# the scene's own number, and closing a scene at message 2 on it would be a guess.
GENERIC_FIELDS = ("number", "index", "id")
START_FIELDS = (
    "start",
    "startmessage",
    "startmessagenumber",
    "startindex",
    "first",
    "firstmessage",
    "firstmessagenumber",
    "from",
    "begin",
)
# Failures that are not the helper's answer (it never came, or Sugo broke): Retry only. Every other
# failure is an answer Sugo could not use even after asking again: the user may treat the batch as having
# no scene end.
NOT_THE_ANSWER = frozenset({"provider", "internal"})

_NUMBER = re.compile(
    r"(?:(?:message|msg)\s*(?:number|no\.?)?\s*)?#?\s*(\d{1," + str(MAX_NUMBER_DIGITS) + r"})", re.IGNORECASE
)
_OPEN_SCENE = object()  # a range reaching the last message shown: the scene still going on


def unreadable(failure: Failure) -> bool:
    """Whether the failure is the helper's answer itself (the batch may be treated as having no end)."""
    return failure.kind not in NOT_THE_ANSWER


def _scalar(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        m = _NUMBER.fullmatch(value.strip())
        return int(m.group(1)) if m else None
    return None


def _field(obj: dict[str, Any], names: Sequence[str]) -> Any:
    for name in names:
        value = loose_field(obj, name)
        if value is not None:
            return value
    return None


def _number(value: Any, last_shown: int | None, *, of_scenes: bool = False) -> int | None | object:
    """The message number an entry names; None when it names none; _OPEN_SCENE for a scene range that
    runs to the last message shown (the scene the check was asked about is still going on: if it did end
    there, the next check names that message as its anchor). `of_scenes`: the entry is in a list of
    scenes, where a bare "number", "index" or "id" is the scene's."""
    if not isinstance(value, dict):
        return _scalar(value)
    end = _field(value, END_FIELDS)
    if end is not None:
        number = _scalar(end)
        if number is not None and number == last_shown and _field(value, START_FIELDS) is not None:
            return _OPEN_SCENE
        return number
    if _field(value, START_FIELDS) is not None:
        return None  # a range without its end
    return _scalar(_field(value, NUMBER_FIELDS if of_scenes else NUMBER_FIELDS + GENERIC_FIELDS))


def _first_list(text: str) -> list[Any] | None:
    """A bare JSON list the answer starts with (after prose, or in a code fence), before any object."""
    fence = re.search(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", text, re.DOTALL)
    for candidate in ([fence.group(1)] if fence else []) + [text]:
        start, brace = candidate.find("["), candidate.find("{")
        if start < 0 or (0 <= brace < start):
            continue
        try:
            value, _ = json.JSONDecoder().raw_decode(
                re.sub(r",\s*\]", "]", candidate[start : start + MAX_LIST_CHARS])
            )
        except (ValueError, RecursionError):
            continue
        if isinstance(value, list):
            return value
    return None


def _entries(text: str) -> tuple[list[Any], bool] | Failure:
    """The answer's list of scene ends, whatever shape holds it: an object's list first (prose around it
    may hold a bracketed aside), then a bare list, then one entry on its own; and whether it is a list
    of scenes (under `scenes`) rather than of ends."""
    obj = find_object(text, "ends")
    value = _field(obj, END_LIST_KEYS) if isinstance(obj, dict) else None
    if isinstance(value, list):
        return value, isinstance(obj, dict) and loose_field(obj, "scenes") is value
    bare = _first_list(text)
    if bare is not None:
        return bare, False
    if isinstance(obj, Failure):
        return obj
    if isinstance(value, dict) or _scalar(value) is not None:
        return [value], isinstance(obj, dict) and loose_field(
            obj, "scenes"
        ) is value  # one end, not in a list
    if value is None and _number(obj, None) not in (None, _OPEN_SCENE):
        return [obj], False  # the object is the one entry: {"messageNumber": 9}
    return Failure("missing_ends", "The answer has no list of scene ends.")


def read_scene_ends(
    answer: str, finish_reason: str | None, allowed_numbers: Iterable[int], *, reasoning: str = ""
) -> SceneEnds | Failure:
    """The scene ends the helper reported among `allowed_numbers` (CheckWindow.allowed_ends)."""
    text = precheck(answer, finish_reason, reasoning)
    if isinstance(text, Failure):
        return text
    read = _entries(text)
    if isinstance(read, Failure):
        return read
    ends, of_scenes = read
    if len(ends) > MAX_END_ENTRIES:
        return Failure("garbage", f"The answer lists {len(ends):,} scene ends.")
    allowed = frozenset(allowed_numbers)
    last_shown = max(allowed) if allowed else None
    found: set[int] = set()
    ignored = 0
    for entry in ends:
        number = _number(entry, last_shown, of_scenes=of_scenes)
        if number is _OPEN_SCENE:
            continue
        if not isinstance(number, int):
            return Failure("garbage", "A scene end in the answer is not a message number.")
        if number in allowed:
            found.add(number)
        else:
            ignored += 1
    return SceneEnds(tuple(sorted(found)), ignored)

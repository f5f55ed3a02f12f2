"""The recap of a closed scene: the helper's requests, reading its answer, who took part, the recap's
header. Pure functions: the storage and the jobs (later) call them; nothing here touches a database or
a provider, and nothing raises on model output.

The flow a job follows:
1. `recap_batches(messages, input_budget_tokens=…)`. One batch: `recap_request(batch, …)`. Several:
   each batch is recapped with `part=(k, n)` and saved as a `RecapPart` before the next starts (a
   restart resumes at the first unsaved part); then `combine_groups(parts, …)` and `combine_request(group,
   …)` for each group, round after round, until one recap is left; `finish_combined` gives it every
   participant and the timeframe its parts had.
2. Each answer goes through `read_recap`. A `Failure` with `retry_larger` (cut off, only thinking) is asked
   again with `answers.request_max_tokens(max_output_size, attempt + 1)`; if that is cut off too, the batch
   is split in two (`recap_batches(batch, input_budget_tokens=budget // 2)`) and recapped as parts. A
   recap is never cut and never stored half (Marinara: "recaps cut off at 1,024 output tokens").
3. `participants.missing_speakers(recap, speakers, …)`: characters who wrote messages in the scene
   that the recap does not list. Recommended: ask once more with `must_include=missing` (the reference
   app's "cut-off recaps that drop a character's point of view"); if they are still missing, store the
   recap with `participants.recap_audience(...)`, which gives them access anyway and flags the scene
   "Check who was there". A recap never drops a participant silently.
4. `recap_header(first, last, recap.timeframe or timeframe_hint(messages))` heads the stored recap.

Decisions (where the issue and the manual are silent):
- Requests ask for at least 8,196 output tokens (`recap_max_tokens`): reasoning models spend the budget
  thinking, and a small budget is what cut recaps off at 1,024 tokens. The summary itself is still held
  to Chat Summary → Maximum output size (`max_summary_tokens`): a longer one is refused, not cut.
- Custom instructions replace the default prompt but never the JSON output format, which every request
  carries; blank instructions mean the default.
- A message longer than a whole batch is split at paragraph, then line, then sentence, then word borders
  (characters as the last resort); its pieces keep its number and are labelled "(part k/n)". No text is
  dropped: the pieces put back together are the message.
- An answer that is prose instead of JSON fails ("not JSON"), as day summaries do: prose in place of the
  JSON is usually the model continuing the roleplay or refusing. The summary may be a list of paragraphs.
- `participants` absent (or not a list/string) means the helper did not say: the scene then goes to every
  character, flagged "Check who was there" in a group chat (manual). An empty list means it named nobody.
- Names the helper gives are matched to cards by `participants.match_participants`: the full card
  name (ignoring case), or a run of its words ("Kaito", "Nakamura" for "Kaito Nakamura") that fits
  exactly one character and not the persona. Names with notes ("Kaito (mentioned)"), possessives
  ("Kaito's sister") and shared names never match. The persona's own name is neither matched nor
  unmatched: it is expected in the list.
- A combined recap keeps every participant its parts named: the combine call can drop someone a part saw.
- Timeline anchors: `Date:`/`Story date:`/`Story time:` lines and phrases like "the next morning" or
  "3 days later"; at most MAX_ANCHORS (the first and last ones), each at most MAX_ANCHOR_CHARS.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.memory.summaries.core.answers import (
    Failure,
    find_object,
    loose_field,
    precheck,
    prose_problem,
    request_max_tokens,
    within_limit,
)
from app.memory.summaries.core.prompts import has_conditions
from app.prompt.core.tokens import count_tokens

MIN_BATCH_TOKENS = 256  # a smaller input budget would turn a scene into thousands of requests
MAX_NAME_CHARS = 100
MAX_PARTICIPANTS = 32
MAX_TIMEFRAME_CHARS = 120
MAX_ANCHORS = 6
MAX_ANCHOR_CHARS = 80
DEFAULT_MAX_SUMMARY_TOKENS = 4096  # Chat Summary → Maximum output size's default

DEFAULT_RECAP_PROMPT = """\
You are a summarizer, not a storyteller. Read the messages of one finished roleplay scene below and \
write a historical recap of it in 2 to 3 paragraphs: what happened, who did what, decisions, discoveries, \
changes in relationships, and anything promised or left unresolved. Give every character who took part \
their point of view. Write in past tense and third person, keep the names as they appear, and cover \
only the messages given. Do not describe a current situation, do not continue the story and do not \
invent events."""

DEFAULT_COMBINE_PROMPT = """\
You combine the recaps of consecutive parts of one long roleplay scene, given in order, into one \
historical recap of the whole scene in 2 to 3 paragraphs. Keep every event that matters later, every \
character's point of view, and the order of events; merge repetitions. Write in past tense and third \
person, keep the names as they appear, and do not invent events."""

RECAP_FORMAT = """\
Answer with JSON only, in this shape:
{"summary": "2 to 3 paragraphs", "participants": ["Name", "..."], "timeframe": "..."}
- "summary": the recap; paragraphs separated by a blank line.
- "participants": everyone present who took part in the scene, the user's character included, each \
by the name used in the messages. Leave out people who are only mentioned.
- "timeframe": when the scene happens in the story (a date, a time of day, "the next morning"), or "" \
if the messages do not say.
Do not add anything outside the JSON."""


# Added to a request when some of its messages were not seen by everyone (a group chat's private
# messages, marked in the transcript) or its parts' recaps hold private sections.
PRIVATE_PARTS = """\
Some messages are marked [hidden from …] or [whispered to …]: the characters named as not seeing a \
message do not know what it says, and a whisper is known only to its author and recipient. Describe \
what everyone present saw in plain text, and put anything only some characters know inside \
{{#if character == "Name"}}…{{/if}} sections naming who knows it (several: \
{{#if character == "Kaito" || character == "Mira"}}…{{/if}}). Keep every such section of a recap you \
are given, with its condition unchanged."""


@dataclass(frozen=True)
class SceneMessage:
    """One message of the scene as the recap reads it: its number in the chat (#n), the author's name,
    the text of its active swipe. `part` is (k, n) for the k-th of n pieces of a message split in batches."""

    number: int
    name: str
    text: str
    part: tuple[int, int] | None = None
    seen_by: str = ""  # in a group, who did not see it ("hidden from Mira"): the helper keeps it private


@dataclass(frozen=True)
class Recap:
    summary: str
    participants: tuple[str, ...] | None  # names as the helper wrote them; None: the helper did not say
    timeframe: str  # "" when unknown


@dataclass(frozen=True)
class RecapPart:
    """A saved batch recap of a long scene, covering messages #first–#last."""

    first: int
    last: int
    recap: Recap


def recap_max_tokens(max_output_size: int) -> int:
    """The `max_tokens` of a recap or combine request: Maximum output size, at least 8,196 (room for
    reasoning). Retries after a cut-off answer use `answers.request_max_tokens(..., attempt)`."""
    tokens = request_max_tokens(max_output_size, 0)
    assert tokens is not None  # attempt 0 always has a budget
    return tokens


# Batches ---------------------------------------------------------------------------------------------


def _label(msg: SceneMessage) -> str:
    name = " ".join(msg.name.split())[:MAX_NAME_CHARS] or "?"
    part = f" (part {msg.part[0]}/{msg.part[1]})" if msg.part else ""
    seen = f" [{msg.seen_by}]" if msg.seen_by else ""
    return f"#{msg.number} {name}{part}{seen}"


def _line(msg: SceneMessage) -> str:
    return f"{_label(msg)}: {msg.text.strip()}"


def scene_transcript(messages: Sequence[SceneMessage]) -> str:
    """The messages as the helper reads them, each headed by its number and author; empty ones left out."""
    return "\n\n".join(_line(m) for m in messages if m.text.strip())


def recap_batches(
    messages: Sequence[SceneMessage],
    *,
    input_budget_tokens: int,
    count: Callable[[str], int] = count_tokens,
) -> list[list[SceneMessage]]:
    """The scene's messages in order, in batches whose transcripts fit `input_budget_tokens` (at least
    MIN_BATCH_TOKENS). Whole messages per batch; a message bigger than a batch is split into pieces that
    each fit. Messages without text are left out; nothing else is."""
    budget = max(input_budget_tokens, MIN_BATCH_TOKENS)
    batches: list[list[SceneMessage]] = []
    used = 0
    for msg in messages:
        if not msg.text.strip():
            continue
        cost = count(_line(msg)) + 1
        if cost > budget:
            batches.extend([piece] for piece in _split_message(msg, budget, count))
            used = budget  # the next message starts a new batch
            continue
        if not batches or used + cost > budget:
            batches.append([])
            used = 0
        batches[-1].append(msg)
        used += cost
    return batches


def _split_message(msg: SceneMessage, budget: int, count: Callable[[str], int]) -> list[SceneMessage]:
    # the label of a piece is at most this long; its text gets the rest of the budget
    room = max(budget - count(_label(msg) + " (part 9999/9999): ") - 2, 1)
    texts = [t.strip() for t in split_text(msg.text.strip(), room, count) if t.strip()]
    return [
        SceneMessage(msg.number, msg.name, t, (k, len(texts)), msg.seen_by) for k, t in enumerate(texts, 1)
    ]


_LEVELS = (
    re.compile(r"(\n[ \t]*\n\s*)"),  # paragraphs
    re.compile(r"(\n)"),  # lines
    re.compile(r"((?<=[.!?…。！？])[\"'”’»)\]*_]*\s+)"),  # sentences
    re.compile(r"(\s+)"),  # words
)


def split_text(text: str, max_tokens: int, count: Callable[[str], int], level: int = 0) -> list[str]:
    """`text` in consecutive pieces of at most `max_tokens` each (by `count`), cut at the coarsest border
    that works: paragraph, line, sentence, word, then character. `"".join(pieces) == text`."""
    if count(text) <= max_tokens:
        return [text]
    if level >= len(_LEVELS):
        return _split_chars(text, max_tokens, count)
    # each unit carries the separator that follows it, so joining the pieces gives the text back
    raw = _LEVELS[level].split(text)
    units = [raw[i] + (raw[i + 1] if i + 1 < len(raw) else "") for i in range(0, len(raw), 2)]
    units = [u for u in units if u]
    if len(units) <= 1:
        return split_text(text, max_tokens, count, level + 1)
    pieces: list[str] = []
    current, used = "", 0
    for unit in units:
        cost = count(unit)
        if cost > max_tokens:
            if current:
                pieces.append(current)
                current, used = "", 0
            pieces.extend(split_text(unit, max_tokens, count, level + 1))
            continue
        # costs add up to at least the joined text's count for any tokenizer that rounds up per piece
        if current and used + cost > max_tokens:
            pieces.append(current)
            current, used = "", 0
        current += unit
        used += cost
    if current:
        pieces.append(current)
    return pieces


def _split_chars(text: str, max_tokens: int, count: Callable[[str], int]) -> list[str]:
    pieces = []
    while text:
        size = min(len(text), max(max_tokens, 1) * 4)
        while size > 1 and count(text[:size]) > max_tokens:
            size //= 2
        pieces.append(text[:size])
        text = text[size:]
    return pieces


def combine_groups(
    parts: Sequence[RecapPart],
    *,
    input_budget_tokens: int,
    count: Callable[[str], int] = count_tokens,
) -> list[list[RecapPart]]:
    """Consecutive parts in groups for one combine request each. Every group but the last has at least
    two parts even past the budget, so each round at least halves what is left; combine the groups,
    then group the results again until one is left."""
    budget = max(input_budget_tokens, MIN_BATCH_TOKENS)
    groups: list[list[RecapPart]] = []
    used = 0
    for part in parts:
        cost = count(_part_text(0, part)) + 1
        if not groups or (used + cost > budget and len(groups[-1]) >= 2):
            groups.append([])
            used = 0
        groups[-1].append(part)
        used += cost
    return groups


# Requests --------------------------------------------------------------------------------------------


def _system(instructions: str, must_include: Sequence[str], private: bool = False) -> str:
    text = f"{instructions.strip()}\n\n{RECAP_FORMAT}"
    if private:
        text += "\n" + PRIVATE_PARTS
    names = clean_names(must_include)
    if names:
        text += (
            f'\nThese characters wrote messages in this scene and must be in "participants", with their '
            f"part in the summary: {', '.join(names)}."
        )
    return text


def recap_request(
    messages: Sequence[SceneMessage],
    *,
    first_number: int,
    last_number: int,
    instructions: str = DEFAULT_RECAP_PROMPT,
    part: tuple[int, int] | None = None,
    must_include: Sequence[str] = (),
) -> list[dict[str, str]]:
    """The provider messages asking for the recap of messages #first–#last (one batch of a long scene when
    `part` is (k, n)). `must_include`: speakers a previous answer left out."""
    head = f"Scene messages #{first_number}–#{last_number}"
    if part:
        head += f" (part {part[0]} of {part[1]} of a longer scene: recap only these messages)"
    hint = timeframe_hint(messages)
    if hint:
        head += f"\nTime anchors in the text: {hint}"
    body = f"{head}\n\n{scene_transcript(messages)}"
    private = any(m.seen_by for m in messages)
    return [
        {
            "role": "system",
            "content": _system(instructions.strip() or DEFAULT_RECAP_PROMPT, must_include, private),
        },
        {"role": "user", "content": body},
    ]


def _part_text(n: int, part: RecapPart) -> str:
    recap = part.recap
    lines = [f"[Part {n}] {recap_header(part.first, part.last, recap.timeframe)}"]
    if recap.participants:
        lines.append("Participants: " + ", ".join(recap.participants))
    lines.append(recap.summary.strip())
    return "\n".join(lines)


def combine_request(
    parts: Sequence[RecapPart],
    *,
    instructions: str = DEFAULT_COMBINE_PROMPT,
    must_include: Sequence[str] = (),
) -> list[dict[str, str]]:
    """The provider messages asking to combine consecutive part recaps into one recap of their messages."""
    first, last = min(p.first for p in parts), max(p.last for p in parts)
    body = f"Recaps of scene messages #{first}–#{last}, in order:\n\n" + "\n\n".join(
        _part_text(n, p) for n, p in enumerate(parts, 1)
    )
    private = any(has_conditions(p.recap.summary) for p in parts)
    return [
        {
            "role": "system",
            "content": _system(instructions.strip() or DEFAULT_COMBINE_PROMPT, must_include, private),
        },
        {"role": "user", "content": body},
    ]


def finish_combined(combined: Recap, parts: Sequence[RecapPart]) -> RecapPart:
    """The combined recap as a part covering all of `parts`: its participants plus anyone a part named
    (the combine call can drop them), its timeframe or else the parts' first and last ones."""
    names: list[str] = list(combined.participants or ())
    said = combined.participants is not None
    for part in parts:
        names.extend(part.recap.participants or ())
        said = said or part.recap.participants is not None
    timeframe = combined.timeframe
    if not timeframe:
        frames = [p.recap.timeframe for p in parts if p.recap.timeframe]
        if frames:
            timeframe = _one_line(frames[0] if frames[0] == frames[-1] else f"{frames[0]} – {frames[-1]}")
    recap = Recap(combined.summary, tuple(clean_names(names)) if said else None, timeframe)
    return RecapPart(min(p.first for p in parts), max(p.last for p in parts), recap)


# Reading the answer ----------------------------------------------------------------------------------


def read_recap(
    answer: str,
    finish_reason: str | None,
    reasoning: str = "",
    *,
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
    count: Callable[[str], int] = count_tokens,
) -> Recap | Failure:
    """The recap in the helper's JSON answer, or why there is none. A cut-off answer is always a Failure
    with `retry_larger`, never a shortened summary."""
    text = precheck(answer, finish_reason, reasoning)
    if isinstance(text, Failure):
        return text
    obj = find_object(text)
    if isinstance(obj, Failure):
        return obj
    summary = loose_field(obj, "summary")
    if isinstance(summary, list) and summary and all(isinstance(s, str) for s in summary):
        summary = "\n\n".join(s.strip() for s in summary if s.strip())
    if not isinstance(summary, str) or not summary.strip():
        return Failure("missing_summary", "The answer has no summary text.")
    summary = summary.strip()
    problem = prose_problem(summary) or within_limit(summary, max_summary_tokens, count)
    if problem:
        return problem
    return Recap(summary, _participants(obj), _timeframe(loose_field(obj, "timeframe")))


def _participants(obj: dict) -> tuple[str, ...] | None:
    for key in ("participants", "characters", "present"):
        value = loose_field(obj, key)
        if isinstance(value, str):
            value = re.split(r"[,;\n]|\band\b", value)
        if isinstance(value, list):
            names = []
            for item in value:
                if isinstance(item, dict):  # [{"name": "Kaito"}]
                    item = loose_field(item, "name")
                if isinstance(item, str):
                    names.append(item)
            return tuple(clean_names(names))
    return None


def clean_names(names: Sequence[str]) -> list[str]:
    """Names as a recap keeps them: distinct (ignoring case), on one line, at most MAX_PARTICIPANTS;
    empty and overlong ones (not names) left out."""
    out: list[str] = []
    seen: set[str] = set()
    for name in names:
        name = " ".join(str(name).split()).strip("\"'`*-• ")
        if not name or len(name) > MAX_NAME_CHARS or name.casefold() in seen:
            continue
        seen.add(name.casefold())
        out.append(name)
        if len(out) == MAX_PARTICIPANTS:
            break
    return out


_UNKNOWN = re.compile(
    r"(?:unknown|unspecified|not (?:stated|specified|given|mentioned)|n/?a|none|-+)\.?", re.I
)


def _timeframe(value: object) -> str:
    if not isinstance(value, str):
        return ""
    value = _one_line(value)
    return "" if _UNKNOWN.fullmatch(value) else value


def _one_line(text: str, limit: int = MAX_TIMEFRAME_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


# Header and timeline ---------------------------------------------------------------------------------


def recap_header(first: int, last: int, timeframe: str) -> str:
    """The line that heads a stored recap in the prompt."""
    span = f"Message #{first}" if first == last else f"Messages #{first}–#{last}"
    return f"{span}; story timeframe: {_one_line(timeframe) or 'unknown (use message order)'}."


_DATE_LINE = re.compile(
    r"^[ \t>*_#\[(]*((?:story[ \t]+)?(?:date|time))[ \t*_]*[:：][ \t*_]*([^\n]{1,200})$",
    re.IGNORECASE | re.MULTILINE,
)
_NUMBER = r"(?:\d{1,4}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|several)"
_RELATIVE = re.compile(
    r"\b(?:the[ \t]+(?:next|following)[ \t]+(?:morning|day|afternoon|evening|night|week|month|year)"
    rf"|{_NUMBER}[ \t]+(?:minutes?|hours?|days?|weeks?|months?|years?)[ \t]+later)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Anchor:
    number: int  # the message it is in
    text: str


def timeline_anchors(messages: Sequence[SceneMessage]) -> list[Anchor]:
    """The story-time marks in the messages, in order; the first and last MAX_ANCHORS // 2 when there
    are more; repeats of the previous mark left out."""
    found: list[Anchor] = []
    for msg in messages:
        hits = [
            (m.start(), f"{' '.join(m.group(1).split()).capitalize()}: {m.group(2).strip(' *_])')}")
            for m in _DATE_LINE.finditer(msg.text)
        ]
        hits += [(m.start(), m.group(0)) for m in _RELATIVE.finditer(msg.text)]
        for _, text in sorted(hits):
            text = _one_line(text, MAX_ANCHOR_CHARS)
            if not text.endswith(":") and (not found or found[-1].text.casefold() != text.casefold()):
                found.append(Anchor(msg.number, text))
    if len(found) > MAX_ANCHORS:
        found = found[: MAX_ANCHORS // 2] + found[-(MAX_ANCHORS - MAX_ANCHORS // 2) :]
    return found


def timeframe_hint(messages: Sequence[SceneMessage]) -> str:
    """The anchors as one line for the request ("Date: 12 March (#3); the next morning (#17)"), "" if none."""
    return "; ".join(f"{a.text} (#{a.number})" for a in timeline_anchors(messages))

"""Summary prompt texts, the transcripts they read, the Conversation prompt blocks, and who may read each
part of a summary. Pure functions.

Group chats (spec, "Chats em grupo mesclados"): a part written `{{#if char == "Kaito"}}…{{/if}}` (or
`character ==`, or several names joined by `||`) reaches only those characters' prompts;
`{{#if narrator}}…{{/if}}` is for the narrator alone. A character who replies alone reads the parts meant
for them; the narrator reads every part. A merged reply (one reply speaks for everyone present) keeps a
part if at least one present character knows it, marked "known only to …" when not all of them do;
narrator-only parts are left out.

Decisions:
- `app/prompt/core/macros.py` has no `{{#if}}`, so the blocks are read here; this runs before macro expansion,
  which leaves the remaining text as it always did.
- Names match whole, ignoring case and surrounding spaces; "Kaito" does not match "Kaito Nakamura".
- Fail closed: a condition this module cannot read, an `{{#if` that never closes (the rest of the text is
  its body) and blocks nested deeper than MAX_IF_DEPTH hide their text from every character (the narrator
  still reads it). A private part must never leak because of a typo. A stray `{{/if}}` is dropped.
- Conversation blocks keep Marinara's shape (`<summary week=…>`, `<summary date=…>`,
  `<important_memories>`), so imported chats read the same; a "</summary>" inside a summary is defused.
- The default prompts ask for the summary only, in past tense, without continuing the story: summary
  models sometimes continue the roleplay instead (Marinara bug #2064).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from app.memory.days.core.days import week_start

MAX_IF_DEPTH = 8
MAX_CONDITION_NAMES = 32
MAX_NAME_CHARS = 100
MAX_CONDITION_CHARS = 4000  # 32 names of 100 characters with their "char ==" and "||"
MAX_TEXT_CHARS = 1_000_000

ROLEPLAY_ENTRY_PROMPT = """\
You are a summarizer, not a storyteller. Read the roleplay messages below and write a concise recap of \
what happens in them: events, decisions, discoveries, changes in relationships, and anything a character \
promised or left unresolved. Write in past tense and third person, in plain prose, and keep the names \
as they appear. Cover only the messages given; do not repeat older events and do not invent new ones.
Do not continue the story, do not write dialogue, and do not address the reader. \
Answer with the recap only."""

CONVERSATION_DAY_PROMPT = """\
You summarize one day of a conversation so it can be remembered later. Read the day's messages below.
Answer with JSON only, in this shape:
{"summary": "...", "keyDetails": ["...", "..."]}
- "summary": 1 to 3 terse sentences, like atmospheric field notes: what the day was about and its mood.
- "keyDetails": the things that must not be forgotten: promises, plans, unresolved questions, \
emotional events, and new information about the people in it. One short item each; an empty list if \
there are none.
Do not reply to the messages and do not add anything outside the JSON."""

CONVERSATION_WEEK_PROMPT = """\
You consolidate the daily summaries of one week of a conversation into a weekly summary. Each day \
below starts with its date, then its summary and its key details.
Answer with JSON only, in this shape:
{"summary": "...", "keyDetails": ["...", "..."]}
- "summary": 3 to 5 sentences about the arc of the week: how things developed, not a list of days.
- "keyDetails": the details from the days that still matter: promises, plans, open questions, \
emotional events and new information. Merge duplicates and drop what was resolved.
Do not add anything outside the JSON."""

CONVERSATION_DAY_PARTS_PROMPT = """\
You combine the partial summaries of one long day of a conversation into the summary of that day. Each \
part below starts with its number, then its summary and its key details, in order.
Answer with JSON only, in this shape:
{"summary": "...", "keyDetails": ["...", "..."]}
- "summary": 1 to 3 terse sentences, like atmospheric field notes: what the day was about and its mood.
- "keyDetails": the details from the parts that still matter: promises, plans, unresolved questions, \
emotional events and new information. Merge duplicates and drop what was resolved later that day.
Do not add anything outside the JSON."""

DAY_PART_CHARS = 32_000  # Marinara's: a longer day is summarised in parts, then the parts are combined
MAX_DAY_PARTS = 12


@dataclass(frozen=True)
class TranscriptLine:
    """One message as a summary reads it: the author's name and the text of its active swipe only."""

    name: str
    text: str


def transcript(lines: Iterable[TranscriptLine]) -> str:
    return "\n\n".join(f"{line.name}: {line.text.strip()}" for line in lines if line.text.strip())


def transcript_parts(
    lines: Sequence[TranscriptLine], max_chars: int = DAY_PART_CHARS, max_parts: int = MAX_DAY_PARTS
) -> list[str]:
    """A day's transcript in parts of about `max_chars`, split between messages (a longer message is a part
    of its own); never more than `max_parts`: the parts grow instead. Empty when no message has text."""
    kept = [line for line in lines if line.text.strip()]
    total = sum(len(line.text) + len(line.name) + 4 for line in kept)
    size = max(max_chars, -(-total // max_parts))
    parts: list[list[TranscriptLine]] = []
    used = 0
    for line in kept:
        cost = len(line.text) + len(line.name) + 4
        if not parts or (used + cost > size and len(parts) < max_parts):
            parts.append([])
            used = 0
        parts[-1].append(line)
        used += cost
    return [transcript(part) for part in parts]


def parts_input(parts: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The combine prompt's input: per part "[Part n]", its summary, "Key details: a; b"."""
    texts = []
    for n, (summary, details) in enumerate(parts, 1):
        text = f"[Part {n}]\n{summary.strip()}"
        if details:
            text += "\nKey details: " + "; ".join(d.strip() for d in details)
        texts.append(text)
    return "\n\n".join(texts)


def day_label(day: date) -> str:
    return f"{day:%d.%m.%Y}"


def week_label(monday: date) -> str:
    return f"{day_label(monday)} – {day_label(monday + timedelta(days=6))}"


def week_input(days: Sequence[tuple[date, str, Sequence[str]]]) -> str:
    """The week prompt's input: per day "[DD.MM.YYYY]", its summary, "Key details: a; b"."""
    parts = []
    for day, summary, details in sorted(days, key=lambda d: d[0]):
        text = f"[{day_label(day)}]\n{summary.strip()}"
        if details:
            text += "\nKey details: " + "; ".join(d.strip() for d in details)
        parts.append(text)
    return "\n\n".join(parts)


# Conversation prompt text (Marinara's shape, reference §4.3) -----------------------------------------


def _inside(text: str) -> str:
    # a summary cannot end its own wrapper early and make the rest look like instructions
    return re.sub(r"</\s*summary\s*>", "</ summary>", text.strip(), flags=re.IGNORECASE)


def week_block(monday: date, summary: str) -> str:
    return f'<summary week="{week_label(monday)}">\n{_inside(summary)}\n</summary>'


def day_block(day: date, summary: str) -> str:
    return f'<summary date="{day_label(day)}">\n{_inside(summary)}\n</summary>'


def important_memories(
    weeks: Sequence[tuple[date, Sequence[str]]], days: Sequence[tuple[date, Sequence[str]]]
) -> str:
    """The key details for the conversation's system prompt, by date; a week's replace its days'.
    Empty when there are none."""
    covered = {monday for monday, _ in weeks}
    groups = [(monday, f"[Week of {week_label(monday)}]", details) for monday, details in weeks]
    groups += [
        (day, f"[{day_label(day)}]", details) for day, details in days if week_start(day) not in covered
    ]
    lines = []
    for _, header, details in sorted((g for g in groups if g[2]), key=lambda g: g[0]):
        lines.append(header)
        lines.extend(f"- {d.strip()}" for d in details if d.strip())
    if not lines:
        return ""
    body = "\n".join(lines)
    return f"<important_memories>\nThings you must remember from past conversations:\n{body}\n</important_memories>"


# Conditional parts ----------------------------------------------------------------------------------

# The condition is bounded, so a text full of "{{#if" without "}}" is still read in linear time. An opener
# whose condition does not end in "}}" within the bound is unreadable: its body stays private.
_TAG = re.compile(
    r"\{\{\s*#if\b([^{}]{0," + str(MAX_CONDITION_CHARS) + r"})(\}\})?|\{\{\s*/if\s*\}\}", re.IGNORECASE
)
_EQUALS = re.compile(r"\s*(?:char|character)\s*==\s*(?:\"([^\"]*)\"|'([^']*)')\s*", re.IGNORECASE)
_NARRATOR = re.compile(r"\s*narrator\s*", re.IGNORECASE)

NARRATOR_ONLY: frozenset[str] = frozenset()  # an audience with no character in it


@dataclass(frozen=True)
class _Block:
    audience: frozenset[str] | None  # casefolded names; None: unreadable, so nobody but the narrator
    parts: tuple[str | _Block, ...]


def _audience(condition: str) -> frozenset[str] | None:
    if _NARRATOR.fullmatch(condition):
        return NARRATOR_ONLY
    names = []
    clauses = condition.split("||")
    if len(clauses) > MAX_CONDITION_NAMES:
        return None
    for clause in clauses:
        m = _EQUALS.fullmatch(clause)
        if m is None:
            return None
        name = (m.group(1) if m.group(1) is not None else m.group(2)).strip()
        if not name or len(name) > MAX_NAME_CHARS:
            return None
        names.append(name.casefold())
    return frozenset(names)


def _check_size(text: str) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"A summary is at most {MAX_TEXT_CHARS:,} characters.")


def _parse(text: str) -> tuple[str | _Block, ...]:
    root: list[str | _Block] = []
    stack: list[tuple[list[frozenset[str] | None], list[str | _Block]]] = []  # [audience], parts
    overflow = 0  # openers past MAX_IF_DEPTH: the deepest block turns unreadable and swallows them
    pos = 0
    for m in _TAG.finditer(text):
        current = stack[-1][1] if stack else root
        if m.start() > pos:
            current.append(text[pos : m.start()])
        pos = m.end()
        if m.group(1) is not None:  # an opener
            if len(stack) < MAX_IF_DEPTH:
                stack.append(([_audience(m.group(1)) if m.group(2) else None], []))
            else:
                stack[-1][0][0] = None
                overflow += 1
        elif overflow:
            overflow -= 1
        elif stack:
            audience, parts = stack.pop()
            (stack[-1][1] if stack else root).append(_Block(audience[0], tuple(parts)))
    (stack[-1][1] if stack else root).append(text[pos:])
    while stack:  # never closed: the rest of the text is the block's body
        audience, parts = stack.pop()
        (stack[-1][1] if stack else root).append(_Block(audience[0], tuple(parts)))
    return tuple(root)


def has_conditions(text: str) -> bool:
    # Every tag opens with "{{": a plain substring test spares the regex for the texts without one.
    return "{{" in text and _TAG.search(text) is not None


def visible_to(text: str, character_name: str | None) -> str:
    """The text `character_name` may read; None is the narrator, who reads every part."""
    _check_size(text)
    reader = None if character_name is None else character_name.strip().casefold()
    if not has_conditions(text):
        return text

    def render(parts: Sequence[str | _Block]) -> str:
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            elif reader is None or (part.audience is not None and reader in part.audience):
                out.append(render(part.parts))
        return "".join(out)

    return _tidy(render(_parse(text)))


def merged_view(text: str, character_names: Sequence[str]) -> str:
    """The text for one reply that speaks for all of `character_names`: a part reaches it if one of
    them knows it, marked "(known only to …)" when not all of them do."""
    _check_size(text)
    present = {n.strip().casefold(): n.strip() for n in character_names if n.strip()}
    if not has_conditions(text):
        return text
    everyone = frozenset(present)

    def render(parts: Sequence[str | _Block], knowers: frozenset[str]) -> str:
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
                continue
            inner = knowers & part.audience if part.audience is not None else frozenset()
            if not inner:
                continue
            body = render(part.parts, inner)
            core = body.strip()
            if not core:
                continue
            if inner != knowers:
                names = [present[k] for k in present if k in inner]  # in the order the caller gave
                lead = body[: len(body) - len(body.lstrip())]  # the mark goes after it, not the space
                body = f"{lead}({known_only_to(names)}) {body.lstrip()}"
            out.append(body)
        return "".join(out)

    return _tidy(render(_parse(text), everyone))


def known_only_to(names: Sequence[str]) -> str:
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"known only to {listed}"


def _tidy(text: str) -> str:
    """Left-out parts leave no runs of blank lines or double spaces behind."""
    text = re.sub(r"(?<=\S)[ \t]{2,}", " ", text)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()

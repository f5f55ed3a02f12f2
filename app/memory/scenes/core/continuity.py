"""Updating continuity, the pure part (the manual's "A janela atual e o orçamento"): when the active Chat
Summary entries pass 70% of the Summary and recall budget, the helper combines them into one of about
half their size; this module decides when, builds the requests and judges the answers. The service is
continuity_jobs.py.

Decisions (where the issue and the manual are silent, or where Sugo differs):
- Entries with macros other than {{user}} and {{char}} (the {{#if char == "…"}} sections of group
  chats among them) are left as they are and not sent: the manual's "Resumos que usam outras macros
  ficam como estão". Sugo does not yet shorten each character's private section on its own.
- A text longer than PART_INPUT_TOKENS goes in parts (whole entries, in order), each halved on its own;
  the combined entry is the parts' answers in order.
- The answer may be as long as the text plus 1,024 tokens, at most 8,196 or Chat Summary → Maximum
  output size when that is larger (the manual's figures); an answer cut off at that limit, empty, not
  shorter than the text, or holding a macro the text did not hold is refused, and the entries stay.
- `continuity_key` names a set of entries with the helper and the prompt: a set that failed is not sent
  again until one of them changes (the manual's "não são enviados de novo").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.connections.core.answers import strip_thinking

CONTINUITY_SHARE = 0.7
PART_INPUT_TOKENS = 12_000
EXTRA_OUTPUT_TOKENS = 1024
MIN_OUTPUT_CAP = 8196
MAX_ANSWER_CHARS = 200_000
COMBINED_TITLE = "Continuity"
DEFAULT_COMBINE_PROMPT = (
    "You keep the continuity of a long roleplay story. Combine the summaries you are given into one "
    "summary in past tense, keeping names, places, promises, injuries, possessions and unresolved threads, "
    "and dropping repetition. Write plain prose, no headings, no commentary."
)
_MACRO = re.compile(r"\{\{[^{}]{0,200}\}\}")
_PLAIN_MACROS = frozenset({"{{user}}", "{{char}}"})


@dataclass(frozen=True)
class EntryText:
    """An active Chat Summary entry as the combine request sends it."""

    id: int
    text: str  # its title and content as the prompt shows them
    tokens: int


@dataclass(frozen=True)
class Refused:
    reason: str  # a sentence for the panel


def macros(text: str) -> set[str]:
    return {m.lower().replace(" ", "") for m in _MACRO.findall(text)}


def keeps_as_is(text: str) -> bool:
    """An entry with macros other than {{user}} and {{char}}: never sent to be combined."""
    return bool(macros(text) - _PLAIN_MACROS)


def combine_due(tokens: Sequence[int], budget: int) -> bool:
    """The active entries pass the constants' share of the budget."""
    return sum(max(0, t) for t in tokens) > CONTINUITY_SHARE * max(0, budget)


def parts(entries: Sequence[EntryText], limit: int = PART_INPUT_TOKENS) -> list[list[EntryText]]:
    """Whole entries in order, grouped so that each group's text stays within `limit` tokens (an entry
    bigger than that is a part alone)."""
    out: list[list[EntryText]] = []
    used = 0
    for e in entries:
        if out and used + e.tokens <= limit:
            out[-1].append(e)
            used += e.tokens
        else:
            out.append([e])
            used = e.tokens
    return out


def part_text(entries: Sequence[EntryText]) -> str:
    return "\n\n".join(e.text.strip() for e in entries if e.text.strip())


def combine_request(prompt: str, text: str, tokens: int) -> list[dict]:
    """The request for one part: the Combine prompt, one line asking for about half the size (and to keep
    {{user}}/{{char}} as written when the text has them), and the text."""
    ask = f"Rewrite the summaries below as one summary of about half their length (about {max(1, tokens // 2)} tokens)."
    if macros(text):
        ask += " Keep every {{user}} and {{char}} exactly as written."
    return [
        {"role": "system", "content": prompt.strip() or DEFAULT_COMBINE_PROMPT},
        {"role": "user", "content": f"{ask}\n\n{text}"},
    ]


def combine_max_tokens(input_tokens: int, max_output_size: int) -> int:
    return max(1, min(max(0, input_tokens) + EXTRA_OUTPUT_TOKENS, max(MIN_OUTPUT_CAP, max_output_size)))


def read_combined(
    answer: str, *, text: str, tokens: int, finish_reason: str | None, count: Callable[[str], int]
) -> str | Refused:
    """The combined summary, or why the answer cannot replace the entries."""
    if finish_reason == "length":
        return Refused("The helper's answer was cut off at its output limit.")
    body = (answer or "")[:MAX_ANSWER_CHARS].strip()
    body = strip_thinking(body).answer  # the one reader of model answers
    if not body:
        return Refused("The helper's answer was empty.")
    if count(body) >= tokens:
        return Refused("The helper's answer was not shorter than the summaries.")
    added = macros(body) - macros(text)
    if added:
        return Refused(f"The helper's answer added a macro ({sorted(added)[0]}).")
    return body


def continuity_key(entries: Sequence[EntryText], helper: str, prompt: str) -> str:
    """Names this set of entries with this helper and Combine prompt."""
    digest = hashlib.sha256()
    for e in entries:
        digest.update(f"{e.id}\x00{e.text}\x01".encode())
    digest.update(f"{helper}\x02{prompt}".encode())
    return digest.hexdigest()[:32]

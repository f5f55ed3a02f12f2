"""Who took part in a scene, from the names in its recap: which characters the names are, which scene
speakers the recap left out, and who may recall the scene. Pure functions; the decisions are in
`app/memory/scenes/core/recap.py`'s docstring (steps 3 and "Names the helper gives")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.memory.scenes.core.recap import Recap, clean_names


@dataclass(frozen=True)
class Audience:
    characters: tuple[str, ...]  # card names that may recall the scene
    check_who_was_there: bool  # shown to the user: the helper's list was missing, unclear or incomplete
    narrator_only: bool  # the helper named nobody but the persona (or nobody at all)


# Matching ----------------------------------------------------------------------------------------

_NOTE = re.compile(r"[()\[\]{}]|['’]s\b|\b(?:mentioned|absent|offscreen|off-screen)\b", re.IGNORECASE)
_WORD_EDGE = ".,;:!?\"'“”"


def _words(name: str) -> list[str]:
    return [w.strip(_WORD_EDGE) for w in name.casefold().split() if w.strip(_WORD_EDGE)]


def _run_of(words: list[str], name: str) -> bool:
    """`words` are consecutive words of `name`."""
    full = _words(name)
    n = len(words)
    return 0 < n <= len(full) and any(full[i : i + n] == words for i in range(len(full) - n + 1))


def match_participants(
    named: Sequence[str], characters: Sequence[str], persona: str | None
) -> tuple[list[str], list[str]]:
    """The card names of the characters the helper named, and the names that match no single character.
    The persona's own name is in neither list."""
    matched: list[str] = []
    unmatched: list[str] = []
    persona_key = " ".join(persona.split()).casefold() if persona else None
    for name in clean_names(named):
        key = name.casefold()
        exact = [c for c in characters if " ".join(c.split()).casefold() == key]
        if key == persona_key:
            if exact:  # a character and the persona share the name: who was there is unclear
                unmatched.append(name)
            continue
        if len(exact) == 1:
            found: str | None = exact[0]
        elif exact or _NOTE.search(name):
            found = None  # shared full name, or a description or note ("Kaito's sister", "(mentioned)")
        else:
            words = _words(name)
            runs = [c for c in characters if _run_of(words, c)]
            shared = persona is not None and _run_of(words, persona)
            found = runs[0] if len(runs) == 1 and not shared else None
        if found is None:
            unmatched.append(name)
        elif found not in matched:
            matched.append(found)
    return [c for c in characters if c in matched], unmatched


def missing_speakers(
    recap: Recap, speakers: Sequence[str], *, characters: Sequence[str], persona: str | None
) -> list[str]:
    """The scene's speakers (card names of characters who wrote messages in it) that the recap's
    participants do not include. Not empty: ask again with `must_include`, then `recap_audience`."""
    matched, _ = match_participants(recap.participants or (), characters, persona)
    have = {m.casefold() for m in matched}
    persona_key = persona.casefold().strip() if persona else None
    out: list[str] = []
    for speaker in speakers:
        key = speaker.casefold().strip()
        if key and key not in have and key != persona_key and speaker not in out:
            out.append(speaker)
    return out


def recap_audience(
    recap: Recap,
    *,
    speakers: Sequence[str],
    characters: Sequence[str],
    persona: str | None,
    group: bool,
) -> Audience:
    """Who may recall the scene. The helper did not say: every character, flagged in a group chat. It
    named someone: the characters it named plus any speaker it left out (they were there; the flag
    says the recap may lack their side), flagged in a group chat when a speaker was left out or a name
    matched no single character. It named only the persona or nobody: the narrator alone."""
    if recap.participants is None:
        return Audience(tuple(characters), group, False)
    matched, unmatched = match_participants(recap.participants, characters, persona)
    missing = missing_speakers(recap, speakers, characters=characters, persona=persona)
    chosen = {c.casefold() for c in matched + missing}
    names = tuple(c for c in characters if c.casefold() in chosen)
    names += tuple(m for m in missing if m not in names)  # a speaker without a card (renamed, deleted)
    return Audience(names, group and bool(missing or unmatched), not names)

"""Cutting a text to a number of code points without splitting what a reader sees as one character
(the memory of a chat, an excerpt a message quotes, another chat's memory sent with a message). Pure.

Decisions:
- A cut backs off to the start of the cluster it would split (a base and its combining marks, an emoji
  and its skin tone, variation selector or tag characters, a ZWJ sequence, a flag's two regional
  indicators, a surrogate pair from bad input); a lone high surrogate left at the end is dropped. So a
  cut text can be a few code points shorter than the limit, never longer.
- A "[redacted]" marker (what the chat memory's redaction leaves) is never cut in the middle: the cut
  backs off to its start.
- `limit` below 1 gives "" for a text that does not fit: there is no room even for the ellipsis.
"""

from __future__ import annotations

import unicodedata

ELLIPSIS = "…"
REDACTED = "[redacted]"

_ZWJ = "\u200d"


def _is_high_surrogate(ch: str) -> bool:
    return "\ud800" <= ch <= "\udbff"


def _is_low_surrogate(ch: str) -> bool:
    return "\udc00" <= ch <= "\udfff"


def _is_regional_indicator(ch: str) -> bool:
    return "\U0001f1e6" <= ch <= "\U0001f1ff"


def _extends(ch: str) -> bool:
    """A character that belongs to the one before it, whatever that one is."""
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Mc"):
        return True
    return (
        ch == _ZWJ
        or "\ufe00" <= ch <= "\ufe0f"
        or "\U000e0100" <= ch <= "\U000e01ef"
        or "\U0001f3fb" <= ch <= "\U0001f3ff"
        or "\U000e0020" <= ch <= "\U000e007f"
    )


def _joins_previous(text: str, i: int) -> bool:
    """Whether text[i] belongs to the cluster of text[i - 1] (so a cut at i would split it)."""
    ch, before = text[i], text[i - 1]
    if _extends(ch) or before == _ZWJ:
        return True
    if _is_low_surrogate(ch) and _is_high_surrogate(before):
        return True
    if _is_regional_indicator(ch):
        # Flags pair regional indicators from the start of a run: the second of a pair joins.
        run = 0
        j = i - 1
        while j >= 0 and _is_regional_indicator(text[j]):
            run += 1
            j -= 1
        return run % 2 == 1
    return False


def _cluster_start(text: str, i: int) -> int:
    """The start of the cluster that holds text[i]: the nearest cut point at or before i."""
    i = max(0, min(i, len(text)))
    while 0 < i < len(text) and _joins_previous(text, i):
        i -= 1
    return i


def cut(text: str, limit: int) -> str:
    """`text` if it fits in `limit` code points; else its start ending in "…", at most `limit` long."""
    if len(text) <= limit:
        return text
    if limit < 1:
        return ""
    end = limit - 1
    marker = text.rfind(REDACTED[0], max(0, end - len(REDACTED) + 1), end)
    if marker >= 0 and text.startswith(REDACTED, marker):
        end = marker  # "[redacte…" would read as a broken word: the marker goes whole or not at all
    kept = text[: _cluster_start(text, end)]
    while True:
        kept = kept.rstrip()
        if kept and _is_high_surrogate(kept[-1]):
            kept = kept[:-1]
            continue
        return kept + ELLIPSIS

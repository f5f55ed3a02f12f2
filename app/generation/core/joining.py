"""Where a continuation meets the reply it extends. Pure: no I/O."""

from __future__ import annotations

# A continuation starting with these needs no space before it.
_JOINS_WITHOUT_SPACE = ".,;:!?)]}…'’"


def continuation_joint(kept: str, first: str) -> str:
    """What goes between a reply and the first words of its continuation: a space, unless one side
    already has one or the continuation goes on with punctuation."""
    if not kept or kept[-1].isspace() or not first or first[0].isspace() or first[0] in _JOINS_WITHOUT_SPACE:
        return ""
    return " "

"""How a preset arranges the prompt: which section each block belongs to, where it goes, how it is wrapped.

Sugo's own layout table (layout.py) is the built-in default preset (`DEFAULT_PRESET`): every slot a
marker, in the table's order, the history where "message" stands. A preset the user makes or imports
reorders those markers, turns some off, moves some to a depth, adds custom text with a role, and wraps
sections in XML tags or Markdown headings; the builder (builder.py) asks `arrange` once per prompt.

Decisions:
- A part the preset does not name goes where the default preset puts it: a stable part at the end of
  what comes before the history (a file from SillyTavern names none of the memory parts, and they
  still reach the model), a changing one above the newest turns, a note at its own depth.
- The main prompt is the exception: a preset without one writes its own (Marinara's default has a
  "Role" section instead), so Sugo's built-in main prompt is left out; a card's system prompt is kept.
- A marker named twice (SillyTavern's description and personality are one part here) is placed by its
  first enabled section; a part all of whose sections are off is left out.
- The group nudge, the Game Master's turn, Continue's nudge, Impersonate's instruction and the reply's
  prefill are not markers: they are the request itself and always come last.
- What changes every turn (the "dynamic" and "at_depth" groups) placed above stable parts breaks the
  provider's cached prefix from that block on: the prompt says so (`cache_warning`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.presets.core.model import CHAT_HISTORY, Preset, Section
from app.prompt.core.layout import GROUP_OF, LAYOUT, ORDER_OF, STABLE_GROUPS

FIXED_AT_END = frozenset(("group_nudge", "game_master_turn", "continue_nudge", "impersonation", "prefill"))
CHANGING_GROUPS = ("dynamic", "at_depth")


def marker_of(kind: str) -> str:
    return CHAT_HISTORY if kind == "message" else kind


def kind_of(marker: str) -> str:
    return "message" if marker == CHAT_HISTORY else marker


# The parts the builder makes itself; every other marker is a kind a registered prompt source declares
# (`PromptSource.kinds`), so a new source is a marker by being registered.
CORE_KINDS = (
    "main_prompt",
    "character",
    "scenario",
    "persona",
    "examples",
    "message",
    "post_history",
    "tool_reminders",
)


def available_markers(source_kinds: Iterable[str]) -> dict[str, str]:
    """Every part a preset can place (Sugo's own and the registered sources'), with the layout's words
    for it, in the default order."""
    kinds = set(CORE_KINDS) | set(source_kinds)
    return {marker_of(s.kind): s.label for s in LAYOUT if s.kind in kinds and s.kind not in FIXED_AT_END}


# Every slot of the layout, filled by a source or not (for the builder; a slot nothing fills is inert).
MARKERS: dict[str, str] = {marker_of(s.kind): s.label for s in LAYOUT if s.kind not in FIXED_AT_END}


def _default_section(kind: str, label: str) -> Section:
    group = GROUP_OF[kind]
    if kind == "message" or group in STABLE_GROUPS or kind == "post_history":
        placement = "ordered"
    elif group == "dynamic":
        placement = "recent"
    else:
        placement = "default"
    return Section(id=marker_of(kind), name=label, marker=marker_of(kind), placement=placement)


DEFAULT_NAME = "Sugo default"
DEFAULT_DESCRIPTION = (
    "Sugo's cache-friendly layout: what stays the same first, what changes near the newest turns."
)


def default_preset(markers: Mapping[str, str] = MARKERS) -> Preset:
    """The layout table as a preset: of `markers` (the parts that exist), each in the table's order."""
    return Preset(
        name=DEFAULT_NAME,
        description=DEFAULT_DESCRIPTION,
        sections=tuple(_default_section(kind_of(m), label) for m, label in markers.items()),
    )


DEFAULT_PRESET = default_preset()


@dataclass(frozen=True)
class Arrangement:
    """A preset read for one prompt. Positions are indexes in the preset's section list."""

    placed: Mapping[str, tuple[int, Section]]  # kind -> its first enabled section
    off: frozenset[str]  # kinds the preset turns off
    history_at: int  # where the history stands in the list (the end when the preset has none)
    custom: tuple[tuple[int, Section], ...]  # enabled custom text sections
    main_text: str  # the main prompt's text from the preset ("" keeps Sugo's)
    # The preset has no main prompt section: its own text stands for one (Marinara's "Role"), so Sugo's
    # built-in text is not added; a card's own system prompt still is.
    no_main: bool
    post_history_text: str
    wrap: str

    def position(self, kind: str) -> int | None:
        at = self.placed.get(kind)
        return at[0] if at else None

    def section(self, kind: str) -> Section | None:
        at = self.placed.get(kind)
        return at[1] if at else None

    def before_history(self, position: int) -> bool:
        return position < self.history_at


def arrange(preset: Preset) -> Arrangement:
    placed: dict[str, tuple[int, Section]] = {}
    named: set[str] = set()
    custom: list[tuple[int, Section]] = []
    history_at = len(preset.sections)
    for i, section in enumerate(preset.sections):
        if section.marker is None:
            if section.enabled and section.content.strip():
                custom.append((i, section))
            continue
        kind = kind_of(section.marker)
        named.add(kind)
        if section.enabled and kind not in placed:
            placed[kind] = (i, section)
            if kind == "message":
                history_at = i
    main, post = placed.get("main_prompt"), placed.get("post_history")
    return Arrangement(
        placed=placed,
        off=frozenset(named - set(placed) - {"message"}),
        history_at=history_at,
        custom=tuple(custom),
        main_text=main[1].content.strip() if main else "",
        no_main="main_prompt" not in named,
        post_history_text=post[1].content.strip() if post else "",
        wrap=preset.wrap,
    )


def default_sort_key(kind: str) -> int:
    """Past every section of a preset: parts it does not name keep the default order among themselves."""
    return 100_000 + ORDER_OF.get(kind, 0)


def wrap_text(text: str, name: str, wrap: str) -> tuple[str, str]:
    """The opening and closing a section's text gets: an XML tag named after the section, a Markdown
    heading, or nothing."""
    if wrap == "xml":
        tag = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "section"
        return f"<{tag}>\n", f"\n</{tag}>"
    if wrap == "markdown":
        return f"## {name.strip() or 'Section'}\n", ""
    return "", ""

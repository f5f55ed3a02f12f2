"""A preset: the prompt's sections in order, how they are wrapped, the choices the chat picks from and the
generation parameters. Plain data; `check_preset` says what is wrong with one before anything is written.

A section is either custom text (a role and a content) or a marker standing for a part Sugo builds (the
main prompt, the character, the history, a prompt source's blocks...). Markers are named by the kinds
of the prompt layout (app/prompt/core/layout.py, plus "chat_history" for the messages); which markers
exist is the caller's to say (`known_markers`): the core kinds and the kinds the registered prompt
sources declare, so a new source is a marker by being registered.

Decisions:
- A marker's `content` replaces Sugo's built-in text where the part has one (the main prompt, the
  post-history instructions); a card's own system prompt or post-history instructions still win, with
  {{original}} standing for the preset's text, as in SillyTavern.
- `placement` "depth" puts a section among the recent messages, `depth` messages from the newest
  (SillyTavern's in-chat @ depth, Marinara's depth injection); "ordered" keeps it where it stands in
  the list, before the history or after it; "recent" and "default" are Sugo's own (PLACEMENTS).
- A choice with no pick for the chat uses its first option (Marinara); a multi-select choice joins its
  picked values with its separator. A choice's value may name another choice (`{{other}}`); a cycle is
  refused when the preset is saved, not met at generation time.
- Unknown fields of an imported file are kept in `extra` (the preset's, each section's, each choice's)
  so an export gives them back.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from app.platform.core.errors import UserError

WRAPS = ("none", "xml", "markdown")
ROLES = ("system", "user", "assistant")
# "ordered": where the section stands in the list; "depth": among the recent messages, `depth` from the
# newest; "recent": just above the newest speaker turns (Sugo's place for what changes every turn);
# "default": where the part itself goes (a context note at the depth its chat set, a block where Sugo's
# default layout puts it). Custom text is ordered or at a depth.
PLACEMENTS = ("ordered", "depth", "recent", "default")
CHAT_HISTORY = "chat_history"
MAX_SECTIONS = 200
MAX_TEXT = 100_000
MAX_CHOICES = 100
MAX_OPTIONS = 100
MAX_DEPTH = 1000
MAX_NAME = 200
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# Sugo's own macros: a choice by one of these names would hide the macro everywhere in the prompt.
RESERVED_VARIABLES = frozenset(
    ("char", "user", "original", "persona", "description", "personality", "scenario", "group", "model",
     "input", "time", "date", "weekday", "isotime", "isodate", "random", "roll", "pick", "newline", "trim")
)  # fmt: skip # a table: the macro names, several to a line
_REFERENCE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class PresetError(UserError):
    """What is wrong with a preset, as a sentence for the user; nothing was written."""


@dataclass(frozen=True)
class Section:
    id: str  # unique in the preset: SillyTavern's and Marinara's `identifier`
    name: str
    marker: str | None = None  # the part it stands for; None: custom text
    content: str = ""
    role: str = "system"
    enabled: bool = True
    placement: str = "ordered"
    depth: int = 4
    extra: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class ChoiceOption:
    id: str
    label: str
    value: str


@dataclass(frozen=True)
class Choice:
    """A question the chat answers once, used in sections as {{variable}}."""

    variable: str
    question: str
    options: tuple[ChoiceOption, ...]
    multi: bool = False
    separator: str = ", "
    extra: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class Parameters:
    """Generation parameters; None leaves the connection's own value."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    max_tokens: int | None = None
    context_size: int | None = None


@dataclass(frozen=True)
class Preset:
    name: str
    sections: tuple[Section, ...]
    description: str = ""
    wrap: str = "none"
    choices: tuple[Choice, ...] = ()
    parameters: Parameters = Parameters()
    prefill: str = ""  # the assistant's reply starts with it, where the provider allows a prefill
    extra: Mapping = field(default_factory=dict)


def check_preset(preset: Preset, known_markers: Collection[str]) -> None:
    """Raise PresetError with the first problem found: limits, unknown markers, bad roles or places,
    duplicate ids, choices without options or referring to each other in a cycle."""
    _check_text("The preset's name", preset.name, MAX_NAME, required=True)
    _check_text("The preset's description", preset.description, MAX_TEXT)
    _check_text("The prefill", preset.prefill, MAX_TEXT)
    if preset.wrap not in WRAPS:
        raise PresetError(f"Unknown wrap format {preset.wrap!r}: use one of {', '.join(WRAPS)}.")
    if len(preset.sections) > MAX_SECTIONS:
        raise PresetError(
            f"The preset has {len(preset.sections)} sections; at most {MAX_SECTIONS} are allowed."
        )
    seen: set[str] = set()
    for number, section in enumerate(preset.sections, 1):
        where = f"Section {number} ({section.name or section.id})"
        if not section.id or section.id in seen:
            raise PresetError(f"{where} needs an identifier of its own.")
        seen.add(section.id)
        _check_text(f"{where}'s name", section.name, MAX_NAME)
        _check_text(f"{where}", section.content, MAX_TEXT)
        if section.marker is not None and section.marker not in known_markers:
            raise PresetError(f"{where} stands for {section.marker!r}, which Sugo does not know.")
        if section.role not in ROLES:
            raise PresetError(f"{where} has the role {section.role!r}: use system, user or assistant.")
        if section.placement not in PLACEMENTS:
            raise PresetError(f"{where} is placed {section.placement!r}: use {', '.join(PLACEMENTS)}.")
        if section.marker is None and section.placement not in ("ordered", "depth"):
            raise PresetError(f"{where} is custom text: place it in the list or at a depth.")
        if section.marker == CHAT_HISTORY and section.placement != "ordered":
            raise PresetError("The chat history keeps its place in the list.")
        if not 0 <= section.depth <= MAX_DEPTH:
            raise PresetError(f"{where}'s depth must be between 0 and {MAX_DEPTH}.")
    if sum(s.marker == CHAT_HISTORY for s in preset.sections) > 1:
        raise PresetError("The chat history can appear only once in a preset.")
    _check_choices(preset.choices)


def _check_text(what: str, text: str, limit: int, *, required: bool = False) -> None:
    if required and not text.strip():
        raise PresetError(f"{what} is empty.")
    if len(text) > limit:
        raise PresetError(f"{what} is {len(text):,} characters long; at most {limit:,} are allowed.")


def _check_choices(choices: Sequence[Choice]) -> None:
    if len(choices) > MAX_CHOICES:
        raise PresetError(f"The preset has {len(choices)} choices; at most {MAX_CHOICES} are allowed.")
    names: set[str] = set()
    for choice in choices:
        if choice.variable.lower() in RESERVED_VARIABLES:
            raise PresetError(
                f"The choice {choice.variable!r} has the name of one of Sugo's macros; rename it."
            )
        if not _VARIABLE.match(choice.variable) or choice.variable in names:
            raise PresetError(
                f"The choice {choice.question or choice.variable!r} needs a variable name of its own "
                "(letters, digits and underscores)."
            )
        names.add(choice.variable)
        _check_text(f"The choice {choice.variable!r}'s question", choice.question, MAX_TEXT)
        if not choice.options or len(choice.options) > MAX_OPTIONS:
            raise PresetError(f"The choice {choice.variable!r} needs between 1 and {MAX_OPTIONS} options.")
        for option in choice.options:
            _check_text(f"An option of {choice.variable!r}", option.value, MAX_TEXT)
            _check_text(f"An option of {choice.variable!r}'s label", option.label, MAX_NAME)
    cycle = _choice_cycle(choices)
    if cycle:
        raise PresetError("The choices refer to each other in a circle: " + " → ".join(cycle) + ".")


def _choice_cycle(choices: Sequence[Choice]) -> list[str]:
    """A cycle among choices whose option values name other choices, as the names along it; [] if none."""
    by_name = {c.variable: c for c in choices}
    refers = {
        c.variable: sorted({m for o in c.options for m in _REFERENCE.findall(o.value) if m in by_name})
        for c in choices
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> list[str]:
        state[name] = 1
        for nxt in refers[name]:
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt] if nxt in path else [name, nxt]
            if nxt not in state:
                found = visit(nxt, [*path, nxt])
                if found:
                    return found
        state[name] = 2
        return []

    for name in by_name:
        if name not in state:
            found = visit(name, [name])
            if found:
                return found
    return []


def chosen_values(choices: Sequence[Choice], picks: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Each choice's value for the chat: the picked options' values (in the options' order, joined by
    the separator for a multi-select), the first option when nothing valid is picked. Values naming
    other choices are resolved (the preset was checked for cycles)."""
    raw: dict[str, str] = {}
    for choice in choices:
        picked = set(picks.get(choice.variable, ()))
        chosen = [o for o in choice.options if o.id in picked]
        if not choice.multi:
            chosen = chosen[:1]
        raw[choice.variable] = choice.separator.join(o.value for o in (chosen or choice.options[:1]))

    def resolve(text: str, depth: int = 0) -> str:
        if depth > len(raw):  # cannot happen for a checked preset; never loop on an unchecked one
            return text
        return _REFERENCE.sub(
            lambda m: resolve(raw[m.group(1)], depth + 1) if m.group(1) in raw else m.group(0), text
        )

    return {name: resolve(value) for name, value in raw.items()}


def fill_choices(text: str, values: Mapping[str, str]) -> str:
    """`{{variable}}` of a choice replaced by its value; every other macro left for the macro engine."""
    if "{{" not in text or not values:
        return text
    return _REFERENCE.sub(lambda m: values.get(m.group(1), m.group(0)), text)

"""SillyTavern's context and instruct template files: read, checked and written back.

Every field SillyTavern writes is a field here; anything else is kept in `extra`, and `source` remembers
the file, so `*_to_json` gives it back with its own keys in its own order (a field changed since is
written too). Older files' `names` and `separator_sequence` still mean what SillyTavern's
`migrateInstructModeSettings` (public/scripts/instruct-mode.js) makes of them, and stay in `extra`.
A file of the wrong shape raises TemplateError with a sentence for the user.
The prompt they make is app/connections/core/raw_prompt.py.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from app.connections.core.story_string import StoryStringError, check_story_string

__all__ = [
    "ContextTemplate",
    "InstructTemplate",
    "TemplateError",
    "context_template_to_json",
    "instruct_template_to_json",
    "parse_context_template",
    "parse_instruct_template",
]


MAX_TEXT_CHARS = 100_000
NAMES_BEHAVIORS = ("force", "always", "none")


class TemplateError(ValueError):
    """A template file of the wrong shape; `reason` is a sentence for the user."""

    @property
    def reason(self) -> str:
        return str(self)


# A key a file leaves out takes the value every preset SillyTavern ships has (SillyTavern itself keeps
# the previous template's value).
@dataclass(frozen=True)
class ContextTemplate:
    story_string: str
    example_separator: str = ""
    chat_start: str = ""
    use_stop_strings: bool = False
    names_as_stop_strings: bool = True
    always_force_name2: bool = True
    trim_sentences: bool = False
    single_line: bool = False
    story_string_position: int = 0
    story_string_depth: int = 1
    story_string_role: int = 0  # 0 system, 1 user, 2 assistant
    name: str = ""
    extra: dict = field(default_factory=dict)
    source: Mapping | None = field(default=None, compare=False, repr=False)  # the file, for to_json


@dataclass(frozen=True)
class InstructTemplate:
    input_sequence: str
    output_sequence: str
    last_output_sequence: str = ""
    system_sequence: str = ""
    stop_sequence: str = ""
    wrap: bool = True
    macro: bool = True
    names_behavior: Literal["force", "always", "none"] = "force"
    activation_regex: str = ""
    system_sequence_prefix: str = ""
    system_sequence_suffix: str = ""
    first_output_sequence: str = ""
    skip_examples: bool = False
    output_suffix: str = ""
    input_suffix: str = ""
    system_suffix: str = ""
    user_alignment_message: str = ""
    system_same_as_user: bool = False
    last_system_sequence: str = ""
    first_input_sequence: str = ""
    last_input_sequence: str = ""
    sequences_as_stop_strings: bool = True
    story_string_prefix: str = ""
    story_string_suffix: str = ""
    name: str = ""
    extra: dict = field(default_factory=dict)  # unknown keys, and old files' names/separator_sequence
    source: Mapping | None = field(default=None, compare=False, repr=False)  # the file, for to_json


def _kind(value: object) -> str:
    for kind, words in ((bool, "true or false"), (int | float, "a number"), (str, "text"), (list, "a list")):
        if isinstance(value, kind):
            return words
    return "null" if value is None else "an object"


_WANTED = {bool: "true or false", int: "a whole number", str: "text"}


def _data_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.name not in ("extra", "source")]


def _read(cls: type, data: object, what: str, required: tuple[str, ...]) -> dict:
    if not isinstance(data, Mapping):
        raise TemplateError(f"{what} must be a JSON object, not {_kind(data)}.")
    if missing := [key for key in required if key not in data]:
        raise TemplateError(f"This is not {what.lower()}: it has no {' or '.join(missing)}.")
    values: dict = {}
    for f in _data_fields(cls):
        if f.name not in data:
            continue
        value, want = data[f.name], f.default if f.default is not dataclasses.MISSING else ""
        if type(value) is not type(want):
            raise TemplateError(f'"{f.name}" must be {_WANTED[type(want)]}, not {_kind(value)}.')
        values[f.name] = value
    for key, value in data.items():
        if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
            raise TemplateError(
                f'"{key}" is {len(value):,} characters long; the limit is {MAX_TEXT_CHARS:,}.'
            )
    known = {f.name for f in _data_fields(cls)}
    # Copies: the caller's dict may change later, and the template is frozen.
    values["extra"] = copy.deepcopy({key: value for key, value in data.items() if key not in known})
    values["source"] = copy.deepcopy(dict(data))
    return values


def parse_context_template(data: Mapping) -> ContextTemplate:
    """A SillyTavern context template file (already JSON-decoded)."""
    values = _read(ContextTemplate, data, "A context template", ("story_string",))
    try:
        check_story_string(values["story_string"])
    except StoryStringError as error:
        raise TemplateError(str(error)) from None
    return ContextTemplate(**values)


def parse_instruct_template(data: Mapping) -> InstructTemplate:
    """A SillyTavern instruct template file (already JSON-decoded); older files migrated as ST does."""
    values = _read(InstructTemplate, data, "An instruct template", ("input_sequence", "output_sequence"))
    if "names_behavior" not in data and isinstance(data.get("names"), bool):
        force = data.get("names_force_groups") is True
        values["names_behavior"] = "always" if data["names"] else ("force" if force else "none")
    if "output_suffix" not in data and isinstance(data.get("separator_sequence"), str):
        values["output_suffix"] = data["separator_sequence"]
    if values.get("names_behavior", "force") not in NAMES_BEHAVIORS:
        raise TemplateError(
            f'"names_behavior" must be "force", "always" or "none", not "{data["names_behavior"]}".'
        )
    return InstructTemplate(**values)


def _to_json(template: ContextTemplate | InstructTemplate, parse) -> dict:
    values = {f.name: getattr(template, f.name) for f in _data_fields(type(template))}
    if template.source is None:
        return {**values, **template.extra}
    read = parse(template.source)  # what the file itself says: a field equal to it was not changed
    out: dict = {}
    for key in template.source:
        if key in values:
            out[key] = values[key]
        elif key in template.extra:
            out[key] = template.extra[key]
    for key, value in values.items():
        if key not in out and value != getattr(read, key):
            out[key] = value
    return {**out, **{key: value for key, value in template.extra.items() if key not in out}}


def context_template_to_json(template: ContextTemplate) -> dict:
    return _to_json(template, parse_context_template)


def instruct_template_to_json(template: InstructTemplate) -> dict:
    return _to_json(template, parse_instruct_template)

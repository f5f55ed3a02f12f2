"""Preset files: which format a file is, reading it into a Preset, and writing a Preset in each format.

Three formats are read: SillyTavern's Chat Completion preset (sillytavern.py), Marinara's preset
export (marinara.py) and Sugo's own (`{"sugo_preset": 1, ...}`, the model as JSON, extras included).
A file is refused with a sentence naming the problem: too big, not JSON, not an object, a shape Sugo
does not know, or a preset `check_preset` refuses (limits, unknown markers, choice cycles...).

An imported file keeps what Sugo does not use in `extra` (roundtrip.py), so exporting it in its own
format gives back the same JSON with Sugo's edits applied; exporting it in another format carries
what that format can say.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import asdict, fields
from typing import Any

from app.presets.core.marinara import is_marinara, read_marinara, write_marinara_preset
from app.presets.core.model import (
    Choice,
    ChoiceOption,
    Parameters,
    Preset,
    PresetError,
    Section,
    check_preset,
)
from app.presets.core.sillytavern import is_sillytavern, read_sillytavern, write_sillytavern_preset

__all__ = [
    "MAX_FILE_BYTES",
    "SUGO_VERSION",
    "read_preset_file",
    "write_marinara_preset",
    "write_sillytavern_preset",
    "write_sugo_preset",
]

MAX_FILE_BYTES = 5 * 1024 * 1024  # 200 sections of 100,000 characters would be 20 MB: no real preset
SUGO_VERSION = 1
# Keys of other SillyTavern settings files, to say what a file is when it is not a preset Sugo reads.
_ST_TEXT_COMPLETION = ("rep_pen", "story_string", "input_sequence", "system_sequence")


def read_preset_file(raw: bytes | str, known_markers: Collection[str], *, name: str | None = None) -> Preset:
    """The preset a file holds, checked; `name` (the file's name without extension) names a preset
    whose file has no name of its own. Raises PresetError with the reason."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        raise PresetError(
            f"The file is {size / 1024 / 1024:.1f} MB; a preset file may be at most "
            f"{MAX_FILE_BYTES // 1024 // 1024} MB."
        )
    doc = _json(raw)
    if not isinstance(doc, dict):
        raise PresetError(f"The file holds a JSON {_kind_of(doc)}, not a preset (a JSON object).")
    if "sugo_preset" in doc:
        preset = _read_sugo(doc)
    elif is_marinara(doc):
        preset = read_marinara(doc, known_markers, name)
    elif isinstance(doc.get("type"), str) and doc["type"].startswith("marinara_"):
        raise PresetError(f"This is a Marinara export of type {doc['type']!r}, not a prompt preset.")
    elif is_sillytavern(doc):
        preset = read_sillytavern(doc, known_markers, name)
    elif any(key in doc for key in _ST_TEXT_COMPLETION):
        raise PresetError(
            "This looks like a SillyTavern Text Completion preset or template; Sugo reads Chat "
            "Completion presets, the ones with a prompt list."
        )
    else:
        raise PresetError(
            "The file is not a preset Sugo knows: expected a SillyTavern Chat Completion preset "
            "(with prompts and prompt_order), a Marinara preset (.marinara.json) or a Sugo preset."
        )
    check_preset(preset, known_markers)
    return preset


def write_sugo_preset(preset: Preset) -> dict:
    """The preset in Sugo's own format: every field, extras included."""
    return {
        "sugo_preset": SUGO_VERSION,
        "name": preset.name,
        "description": preset.description,
        "wrap": preset.wrap,
        "prefill": preset.prefill,
        "parameters": asdict(preset.parameters),
        "sections": [{**asdict(s), "extra": _plain(s.extra)} for s in preset.sections],
        "choices": [
            {
                "variable": c.variable,
                "question": c.question,
                "options": [asdict(o) for o in c.options],
                "multi": c.multi,
                "separator": c.separator,
                "extra": _plain(c.extra),
            }
            for c in preset.choices
        ],
        "extra": _plain(preset.extra),
    }


def _json(raw: bytes | str) -> Any:
    try:
        text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise PresetError("The file is not JSON: it is not UTF-8 text.") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise PresetError(
            f"The file is not JSON: {error.msg} at line {error.lineno}, column {error.colno}."
        ) from None
    except RecursionError:
        raise PresetError("The file is not JSON Sugo can read: it is nested too deeply.") from None


def _kind_of(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "boolean" if isinstance(value, bool) else "number"


def _plain(extra: Mapping) -> dict:
    return json.loads(json.dumps(extra))


# ---- Sugo's own format


def _read_sugo(doc: Mapping) -> Preset:
    """A Sugo export. Keys a newer Sugo may add are ignored; wrong types are refused."""
    version = doc.get("sugo_preset")
    if version != SUGO_VERSION:
        raise PresetError(f"This Sugo preset is version {version!r}; this Sugo reads version {SUGO_VERSION}.")
    params = _object(doc.get("parameters", {}), "The preset's parameters")
    known = {f.name for f in fields(Parameters)}
    for key, value in params.items():
        if (
            key in known
            and value is not None
            and (isinstance(value, bool) or not isinstance(value, int | float))
        ):
            raise PresetError(f"The parameter {key} is not a number.")
    return Preset(
        name=_text(doc, "name", "The preset"),
        description=_text(doc, "description", "The preset"),
        wrap=_text(doc, "wrap", "The preset", "none"),
        prefill=_text(doc, "prefill", "The preset"),
        parameters=Parameters(**{k: v for k, v in params.items() if k in known}),
        sections=tuple(_sugo_section(s, n) for n, s in enumerate(_list(doc, "sections"), 1)),
        choices=tuple(_sugo_choice(c, n) for n, c in enumerate(_list(doc, "choices"), 1)),
        extra=_object(doc.get("extra", {}), "The preset's extra data"),
    )


def _sugo_section(raw: Any, position: int) -> Section:
    where = f"Section {position}"
    raw = _object(raw, where)
    marker = raw.get("marker")
    if marker is not None and not isinstance(marker, str):
        raise PresetError(f"{where}'s marker is not text.")
    depth = raw.get("depth", 4)
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise PresetError(f"{where}'s depth is not a whole number.")
    return Section(
        id=_text(raw, "id", where),
        name=_text(raw, "name", where),
        marker=marker,
        content=_text(raw, "content", where),
        role=_text(raw, "role", where, "system"),
        enabled=_bool(raw, "enabled", where, True),
        placement=_text(raw, "placement", where, "ordered"),
        depth=depth,
        extra=_object(raw.get("extra", {}), f"{where}'s extra data"),
    )


def _sugo_choice(raw: Any, position: int) -> Choice:
    where = f"Choice {position}"
    raw = _object(raw, where)
    options = []
    for n, option in enumerate(_list(raw, "options", where), 1):
        option = _object(option, f"Option {n} of {where.lower()}")
        options.append(
            ChoiceOption(
                id=_text(option, "id", f"Option {n}"),
                label=_text(option, "label", f"Option {n}"),
                value=_text(option, "value", f"Option {n}"),
            )
        )
    return Choice(
        variable=_text(raw, "variable", where),
        question=_text(raw, "question", where),
        options=tuple(options),
        multi=_bool(raw, "multi", where, False),
        separator=_text(raw, "separator", where, ", "),
        extra=_object(raw.get("extra", {}), f"{where}'s extra data"),
    )


def _text(raw: Mapping, key: str, where: str, default: str = "") -> str:
    value = raw.get(key, default)
    if not isinstance(value, str):
        raise PresetError(f"{where}'s {key} is not text.")
    return value


def _bool(raw: Mapping, key: str, where: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise PresetError(f"{where}'s {key} is not true or false.")
    return value


def _list(raw: Mapping, key: str, where: str = "The preset") -> list:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise PresetError(f"{where}'s {key} are not a list.")
    return value


def _object(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise PresetError(f"{what} is not a JSON object.")
    return value

"""Marinara Engine's preset export (`.marinara.json`) read into a Sugo preset, and written back.

The envelope is `{type: "marinara_preset", version: 1, exportedAt, data: {preset, sections, groups,
choiceBlocks}}` (routes/prompts.routes.ts, services/import/marinara.importer.ts): the database rows as
stored, so booleans may be "true"/"false" and lists, objects and parameters JSON text; both spellings
are read and each is written back as the file had it. `preset.sectionOrder` lists section row ids.

Decisions:
- Markers: persona, chat_history, dialogue_examples (examples), world_info_before (lore_before_char),
  world_info_after (constant_lore) map one to one. chat_summary, current_scene_summary and
  recalled_scenes are Advanced Memory's markers and Sugo's layout names its parts after them
  (chat_summary: "Chat Summary (Advanced Memory constants)"); recalled_messages is Advanced Memory's
  legacy alias of recalled_scenes. A marker type that is a Sugo part's name (Sugo's own export) is
  that part; any other type (agent_data, id_macro_cards...) is refused.
- One Marinara marker can stand for two Sugo parts: lorebook is the entries before and after the
  character (lore_before_char + constant_lore), and character includes the card's scenario unless
  its characterFields leave it out (character + scenario; Sugo's character block is the description
  and personality). The second part is its own section, right after the first, and remembers it
  (`part_of`); the export folds them into one marker again. Disabling one half narrows the folded
  marker (world_info_before, or characterFields without the scenario); where the halves were moved
  apart the fold stands at the first.
- Marinara sends a section only if it is in sectionOrder and neither it nor its group is disabled.
  Sugo has no groups yet: a section of a disabled group is imported disabled; the groups, each
  section's groupId and the preset's groupOrder are kept for the export. Enabling such a section in
  Sugo enables its group on export (its other members keep Sugo's flags). A section missing from
  sectionOrder is imported disabled after the others and stays out of the order until enabled.
- Parameters: topK 0 and minP 0 are "off" and become None; useMaxContext (use the model's window)
  leaves context_size None, the connection's own value; assistantPrefill is the prefill. Everything
  else (reasoningEffort, squashSystemMessages, strictRoleFormatting, stop sequences...) is kept for
  the export, not applied.
- Kept, not applied: a choice's randomPick (Sugo joins the picks), defaultChoices (a chat with no
  pick uses the first option), injectionOrder, forbidOverrides, skipWrap, markerConfig options.
- Sugo's main prompt and post-history instructions are written as plain sections with their text
  (Marinara has no such markers); Sugo's other parts Marinara lacks are written as markers of that
  part's name, which Marinara expands to nothing and Sugo reads back.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from app.presets.core.model import (
    MAX_DEPTH,
    ROLES,
    Choice,
    ChoiceOption,
    Parameters,
    Preset,
    PresetError,
    Section,
)
from app.presets.core.roundtrip import count, flag, number, remember, restore

KEY = "marinara"
TYPE = "marinara_preset"
# Marinara marker type → Sugo marker (lorebook and character are split: see the module's docstring).
MARKERS = {
    "persona": "persona",
    "world_info_before": "lore_before_char",
    "world_info_after": "constant_lore",
    "chat_history": "chat_history",
    "chat_summary": "chat_summary",
    "dialogue_examples": "examples",
    "current_scene_summary": "current_scene_summary",
    "recalled_scenes": "recalled_scenes",
    "recalled_messages": "recalled_scenes",
}
TYPES = {
    "persona": "persona",
    "lore_before_char": "world_info_before",
    "constant_lore": "world_info_after",
    "chat_history": "chat_history",
    "chat_summary": "chat_summary",
    "examples": "dialogue_examples",
    "current_scene_summary": "current_scene_summary",
    "recalled_scenes": "recalled_scenes",
}
TEXT_KINDS = ("main_prompt", "post_history")
# marker-expander.ts: the card fields a character marker without characterFields includes.
CHARACTER_FIELDS = ("description", "personality", "backstory", "appearance", "scenario", "system_prompt")
PARAMETERS = (
    ("temperature", "temperature"),
    ("topP", "top_p"),
    ("topK", "top_k"),
    ("minP", "min_p"),
    ("repetitionPenalty", "repetition_penalty"),
    ("frequencyPenalty", "frequency_penalty"),
    ("presencePenalty", "presence_penalty"),
    ("maxTokens", "max_tokens"),
)
OFF = {"topK": 0, "minP": 0, "repetitionPenalty": 1}
WHOLE = frozenset(("top_k", "max_tokens", "context_size"))


def is_marinara(doc: Mapping) -> bool:
    return doc.get("type") == TYPE


def read_marinara(doc: Mapping, known_markers: Collection[str], name: str | None = None) -> Preset:
    """The preset a Marinara preset export describes, with what Sugo does not map kept in `extra`
    for the export. `check_preset` is the caller's."""
    if doc.get("version") != 1:
        raise PresetError(f"This Marinara preset is version {doc.get('version')!r}; Sugo reads version 1.")
    data = doc.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("preset"), dict):
        raise PresetError("The Marinara file has no preset in its data.")
    row = data["preset"]
    params_raw = _decoded(row.get("parameters"), dict, "The preset's parameters field") or {}
    groups = _rows(data.get("groups"), "groups")
    disabled_groups = {g.get("id") for g in groups if not flag(g.get("enabled"))}
    raw_sections = _rows(data.get("sections"), "sections")
    seen: set[str] = set()
    built = [_parts(raw, n, known_markers, disabled_groups, seen) for n, raw in enumerate(raw_sections, 1)]
    by_row = {raw.get("id"): i for i, raw in enumerate(raw_sections) if isinstance(raw.get("id"), str)}
    order = _decoded(row.get("sectionOrder"), list, "The preset's sectionOrder field") or []
    placed: list[int] = []
    for row_id in order:
        i = by_row.get(row_id) if isinstance(row_id, str) else None
        if i is not None and i not in placed:
            placed.append(i)
    sections = [s for i in placed for s in built[i]]
    for i, parts in enumerate(built):
        if i not in placed:
            sections += [replace(s, enabled=False, extra=_with(s.extra, unordered=True)) for s in parts]
    choice_rows = _rows(data.get("choiceBlocks"), "choiceBlocks")
    choices = [_choice(raw, n) for n, raw in enumerate(choice_rows, 1)]
    own_name = row.get("name")
    kept: dict[str, Any] = {"groups": groups, "array": [parts[0].id for parts in built]}
    preset = Preset(
        name=own_name if isinstance(own_name, str) and own_name.strip() else (name or "Imported preset"),
        description=row["description"] if isinstance(row.get("description"), str) else "",
        sections=tuple(sections),
        wrap=row["wrapFormat"] if isinstance(row.get("wrapFormat"), str) else "xml",
        choices=tuple(choices),
        parameters=_parameters(params_raw),
        prefill=params_raw["assistantPrefill"] if isinstance(params_raw.get("assistantPrefill"), str) else "",
        extra={KEY: kept},
    )
    # The memos, innermost first: an object's canonical form is built with the memos of those inside it.
    raw_of = {parts[0].id: raw for parts, raw in zip(built, raw_sections, strict=True)}
    partner = _partners(preset)
    preset = replace(
        preset,
        sections=tuple(
            replace(
                s,
                extra=_with(s.extra, memo=remember(raw_of[s.id], _section_row(s, partner.get(s.id)))),
            )
            if s.id in raw_of
            else s
            for s in preset.sections
        ),
        choices=tuple(
            replace(c, extra=_with(c.extra, memo=remember(raw, _choice_row(c))))
            for c, raw in zip(preset.choices, choice_rows, strict=True)
        ),
    )
    kept["parameters"] = remember(params_raw, _parameters_row(preset))
    preset = replace(preset, extra={KEY: dict(kept)})
    kept["preset"] = remember(row, _preset_row(preset, _sections_out(preset)))
    preset = replace(preset, extra={KEY: dict(kept)})
    kept["data"] = remember(data, _data(preset))
    preset = replace(preset, extra={KEY: dict(kept)})
    kept["envelope"] = remember(doc, _envelope(preset, doc.get("exportedAt")))
    return replace(preset, extra={KEY: kept})


def write_marinara_preset(preset: Preset, exported_at: str) -> dict:
    """The preset as a Marinara preset export (`.marinara.json`): an imported file comes back with
    every field it had, the edits made in Sugo applied."""
    return restore(_envelope(preset, exported_at), _kept(preset).get("envelope"))


# ---- reading


def _rows(value: Any, what: str) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise PresetError(f"The Marinara preset's {what} are not a list of objects.")
    return value


def _decoded(value: Any, kind: type, what: str) -> Any:
    """A value Marinara may store as JSON text; None when missing."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise PresetError(f"{what} is not readable JSON.") from None
    if value is None:
        return None
    if not isinstance(value, kind):
        raise PresetError(f"{what} is not {'a list' if kind is list else 'an object'}.")
    return value


def _parts(
    raw: Mapping, position: int, known_markers: Collection[str], disabled_groups: set, seen: set[str]
) -> list[Section]:
    """The Sugo sections one Marinara section stands for: one, or two for a lorebook or a character
    marker that includes the scenario."""
    ident = raw.get("identifier")
    row_id = raw.get("id")
    sid = ident if isinstance(ident, str) and ident else row_id if isinstance(row_id, str) and row_id else ""
    name = raw["name"] if isinstance(raw.get("name"), str) else sid
    enabled = flag(raw.get("enabled")) and raw.get("groupId") not in disabled_groups
    at_depth = raw.get("injectionPosition") == "depth"
    depth = count(raw.get("injectionDepth"))
    if depth is None or (not at_depth and depth > MAX_DEPTH):
        depth = 0  # Marinara's own default; unused while ordered
    base = Section(
        id=_free(sid or f"section_{position}", seen),
        name=name,
        content=raw["content"] if isinstance(raw.get("content"), str) else "",
        role=raw["role"] if raw.get("role") in ROLES else "system",
        enabled=enabled,
        placement="depth" if at_depth else "ordered",
        depth=depth,
    )
    if not flag(raw.get("isMarker")):
        return [base]
    config = _decoded(raw.get("markerConfig"), dict, f"The markerConfig field of {name!r}") or {}
    kind = config.get("type")
    extra = {KEY: {"config": config}}
    if kind == "lorebook":
        return _split(replace(base, marker="lore_before_char", extra=extra), "constant_lore", "after", seen)
    if kind == "character":
        fields = config.get("characterFields")
        fields = fields if isinstance(fields, list) else CHARACTER_FIELDS
        others = any(f != "scenario" for f in fields)
        if "scenario" in fields and others:
            return _split(replace(base, marker="character", extra=extra), "scenario", "scenario", seen)
        alone = "character" if others or "scenario" not in fields else "scenario"
        return [replace(base, marker=alone, extra=extra)]
    if kind in MARKERS:
        return [replace(base, marker=MARKERS[kind], extra=extra)]
    if isinstance(kind, str) and kind in known_markers:
        return [replace(base, marker=kind, extra=extra)]
    raise PresetError(
        f"The section {name!r} is a Marinara marker of type {kind!r}, a part Sugo does not know: "
        "Sugo would have nothing to put in its place."
    )


def _split(first: Section, kind: str, suffix: str, seen: set[str]) -> list[Section]:
    second_id = _free(f"{first.id}~{suffix}", seen)
    return [first, replace(first, id=second_id, marker=kind, extra={KEY: {"part_of": first.id}})]


def _free(wanted: str, seen: set[str]) -> str:
    """`wanted`, or with a suffix if a section already has it (Sugo's ids are unique; two markers of
    one type share a Marinara identifier, which the memo writes back)."""
    while wanted in seen:
        wanted += "_"
    seen.add(wanted)
    return wanted


def _choice(raw: Mapping, position: int) -> Choice:
    variable = raw.get("variableName")
    options = _decoded(raw.get("options"), list, f"The options field of choice {position}") or []
    return Choice(
        variable=variable if isinstance(variable, str) else "",
        question=raw["question"] if isinstance(raw.get("question"), str) else "",
        options=tuple(_option(o, n) for n, o in enumerate(options, 1)),
        multi=flag(raw.get("multiSelect")),
        separator=raw["separator"] if isinstance(raw.get("separator"), str) else ", ",
    )


def _option(raw: Any, position: int) -> ChoiceOption:
    if not isinstance(raw, dict):
        raise PresetError(f"Option {position} of a choice is not an object.")
    value = raw["value"] if isinstance(raw.get("value"), str) else ""
    return ChoiceOption(
        id=raw["id"] if isinstance(raw.get("id"), str) else f"option_{position}",
        label=raw["label"] if isinstance(raw.get("label"), str) else value,
        value=value,
    )


def _parameters(raw: Mapping) -> Parameters:
    values: dict[str, Any] = {}
    for key, attr in PARAMETERS:
        value = count(raw.get(key)) if attr in WHOLE else number(raw.get(key))
        values[attr] = None if key in OFF and value == OFF[key] else value
    values["context_size"] = None if flag(raw.get("useMaxContext")) else count(raw.get("maxContext"))
    return Parameters(**values)


def _with(extra: Mapping, **values: Any) -> dict:
    return {**extra, KEY: {**extra.get(KEY, {}), **values}}


def _kept(item: Preset | Section | Choice) -> Mapping:
    return item.extra.get(KEY, {})


# ---- writing (the canonical rows; `restore` lays them over the file's shape)


def _envelope(preset: Preset, exported_at: Any) -> dict:
    data = restore(_data(preset), _kept(preset).get("data"))
    return {"type": TYPE, "version": 1, "exportedAt": exported_at, "data": data}


def _data(preset: Preset) -> dict:
    kept = _kept(preset)
    sections = _sections_out(preset)
    row = restore(_preset_row(preset, sections), kept.get("preset"), _fresh_preset(preset, sections))
    rank = {sid: i for i, sid in enumerate(kept.get("array", ()))}
    in_file_order = sorted(sections, key=lambda item: rank.get(item[0].id, len(rank)))
    return {
        "preset": row,
        "sections": [out for _, _, out in in_file_order],
        "groups": _groups_out(preset, sections),
        "choiceBlocks": [
            restore(_choice_row(c), _kept(c).get("memo"), _fresh_choice(c)) for c in preset.choices
        ],
    }


def _preset_row(preset: Preset, sections: list[tuple[Section, dict, dict]]) -> dict:
    return {
        "name": preset.name,
        "description": preset.description,
        "sectionOrder": [
            out["id"] for s, row, out in sections if row["enabled"] or not _kept(s).get("unordered")
        ],
        "parameters": restore(_parameters_row(preset), _kept(preset).get("parameters")),
        "wrapFormat": preset.wrap,
    }


def _fresh_preset(preset: Preset, sections: list[tuple[Section, dict, dict]]) -> dict:
    row = _preset_row(preset, sections)
    return {
        "name": row["name"],
        "description": row["description"],
        "sectionOrder": row["sectionOrder"],
        "groupOrder": [],
        "variableGroups": [],
        "variableValues": {},
        "parameters": row["parameters"],
        "wrapFormat": row["wrapFormat"],
        "defaultChoices": {},
        "isDefault": False,
        "author": "",
    }


def _parameters_row(preset: Preset) -> dict:
    params = preset.parameters
    out: dict[str, Any] = {}
    for key, attr in PARAMETERS:
        value = getattr(params, attr)
        if value is not None:
            out[key] = value
    if params.context_size is not None:
        out["maxContext"] = params.context_size
    out["useMaxContext"] = params.context_size is None
    out["assistantPrefill"] = preset.prefill
    return out


def _partners(preset: Preset) -> dict[str, Section]:
    """The second half of each split marker, by its first half's id."""
    firsts = {s.id for s in preset.sections}
    partner: dict[str, Section] = {}
    for s in preset.sections:
        owner = _kept(s).get("part_of")
        if owner in firsts and owner not in partner:
            partner[owner] = s
    return partner


def _sections_out(preset: Preset) -> list[tuple[Section, dict, dict]]:
    """Each exported section with its canonical row and the row to write, in Sugo's order; the
    second half of a split marker is folded into the first."""
    partner = _partners(preset)
    folded = {p.id for p in partner.values()}
    out = []
    for s in preset.sections:
        if s.id not in folded:
            row = _section_row(s, partner.get(s.id))
            out.append((s, row, restore(row, _kept(s).get("memo"), _fresh_section(row))))
    return out


def _section_row(section: Section, partner: Section | None) -> dict:
    """The canonical row of a section (with its folded second half)."""
    config = _marker_config(section, partner)
    return {
        "id": section.id,
        "identifier": section.id,
        "name": section.name,
        "content": section.content,
        "role": section.role,
        "enabled": section.enabled or (partner is not None and partner.enabled),
        "isMarker": config is not None,
        "markerConfig": config,
        "injectionPosition": section.placement,
        "injectionDepth": section.depth,
    }


def _fresh_section(row: dict) -> dict:
    return {
        **{k: row[k] for k in ("id", "identifier", "name", "content", "role", "enabled", "isMarker")},
        "groupId": None,
        "markerConfig": row["markerConfig"],
        "injectionPosition": row["injectionPosition"],
        "injectionDepth": row["injectionDepth"],
        "injectionOrder": 100,
        "forbidOverrides": False,
    }


def _marker_config(section: Section, partner: Section | None) -> dict | None:
    """The section's markerConfig: the file's, with the type (and the character's fields) Sugo's
    sections now say; None for a text section."""
    kind = section.marker
    if kind is None or kind in TEXT_KINDS:
        return None
    base = copy.deepcopy(dict(_kept(section).get("config") or {}))
    both = partner is None or partner.enabled == section.enabled
    if kind == "lore_before_char" and partner is not None:
        return _config(
            base, "lorebook" if both else "world_info_before" if section.enabled else "world_info_after"
        )
    if kind == "character":
        fields = base.get("characterFields")
        fields = list(fields) if isinstance(fields, list) else list(CHARACTER_FIELDS)
        if partner is not None and both:
            return _config(base, "character")
        if partner is not None and not section.enabled:
            return _config(base, "character", ["scenario"])
        return _config(base, "character", [f for f in fields if f != "scenario"])
    if kind == "scenario":
        return _config(base, "character", ["scenario"])
    return _config(base, TYPES.get(kind, kind))


def _config(base: dict, kind: str, fields: list[str] | None = None) -> dict:
    out = {"type": kind} if "type" not in base else {}
    for key, value in base.items():
        out[key] = kind if key == "type" else value
    if fields is not None:
        out["characterFields"] = fields
    return out


def _groups_out(preset: Preset, sections: list[tuple[Section, dict, dict]]) -> list[dict]:
    """The kept groups; a disabled group with a section Sugo enabled is enabled, and its members
    then carry Sugo's own flags."""
    groups = copy.deepcopy(_kept(preset).get("groups", []))
    for group in groups:
        members = [(row, out) for _, row, out in sections if out.get("groupId") == group.get("id")]
        if flag(group.get("enabled")) or not any(row["enabled"] for row, _ in members):
            continue
        group["enabled"] = _spelled(True, group.get("enabled"))
        for row, out in members:
            out["enabled"] = _spelled(row["enabled"], out.get("enabled"))
    return groups


def _spelled(value: bool, like: Any) -> bool | str:
    """A boolean spelled as the file spelled the one it replaces."""
    return ("true" if value else "false") if isinstance(like, str) else value


def _choice_row(choice: Choice) -> dict:
    return {
        "variableName": choice.variable,
        "question": choice.question,
        "options": [{"id": o.id, "label": o.label, "value": o.value} for o in choice.options],
        "multiSelect": choice.multi,
        "separator": choice.separator,
    }


def _fresh_choice(choice: Choice) -> dict:
    return {"id": f"choice_{choice.variable}", **_choice_row(choice), "randomPick": False}

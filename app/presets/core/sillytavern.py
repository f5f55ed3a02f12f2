"""SillyTavern's Chat Completion preset (its Prompt Manager) read into a Sugo preset, and written back.

Decisions (SillyTavern's behaviour: public/scripts/PromptManager.js and openai.js):
- The order is the prompt_order list of character_id 100001: the Chat Completion Prompt Manager runs
  with promptOrder {strategy: "global", dummyId: 100001}; a 100000 list is the base class's default,
  left over in files. A file without a 100001 list uses its longest list (SillyTavern would fall back
  to its default order, but the longest list is more likely what the author arranged); a file
  without prompt_order uses SillyTavern's default order (promptManagerDefaultPromptOrder).
- A prompt missing from the order is not sent (SillyTavern offers it under "append"): it is imported
  disabled after the ordered ones, and stays out of prompt_order on export until it is enabled. An
  order entry naming no prompt is dropped, as SillyTavern drops it when it loads the preset.
- main and jailbreak are markers whose content replaces Sugo's main prompt and post-history
  instructions (a card's own still wins; SillyTavern's forbid_overrides is kept, not applied). nsfw,
  enhanceDefinitions and custom prompts are text sections; injection_position 1 ("in-chat @ depth")
  places one at its injection_depth.
- charDescription and charPersonality both stand for Sugo's character block, which holds both (the
  builder places it at the first enabled one). SillyTavern's extension markers go to the Sugo part
  doing the same job: summary (the Summarize extension's rolling summary) → older_short_term_memory,
  where Sugo's Chat Summary goes (chat_memory is Sugo's rule-made summary, off by default);
  authorsNote → context_note (Sugo's Author's Note); vectorsMemory → recalled_memories;
  vectorsDataBank → retrieved_documents. Any other marker is refused: Sugo could not fill it.
- Samplers: top_k 0, min_p 0 and repetition_penalty 1 are SillyTavern's "off" and become None (leave
  the connection's value, so a provider that does not know the parameter is not sent it). Other
  values are kept as written, neutral ones included (temperature 1, top_p 1, penalties 0): every
  OpenAI-compatible API accepts them and the author chose them.
- The preset's name is the file's "name" if it has one (SillyTavern's own files do not), else the
  file name the caller passes.
- On export, Sugo's markers SillyTavern lacks become marker prompts with a "sugo_marker" key
  (SillyTavern keeps unknown keys and sends nothing for a marker it does not know), so a trip through
  SillyTavern keeps them. The description, wrap and choices have no place in SillyTavern's preset.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from app.presets.core.model import (
    MAX_DEPTH,
    ROLES,
    Parameters,
    Preset,
    PresetError,
    Section,
)
from app.presets.core.roundtrip import count, number, remember, restore

KEY = "sillytavern"  # the preset's, sections' and choices' `extra` key for what this format keeps
GLOBAL_LIST = 100001
DEFAULT_DEPTH = 4
# Sugo marker → SillyTavern identifiers that stand for it, the first preferred on export.
ST_IDS: dict[str, tuple[str, ...]] = {
    "main_prompt": ("main",),
    "post_history": ("jailbreak",),
    "chat_history": ("chatHistory",),
    "examples": ("dialogueExamples",),
    "lore_before_char": ("worldInfoBefore",),
    "constant_lore": ("worldInfoAfter",),
    "character": ("charDescription", "charPersonality"),
    "scenario": ("scenario",),
    "persona": ("personaDescription",),
    "older_short_term_memory": ("summary",),
    "context_note": ("authorsNote",),
    "recalled_memories": ("vectorsMemory",),
    "retrieved_documents": ("vectorsDataBank",),
}
ST_PARTS: dict[str, str] = {ident: kind for kind, idents in ST_IDS.items() for ident in idents}
# Markers whose content is text SillyTavern sends (its main prompt, its post-history instructions).
TEXT_KINDS = ("main_prompt", "post_history")
# SillyTavern's built-in prompts (system_prompt: true, not deletable).
ST_SYSTEM = frozenset(
    ("main", "nsfw", "jailbreak", "enhanceDefinitions", "dialogueExamples", "chatHistory", "worldInfoAfter",
     "worldInfoBefore", "charDescription", "charPersonality", "scenario", "personaDescription")
)  # fmt: skip # a table: SillyTavern's identifiers, several to a line
DEFAULT_ORDER = (
    ("main", True), ("worldInfoBefore", True), ("personaDescription", True), ("charDescription", True),
    ("charPersonality", True), ("scenario", True), ("enhanceDefinitions", False), ("nsfw", True),
    ("worldInfoAfter", True), ("dialogueExamples", True), ("chatHistory", True), ("jailbreak", True),
)  # fmt: skip # a table: SillyTavern's default order, four to a line
PARAMETERS = (
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("top_k", "top_k"),
    ("min_p", "min_p"),
    ("repetition_penalty", "repetition_penalty"),
    ("frequency_penalty", "frequency_penalty"),
    ("presence_penalty", "presence_penalty"),
    ("openai_max_tokens", "max_tokens"),
    ("openai_max_context", "context_size"),
)
OFF = {"top_k": 0, "min_p": 0, "repetition_penalty": 1}
WHOLE = frozenset(("top_k", "max_tokens", "context_size"))


def is_sillytavern(doc: Mapping) -> bool:
    return "prompts" in doc or "prompt_order" in doc


def read_sillytavern(doc: Mapping, known_markers: Collection[str], name: str | None = None) -> Preset:
    """The preset a SillyTavern Chat Completion preset describes, with what Sugo does not map kept in
    `extra` for the export. `check_preset` is the caller's."""
    prompts = doc.get("prompts", [])
    if not isinstance(prompts, list):
        raise PresetError("The preset's prompts are not a list.")
    parsed: dict[str, tuple[Section, dict]] = {}
    for position, raw in enumerate(prompts, 1):
        if not isinstance(raw, dict):
            raise PresetError(f"Prompt {position} of the preset is not an object.")
        section = _section(raw, position, known_markers)
        if section.id in parsed:
            raise PresetError(f"Two prompts have the identifier {section.id!r}.")
        parsed[section.id] = (section, raw)
    lists, chosen = _order_lists(doc.get("prompt_order"))
    if chosen is None:
        order: list = [{"identifier": ident, "enabled": on} for ident, on in DEFAULT_ORDER]
    else:
        order = lists[chosen]["order"]
        lists[chosen] = {k: (None if k == "order" else v) for k, v in lists[chosen].items()}
    sections: list[Section] = []
    for entry in order:
        ident = entry.get("identifier") if isinstance(entry, dict) else None
        if ident in parsed and all(s.id != ident for s in sections):
            sections.append(replace(parsed[ident][0], enabled=entry.get("enabled") is True))
    placed = {s.id for s in sections}
    for ident, (section, _) in parsed.items():
        if ident not in placed:
            sections.append(replace(section, enabled=False, extra={KEY: {"unordered": True}}))
    own_name = doc.get("name")
    kept = {"prompts": list(parsed), "prompt_order": lists, "chosen": chosen}
    preset = Preset(
        name=own_name if isinstance(own_name, str) and own_name.strip() else (name or "Imported preset"),
        sections=tuple(sections),
        parameters=_parameters(doc),
        prefill=doc["assistant_prefill"] if isinstance(doc.get("assistant_prefill"), str) else "",
        extra={KEY: kept},
    )
    ids = _identifiers(preset.sections)
    preset = replace(
        preset,
        sections=tuple(
            _keep(s, "memo", remember(parsed[s.id][1], _prompt(s, ids[s.id]))) for s in preset.sections
        ),
    )
    return replace(preset, extra={KEY: {**kept, "memo": remember(doc, _document(preset))}})


def write_sillytavern_preset(preset: Preset) -> dict:
    """The preset as a SillyTavern Chat Completion preset: an imported file comes back with every
    field it had, the edits made in Sugo applied."""
    return restore(_document(preset), preset.extra.get(KEY, {}).get("memo"))


def _section(raw: Mapping, position: int, known_markers: Collection[str]) -> Section:
    ident = raw.get("identifier")
    sid = ident if isinstance(ident, str) and ident else f"prompt_{position}"
    name = raw["name"] if isinstance(raw.get("name"), str) else sid
    kind = _kind(raw, sid, name, known_markers)
    if kind is not None and kind not in TEXT_KINDS:
        return Section(id=sid, name=name, marker=kind, enabled=False)
    at_depth = raw.get("injection_position") == 1
    depth = count(raw.get("injection_depth"))
    if depth is None or (not at_depth and depth > MAX_DEPTH):
        depth = DEFAULT_DEPTH  # unused while ordered; the memo gives the file's value back
    return Section(
        id=sid,
        name=name,
        marker=kind,
        content=raw["content"] if isinstance(raw.get("content"), str) else "",
        role=raw["role"] if raw.get("role") in ROLES else "system",
        enabled=False,
        placement="depth" if at_depth else "ordered",
        depth=depth,
    )


def _kind(raw: Mapping, sid: str, name: str, known_markers: Collection[str]) -> str | None:
    sugo = raw.get("sugo_marker")
    if isinstance(sugo, str) and sugo:
        return sugo  # written by Sugo; check_preset says if this Sugo does not know it
    if sid in ST_PARTS:
        return ST_PARTS[sid]
    if raw.get("marker") is True:
        raise PresetError(
            f"The prompt {name!r} is a SillyTavern marker ({sid}) for a part Sugo does not know: "
            "Sugo would have nothing to put in its place."
        )
    return None


def _order_lists(value: Any) -> tuple[list, int | None]:
    """The prompt_order lists (copied) and the index of the one SillyTavern uses; None: no usable list."""
    if value is None:
        return [], None
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise PresetError("The preset's prompt_order is not a list of prompt lists.")
    lists = copy.deepcopy(value)
    usable = [i for i, item in enumerate(lists) if isinstance(item.get("order"), list)]
    for i in usable:
        if str(lists[i].get("character_id")) == str(GLOBAL_LIST):
            return lists, i
    if not usable:
        return lists, None
    return lists, max(usable, key=lambda i: (len(lists[i]["order"]), -i))


def _parameters(doc: Mapping) -> Parameters:
    values: dict[str, Any] = {}
    for key, attr in PARAMETERS:
        value = count(doc.get(key)) if attr in WHOLE else number(doc.get(key))
        values[attr] = None if key in OFF and value == OFF[key] else value
    return Parameters(**values)


def _keep(section: Section, name: str, value: Any) -> Section:
    own = dict(section.extra.get(KEY, {}))
    own[name] = value
    return replace(section, extra={**section.extra, KEY: own})


def _identifiers(sections: tuple[Section, ...]) -> dict[str, str]:
    """Each section's SillyTavern identifier: its own where it already means the same part, else the
    first free identifier of its marker, else its Sugo id (prefixed if it would mean another part)."""
    ids: dict[str, str] = {}
    for s in sections:
        if (ST_PARTS.get(s.id) == s.marker) if s.marker is not None else s.id not in ST_PARTS:
            ids[s.id] = s.id
    taken = set(ids.values())
    for s in sections:
        if s.id in ids:
            continue
        free = [c for c in ST_IDS.get(s.marker or "", ()) if c not in taken]
        ident = free[0] if free else (s.id if s.id not in ST_PARTS else f"sugo_{s.id}")
        while ident in taken:
            ident += "_"
        ids[s.id] = ident
        taken.add(ident)
    return ids


def _prompt(section: Section, ident: str) -> dict:
    """The canonical prompt entry of a section."""
    out: dict[str, Any] = {"identifier": ident, "name": section.name, "system_prompt": ident in ST_SYSTEM}
    kind = section.marker
    if kind is not None and kind not in TEXT_KINDS:
        out["marker"] = True
        if ST_PARTS.get(ident) != kind:
            out["sugo_marker"] = kind
        return out
    out["role"] = section.role
    out["content"] = section.content
    if kind is not None and ST_PARTS.get(ident) != kind:
        out["sugo_marker"] = kind
    out["injection_position"] = 1 if section.placement == "depth" else 0
    out["injection_depth"] = section.depth
    return out


def _document(preset: Preset) -> dict:
    """The canonical preset file: the samplers Sugo sets, the prompts and their order, the prefill."""
    kept = preset.extra.get(KEY, {})
    out: dict[str, Any] = {}
    for key, attr in PARAMETERS:
        value = getattr(preset.parameters, attr)
        if value is not None:
            out[key] = value
    ids = _identifiers(preset.sections)
    rank = {sid: i for i, sid in enumerate(kept.get("prompts", ()))}
    in_file_order = sorted(preset.sections, key=lambda s: rank.get(s.id, len(rank)))
    out["prompts"] = [restore(_prompt(s, ids[s.id]), s.extra.get(KEY, {}).get("memo")) for s in in_file_order]
    order = [
        {"identifier": ids[s.id], "enabled": s.enabled}
        for s in preset.sections
        if s.enabled or not s.extra.get(KEY, {}).get("unordered")
    ]
    lists = copy.deepcopy(kept.get("prompt_order", []))
    chosen = kept.get("chosen")
    if chosen is None:
        lists.append({"character_id": GLOBAL_LIST, "order": order})
    else:
        lists[chosen] = {k: (order if k == "order" else v) for k, v in lists[chosen].items()}
    out["prompt_order"] = lists
    out["assistant_prefill"] = preset.prefill
    return out

"""Preset files: SillyTavern's Default Chat Completion preset and Marinara's default preset import with
their order, markers, flags, choices and parameters, and export back to the same JSON, unknown fields
included; edits made in Sugo show in the export; bad files are refused with a reason.

tests/fixtures/presets/marinara_universal.marinara.json is Marinara's Universal Preset reconstructed
from our notes (shared/reference/marinara.md §6), not copied from Marinara (see the folder's README);
sillytavern_Default.json is SillyTavern's own file, unchanged.
"""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from app.presets.core.formats import (
    MAX_FILE_BYTES,
    read_preset_file,
    write_marinara_preset,
    write_sillytavern_preset,
    write_sugo_preset,
)
from app.presets.core.model import Choice, ChoiceOption, Parameters, Preset, PresetError, Section
from app.prompt.core.layout import LAYOUT

FIXTURES = Path(__file__).parent.parent / "fixtures" / "presets"
ST_RAW = (FIXTURES / "sillytavern_Default.json").read_bytes()
MARINARA_RAW = (FIXTURES / "marinara_universal.marinara.json").read_bytes()
KNOWN = {slot.kind for slot in LAYOUT if slot.kind != "message"} | {"chat_history"}


def st_doc() -> dict:
    return json.loads(ST_RAW)


def marinara_doc() -> dict:
    return json.loads(MARINARA_RAW)


def read(doc: dict | bytes, name: str | None = None) -> Preset:
    return read_preset_file(doc if isinstance(doc, bytes) else json.dumps(doc), KNOWN, name=name)


def section(preset: Preset, sid: str) -> Section:
    return next(s for s in preset.sections if s.id == sid)


def edit(preset: Preset, sid: str, **changes) -> Preset:
    return replace(
        preset, sections=tuple(replace(s, **changes) if s.id == sid else s for s in preset.sections)
    )


def st_order(doc: dict, character_id: int = 100001) -> list[tuple[str, bool]]:
    lists = [lst for lst in doc["prompt_order"] if lst["character_id"] == character_id]
    return [(e["identifier"], e["enabled"]) for e in lists[0]["order"]]


def st_prompt(doc: dict, ident: str) -> dict:
    return next(p for p in doc["prompts"] if p["identifier"] == ident)


def m_section(doc: dict, ident: str) -> dict:
    return next(s for s in doc["data"]["sections"] if s["identifier"] == ident)


# ---- SillyTavern


def test_sillytavern_default_imports_in_the_order_of_the_global_list():
    preset = read(ST_RAW, name="Default")
    assert preset.name == "Default"
    assert [(s.id, s.marker, s.enabled) for s in preset.sections] == [
        ("main", "main_prompt", True),
        ("worldInfoBefore", "lore_before_char", True),
        ("personaDescription", "persona", True),  # only in the 100001 list: that one is used
        ("charDescription", "character", True),
        ("charPersonality", "character", True),
        ("scenario", "scenario", True),
        ("enhanceDefinitions", None, False),
        ("nsfw", None, True),
        ("worldInfoAfter", "constant_lore", True),
        ("dialogueExamples", "examples", True),
        ("chatHistory", "chat_history", True),
        ("jailbreak", "post_history", True),
    ]
    main = section(preset, "main")
    assert main.content == "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
    assert main.name == "Main Prompt" and main.role == "system" and main.placement == "ordered"
    assert section(preset, "enhanceDefinitions").content.startswith("If you have more knowledge of {{char}}")
    assert {s.role for s in preset.sections} == {"system"}
    assert preset.parameters == Parameters(
        temperature=1, top_p=1, frequency_penalty=0, presence_penalty=0, max_tokens=300, context_size=4095
    )  # top_k 0, min_p 0 and repetition_penalty 1 are SillyTavern's "off"
    assert preset.prefill == "" and preset.choices == () and preset.wrap == "none"


def test_sillytavern_default_round_trips_with_every_field_and_key_order():
    original = st_doc()
    out = write_sillytavern_preset(read(ST_RAW))
    assert out == original
    assert list(out) == list(original)
    assert [list(p) for p in out["prompts"]] == [list(p) for p in original["prompts"]]
    assert json.dumps(out) == json.dumps(original)  # 1 stays 1, 0.9 stays 0.9, false stays false


def test_sillytavern_edits_show_in_the_export_and_unknown_fields_stay():
    preset = read(ST_RAW)
    preset = edit(preset, "charPersonality", enabled=False)
    preset = edit(preset, "main", content="Be {{char}}.")
    nsfw = section(preset, "nsfw")
    rest = [s for s in preset.sections if s.id != "nsfw"]
    preset = replace(preset, sections=(nsfw, *rest), parameters=replace(preset.parameters, temperature=0.7))
    preset = replace(preset, prefill="Sure:")
    out = write_sillytavern_preset(preset)
    original = st_doc()
    assert st_order(out)[:2] == [("nsfw", True), ("main", True)]
    assert ("charPersonality", False) in st_order(out)
    assert st_order(out, 100000) == st_order(original, 100000)  # the other list is left alone
    assert st_prompt(out, "main") == {**st_prompt(original, "main"), "content": "Be {{char}}."}
    assert out["temperature"] == 0.7 and out["assistant_prefill"] == "Sure:"
    for key in ("openrouter_model", "bias_preset_selected", "show_external_models", "impersonation_prompt"):
        assert out[key] == original[key]
    assert list(out) == list(original)
    assert [p["identifier"] for p in out["prompts"]] == [p["identifier"] for p in original["prompts"]]


def test_sillytavern_sampler_set_back_to_unset_writes_the_files_off_value():
    preset = read(ST_RAW)
    tuned = replace(preset, parameters=replace(preset.parameters, top_k=40))
    assert write_sillytavern_preset(tuned)["top_k"] == 40
    assert write_sillytavern_preset(replace(tuned, parameters=preset.parameters))["top_k"] == 0


def test_sillytavern_custom_prompts_depth_unordered_and_extension_markers():
    doc = st_doc()
    doc["prompts"] += [
        {"identifier": "a1b2", "name": "Style", "role": "user", "content": "Be terse.", "system_prompt": False,
         "marker": False, "injection_position": 1, "injection_depth": 2, "forbid_overrides": False},
        {"identifier": "spare", "name": "Spare", "role": "system", "content": "Unused.", "system_prompt": False},
        {"identifier": "summary", "name": "Summary", "system_prompt": True, "marker": True},
        {"identifier": "authorsNote", "name": "Author's Note", "system_prompt": True, "marker": True},
        {"identifier": "vectorsMemory", "name": "Vectors", "system_prompt": True, "marker": True},
    ]  # fmt: skip
    for lst in doc["prompt_order"]:
        if lst["character_id"] == 100001:
            lst["order"] += [{"identifier": i, "enabled": True} for i in ("a1b2", "summary", "authorsNote")]
            lst["order"] += [{"identifier": "vectorsMemory", "enabled": False}]
    preset = read(doc)
    style = section(preset, "a1b2")
    assert (style.marker, style.role, style.placement, style.depth) == (None, "user", "depth", 2)
    assert [(s.id, s.marker, s.enabled) for s in preset.sections[-5:]] == [
        ("a1b2", None, True),
        ("summary", "older_short_term_memory", True),
        ("authorsNote", "context_note", True),
        ("vectorsMemory", "recalled_memories", False),
        ("spare", None, False),  # not in the order: SillyTavern does not send it
    ]
    assert write_sillytavern_preset(preset) == doc
    assert "spare" not in dict(st_order(write_sillytavern_preset(preset)))
    enabled = edit(preset, "spare", enabled=True)
    assert st_order(write_sillytavern_preset(enabled))[-1] == ("spare", True)


def test_sillytavern_without_prompt_order_uses_its_default_order():
    doc = st_doc()
    del doc["prompt_order"]
    preset = read(doc)
    assert [s.id for s in preset.sections][:3] == ["main", "worldInfoBefore", "personaDescription"]
    assert not section(preset, "enhanceDefinitions").enabled
    assert write_sillytavern_preset(preset) == doc


def test_sillytavern_takes_the_file_name_only_when_it_has_none():
    assert read(ST_RAW).name == "Imported preset"
    assert read({**st_doc(), "name": "Own"}, name="file").name == "Own"


# ---- Marinara


def test_marinara_universal_imports():
    preset = read(MARINARA_RAW, name="ignored")
    assert preset.name == "Marinara's Universal Preset"
    assert preset.description.startswith("A general-purpose roleplay preset")
    assert preset.wrap == "xml"
    assert [(s.id, s.name, s.marker) for s in preset.sections] == [
        ("section_role", "Role", None),
        ("lorebook", "Setting", "lore_before_char"),
        ("lorebook~after", "Setting", "constant_lore"),  # one lorebook marker: before and after
        ("character", "Characters", "character"),
        ("character~scenario", "Characters", "scenario"),  # Marinara's character marker has the scenario
        ("persona", "Persona", "persona"),
        ("chat_summary", "Past Events", "chat_summary"),
        ("section_instructions", "Instructions", None),
        ("dialogue_examples", "Dialogue Examples", "examples"),
        ("chat_history", "Chat History", "chat_history"),
        ("section_output", "Output Format", None),
    ]
    assert all(s.role == "system" and s.enabled and s.placement == "ordered" for s in preset.sections)
    assert "{{tense}}" in section(preset, "section_instructions").content
    assert [c.variable for c in preset.choices] == [
        "role", "guidelines", "narration", "pov", "tense", "length", "language"
    ]  # fmt: skip
    tense = preset.choices[4]
    assert tense == Choice(
        "tense",
        "Which tense?",
        (ChoiceOption("opt_tense_1", "Present", "present"), ChoiceOption("opt_tense_2", "Past", "past")),
        extra=tense.extra,
    )
    assert all(2 <= len(c.options) <= 4 and not c.multi for c in preset.choices)
    # topK/minP 0 are off; useMaxContext leaves the context size to the connection
    assert preset.parameters == Parameters(
        temperature=1, top_p=1, frequency_penalty=0, presence_penalty=0, max_tokens=8192
    )
    assert preset.prefill == ""


def test_marinara_universal_round_trips_with_envelope_and_unknown_fields():
    original = marinara_doc()
    out = write_marinara_preset(read(MARINARA_RAW), original["exportedAt"])
    assert out == original
    assert json.dumps(out) == json.dumps(original)
    assert out["data"]["exportNote"] == original["data"]["exportNote"]
    assert m_section(out, "section_instructions")["collapsed"] == "true"


def test_marinara_edits_show_in_the_export_in_the_files_spelling():
    preset = read(MARINARA_RAW)
    preset = edit(preset, "section_output", content="Prose only.")
    preset = edit(preset, "chat_summary", enabled=False)
    role = section(preset, "section_role")
    rest = [s for s in preset.sections if s.id != "section_role"]
    preset = replace(preset, sections=(*rest, role), prefill="Scene:")
    out = write_marinara_preset(preset, "2026-12-01T00:00:00.000Z")
    data = out["data"]
    assert out["exportedAt"] == "2026-12-01T00:00:00.000Z"
    assert m_section(out, "section_output")["content"] == "Prose only."
    assert m_section(out, "chat_summary")["enabled"] == "false"  # text, as the file wrote it
    order = json.loads(data["preset"]["sectionOrder"])
    assert order[0] == "sec_setting" and order[-1] == "sec_role"
    assert json.loads(data["preset"]["parameters"])["assistantPrefill"] == "Scene:"
    assert json.loads(data["preset"]["parameters"])["reasoningEffort"] == "maximum"
    assert data["exportNote"] == marinara_doc()["data"]["exportNote"]
    assert m_section(out, "section_instructions")["collapsed"] == "true"
    # the file's array order stays; only sectionOrder says the order
    assert [s["id"] for s in data["sections"]] == [s["id"] for s in marinara_doc()["data"]["sections"]]


def test_marinara_split_markers_fold_back_and_narrow_when_half_is_off():
    preset = read(MARINARA_RAW)
    out = write_marinara_preset(edit(preset, "lorebook~after", enabled=False), "t")
    assert json.loads(m_section(out, "lorebook")["markerConfig"]) == {"type": "world_info_before"}
    out = write_marinara_preset(edit(preset, "character~scenario", enabled=False), "t")
    config = json.loads(m_section(out, "character")["markerConfig"])
    assert config == {
        "type": "character",
        "characterFields": ["description", "personality", "backstory", "appearance", "system_prompt"],
    }
    assert len(out["data"]["sections"]) == 9


def test_marinara_disabled_group_and_unordered_sections():
    doc = marinara_doc()
    doc["data"]["groups"][0]["enabled"] = "false"
    order = json.loads(doc["data"]["preset"]["sectionOrder"])
    order.remove("sec_output")
    doc["data"]["preset"]["sectionOrder"] = json.dumps(order, separators=(",", ":"))
    preset = read(doc)
    off = [s.id for s in preset.sections if not s.enabled]
    assert off == [
        "lorebook",
        "lorebook~after",
        "character",
        "character~scenario",
        "persona",
        "section_output",
    ]
    assert preset.sections[-1].id == "section_output"
    assert write_marinara_preset(preset, doc["exportedAt"]) == doc
    out = write_marinara_preset(edit(preset, "persona", enabled=True), "t")
    assert out["data"]["groups"][0]["enabled"] == "true"
    assert m_section(out, "persona")["enabled"] == "true"
    assert m_section(out, "lorebook")["enabled"] == "false"  # Sugo has it off: it stays off in Marinara
    out = write_marinara_preset(edit(preset, "section_output", enabled=True), "t")
    assert json.loads(out["data"]["preset"]["sectionOrder"])[-1] == "sec_output"


def test_marinara_with_plain_json_values_round_trips_too():
    doc = marinara_doc()
    row = doc["data"]["preset"]
    for key in (
        "sectionOrder",
        "groupOrder",
        "variableGroups",
        "variableValues",
        "parameters",
        "defaultChoices",
    ):
        row[key] = json.loads(row[key])
    for s in doc["data"]["sections"]:
        s["enabled"], s["isMarker"] = True, s["isMarker"] == "true"
        s["markerConfig"] = json.loads(s["markerConfig"]) if s["markerConfig"] else None
    for c in doc["data"]["choiceBlocks"]:
        c["options"], c["multiSelect"] = json.loads(c["options"]), False
    preset = read(doc)
    assert [s.marker for s in preset.sections] == [s.marker for s in read(MARINARA_RAW).sections]
    assert write_marinara_preset(preset, doc["exportedAt"]) == doc
    out = write_marinara_preset(edit(preset, "persona", enabled=False), "t")
    assert m_section(out, "persona")["enabled"] is False


def test_marinara_markers_sharing_an_identifier_get_ids_of_their_own():
    doc = marinara_doc()
    twin = {**m_section(doc, "persona"), "id": "sec_persona_2", "name": "Persona again"}
    doc["data"]["sections"].append(twin)
    order = json.loads(doc["data"]["preset"]["sectionOrder"]) + ["sec_persona_2"]
    doc["data"]["preset"]["sectionOrder"] = json.dumps(order, separators=(",", ":"))
    preset = read(doc)
    assert [s.id for s in preset.sections if s.marker == "persona"] == ["persona", "persona_"]
    out = write_marinara_preset(preset, doc["exportedAt"])
    assert out == doc


def test_marinara_legacy_recalled_messages_is_recalled_scenes():
    doc = marinara_doc()
    doc["data"]["sections"][4]["markerConfig"] = json.dumps({"type": "recalled_messages"})
    preset = read(doc)
    assert section(preset, "chat_summary").marker == "recalled_scenes"
    assert write_marinara_preset(preset, doc["exportedAt"]) == doc


# ---- across formats and Sugo's own


def test_sugo_format_round_trips_everything():
    for raw in (ST_RAW, MARINARA_RAW):
        preset = read(raw)
        doc = write_sugo_preset(preset)
        assert doc["sugo_preset"] == 1
        assert read(json.loads(json.dumps(doc))) == preset
    made = Preset(
        "Mine",
        (Section("s1", "Hello", content="Hi {{mood}}", role="user", placement="depth", depth=2),
         Section("h", "History", marker="chat_history")),
        description="d",
        wrap="markdown",
        choices=(Choice("mood", "Mood?", (ChoiceOption("a", "Calm", "calm"),), multi=True, separator="; "),),
        parameters=Parameters(temperature=0.5, max_tokens=100),
        prefill="Ok",
    )  # fmt: skip
    assert read(write_sugo_preset(made)) == made


def test_exports_in_the_other_format_keep_the_markers():
    marinara = read(MARINARA_RAW)
    as_st = read(write_sillytavern_preset(marinara))
    assert [s.marker for s in as_st.sections] == [s.marker for s in marinara.sections]
    assert (
        as_st.sections[1].id == "worldInfoBefore" and section(as_st, "chat_summary").marker == "chat_summary"
    )
    st = read(ST_RAW)
    as_marinara = read(write_marinara_preset(st, "t"))
    text = ("main_prompt", "post_history")  # Marinara has no such markers: plain sections with the text
    assert [s.marker for s in as_marinara.sections] == [
        None if s.marker in text else s.marker for s in st.sections
    ]
    assert section(as_marinara, "main").content == section(st, "main").content


# ---- refused files


def too_many_sections() -> str:
    doc = st_doc()
    doc["prompts"] = [
        {"identifier": f"p{i}", "name": f"P{i}", "role": "system", "content": "x"} for i in range(201)
    ]
    doc["prompt_order"] = [
        {"character_id": 100001, "order": [{"identifier": f"p{i}", "enabled": True} for i in range(201)]}
    ]
    return json.dumps(doc)


def long_prompt() -> str:
    doc = st_doc()
    st_prompt(doc, "main")["content"] = "x" * 100_001
    return json.dumps(doc)


def unknown_st_marker() -> str:
    doc = st_doc()
    doc["prompts"].append({"identifier": "smartContext", "name": "Smart Context", "marker": True})
    return json.dumps(doc)


def choice_cycle() -> str:
    doc = marinara_doc()
    blocks = doc["data"]["choiceBlocks"]
    blocks[3]["options"] = json.dumps([{"id": "a", "label": "A", "value": "seen by {{tense}}"}])
    blocks[4]["options"] = json.dumps([{"id": "b", "label": "B", "value": "as in {{pov}}"}])
    return json.dumps(doc)


def agent_marker() -> str:
    doc = marinara_doc()
    doc["data"]["sections"][4]["markerConfig"] = json.dumps(
        {"type": "agent_data", "agentType": "world-state"}
    )
    return json.dumps(doc)


def oversized() -> bytes:
    doc = st_doc()
    doc["padding"] = "x" * MAX_FILE_BYTES
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "raw, words",
    [
        (b"not json at all", ["not JSON", "line 1"]),
        (b"\xff\xfe{}", ["not JSON", "UTF-8"]),
        (b'[{"prompts": []}]', ["JSON list", "not a preset"]),
        (b'{"temp": 0.7, "rep_pen": 1.1}', ["Text Completion"]),
        (b'{"hello": "world"}', ["not a preset Sugo knows"]),
        (b'{"type": "marinara_lorebook", "version": 1, "data": {}}', ["marinara_lorebook", "not a prompt preset"]),
        (unknown_st_marker(), ["Smart Context", "smartContext", "marker", "Sugo does not know"]),
        (too_many_sections(), ["201 sections", "at most 200"]),
        (long_prompt(), ["Main Prompt", "100,001 characters", "at most 100,000"]),
        (choice_cycle(), ["choices refer to each other", "pov", "tense"]),
        (agent_marker(), ["Past Events", "agent_data", "Sugo does not know"]),
        (oversized(), ["MB", "at most 5 MB"]),
    ],
    ids=[
        "not-json", "not-utf8", "json-array", "text-completion", "unknown-shape", "other-marinara-type",
        "st-unknown-marker", "201-sections", "long-prompt", "choice-cycle", "marinara-agent-marker", "too-big",
    ],
)  # fmt: skip
def test_refused_files_say_why(raw, words):
    with pytest.raises(PresetError) as caught:
        read_preset_file(raw, KNOWN)
    for word in words:
        assert word in str(caught.value)


def test_a_checked_import_does_not_share_state_with_its_export():
    preset = read(MARINARA_RAW)
    out = write_marinara_preset(preset, "t")
    out["data"]["exportNote"] = "changed"
    out["data"]["groups"][0]["name"] = "changed"
    assert write_marinara_preset(preset, "t")["data"]["exportNote"] == marinara_doc()["data"]["exportNote"]
    assert write_marinara_preset(preset, "t")["data"]["groups"][0]["name"] == "Lore"

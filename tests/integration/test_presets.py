"""Presets over real HTTP (issue 28): made and edited on the Presets page, picked in Chat Settings, and
the exact request they produce at the test model server."""

import html
import json
from pathlib import Path

import pytest

from tests.conftest import add_character, add_connection, new_chat, read_sse

HX = {"HX-Request": "true"}
FIXTURES = Path(__file__).parent.parent / "fixtures"


def _chat(api, models, **card):
    api.post("/api/personas", json={"name": "Rowan", "description": "A tired knight."})
    add_connection(api, models)
    char = add_character(api, scenario="A tavern at dusk.", **card)
    return new_chat(api, [char["id"]])


def _send(api, models, chat_id, text="Hello?", reply="*Aria nods.*"):
    models.script(reply)
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": text})
    assert r.status_code == 200, r.text
    read_sse(r)
    return models.last_request.json


def _new_preset(api) -> int:
    r = api.post("/presets", headers=HX)
    assert r.status_code == 204, r.text
    return int(r.headers["HX-Redirect"].rsplit("/", 1)[1])


def _use(api, chat_id, preset_id, **picks):
    form = {"name": "Tavern", "recent_message_limit": "80", "preset_id": str(preset_id or "")}
    form.update({f"pick_{k}": v for k, v in picks.items()})
    r = api.post(f"/chats/{chat_id}/settings", data=form, headers=HX)
    assert r.status_code == 200, r.text
    return r


def _section(sid, name, marker="", content="", role="system", placement="ordered", depth=4, enabled=True):
    return {
        "section_id": sid,
        "section_name": name,
        "section_marker": marker,
        "section_content": content,
        "section_role": role,
        "section_placement": placement,
        "section_depth": str(depth),
        "section_enabled": "1" if enabled else "0",
    }


def _preset_form(name, sections, **fields):
    """The editor's form as the page sends it: one value per section and field, in the page's order."""
    form: dict[str, list[str]] = {"name": [name], "description": [""], "wrap": [fields.pop("wrap", "none")]}
    form["prefill"] = [fields.pop("prefill", "")]
    for section in sections:
        for key, value in section.items():
            form.setdefault(key, []).append(value)
    for key, value in fields.items():
        form[key] = value if isinstance(value, list) else [value]
    return form


def test_a_new_preset_is_sugos_default_and_sends_what_no_preset_sends(api, models):
    chat = _chat(api, models, personality="warm", mes_example="<START>\n{{user}}: Hi\n{{char}}: Hey")
    without = _send(api, models, chat["id"])
    preset_id = _new_preset(api)
    page = api.get(f"/presets/{preset_id}")
    assert page.status_code == 200 and "Recalled memories" in page.text and "Chat Summary" in page.text
    _use(api, chat["id"], preset_id)
    # The same turn asked again (a swipe of the reply sends the same history), with the preset.
    last = api.get(f"/api/chats/{chat['id']}/messages").json()[-1]
    models.script("*Aria nods again.*")
    read_sse(
        api.post(f"/api/chats/{chat['id']}/generate", json={"action": "swipe", "message_id": last["id"]})
    )
    # Byte for byte, key order included, as the request was parsed.
    assert json.dumps(models.last_request.json) == json.dumps(without)


def test_a_presets_order_wraps_roles_choices_and_parameters_make_the_request(api, models):
    chat = _chat(api, models)
    preset_id = _new_preset(api)
    sections = [
        _section("role", "Role", content="Narrate in {{pov}}."),
        _section("character", "Characters", marker="character"),
        _section("persona", "Persona", marker="persona"),
        _section("", "Ask", content="Stay close to {{char}}.", role="user"),
        _section("chat_history", "Chat history", marker="chat_history"),
        _section("format", "Output Format", content="End on an action.", placement="depth", depth=0),
        _section("scenario", "Scenario", marker="scenario", enabled=False),
    ]
    form = _preset_form(
        "Close",
        sections,
        wrap="xml",
        temperature="0.3",
        top_k="40",
        choice_key=["c0"],
        choice_variable=["pov"],
        choice_question=["Point of view?"],
        choice_separator=[", "],
        choice_multi=["0"],
        option_id_c0=["second", "third"],
        option_label_c0=["Second", "Third"],
        option_value_c0=["second person", "third person"],
    )
    r = api.post(f"/presets/{preset_id}", data=form, headers=HX)
    assert r.status_code == 200 and "Saved." in r.text, r.text
    _use(api, chat["id"], preset_id, pov="third")
    body = _send(api, models, chat["id"])
    assert body["temperature"] == 0.3 and body["top_k"] == 40
    assert body["messages"] == [
        {
            "role": "system",
            "content": "<role>\nNarrate in third person.\n</role>\n\n"
            "<characters>\nAria is a wandering bard.\n</characters>\n\n"
            "<persona>\nAbout Rowan: A tired knight.\n</persona>",
        },
        {"role": "user", "content": "<ask>\nStay close to Aria.\n</ask>"},
        {"role": "assistant", "content": "*Aria waves.* Hello, Rowan!"},
        {"role": "user", "content": "Hello?"},
        {"role": "system", "content": "<output_format>\nEnd on an action.\n</output_format>"},
    ]
    # The chat's own temperature wins over the preset's.
    r = api.post(
        f"/chats/{chat['id']}/settings",
        data={
            "name": "Tavern",
            "recent_message_limit": "80",
            "preset_id": str(preset_id),
            "temperature": "0.9",
        },
        headers=HX,
    )
    assert r.status_code == 200
    assert _send(api, models, chat["id"], "And?")["temperature"] == 0.9


def test_chat_settings_show_the_presets_choices_and_keep_the_pick(api, models):
    chat = _chat(api, models)
    preset_id = _new_preset(api)
    form = _preset_form(
        "Picks",
        [
            _section("chat_history", "Chat history", marker="chat_history"),
            _section("t", "Tense", content="{{tense}}"),
        ],
        choice_key=["c0"],
        choice_variable=["tense"],
        choice_question=["Tense?"],
        choice_separator=[", "],
        choice_multi=["0"],
        option_id_c0=["past", "present"],
        option_label_c0=["Past", "Present"],
        option_value_c0=["Write in past tense.", "Write in present tense."],
    )
    assert api.post(f"/presets/{preset_id}", data=form, headers=HX).status_code == 200
    fragment = api.get(f"/chats/{chat['id']}/settings/preset-choices", params={"preset_id": preset_id})
    assert 'name="pick_tense" value="past" checked' in fragment.text and "Tense?" in fragment.text
    # No pick: the first option.
    _use(api, chat["id"], preset_id)
    assert _send(api, models, chat["id"])["messages"][-1]["content"] == "Write in past tense."
    page = _use(api, chat["id"], preset_id, tense="present")
    assert 'value="present" checked' in page.text
    assert _send(api, models, chat["id"], "Go on.")["messages"][-1]["content"] == "Write in present tense."


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"section_content": ["x" * 100_001]}, "100,001 characters long"),
        ({"section_marker": ["moon_phase"]}, "which Sugo does not know"),
        ({"section_placement": ["sideways"]}, None),  # an unknown place reads as "in the list"
        ({"name": [" "]}, "The preset's name is empty"),
    ],
)
def test_a_refused_preset_is_said_why_and_the_stored_one_is_unchanged(api, models, change, words):
    preset_id = _new_preset(api)
    before = api.get(f"/presets/{preset_id}/export", params={"format": "sugo"}).content
    form = _preset_form("Broken", [_section("only", "Only", content="Hi")])
    form.update(change)
    r = api.post(f"/presets/{preset_id}", data=form, headers=HX)
    if words is None:
        assert r.status_code == 200
        return
    assert r.status_code == 400 and words in html.unescape(r.text), r.text
    assert api.get(f"/presets/{preset_id}/export", params={"format": "sugo"}).content == before


def test_a_deleted_preset_leaves_its_chats_on_the_default(api, models):
    chat = _chat(api, models)
    preset_id = _new_preset(api)
    form = _preset_form("Short", [_section("chat_history", "History", marker="chat_history")])
    api.post(f"/presets/{preset_id}", data=form, headers=HX)
    _use(api, chat["id"], preset_id)
    # A preset without a main prompt section leaves Sugo's out; the parts it does not name still come.
    first = _send(api, models, chat["id"])["messages"][0]["content"]
    assert "next reply" not in first and "Aria is a wandering bard." in first
    assert api.post(f"/presets/{preset_id}/delete", headers=HX).status_code == 204
    assert "Write Aria's next reply" in _send(api, models, chat["id"], "Again.")["messages"][0]["content"]
    assert api.get(f"/presets/{preset_id}").status_code == 404


@pytest.mark.parametrize(
    ("fixture", "fmt", "upload_name"),
    [
        ("presets/sillytavern_Default.json", "sillytavern", "Default.json"),
        ("presets/marinara_universal.marinara.json", "marinara", "Universal.marinara.json"),
    ],
)
def test_an_imported_preset_exports_back_to_the_same_file(api, models, fixture, fmt, upload_name):
    raw = (FIXTURES / fixture).read_bytes()
    r = api.post("/presets/import", files={"file": (upload_name, raw, "application/json")}, headers=HX)
    assert r.status_code == 204, r.text
    preset_url = r.headers["HX-Redirect"].split("?")[0]
    page = api.get(preset_url)
    assert page.status_code == 200 and "Chat history" in page.text
    exported = api.get(f"{preset_url}/export", params={"format": fmt})
    assert exported.status_code == 200 and "attachment" in exported.headers["content-disposition"]
    original, back = json.loads(raw), exported.json()
    if fmt == "marinara":  # the envelope's time is the export's own
        original.pop("exportedAt"), back.pop("exportedAt")
    assert back == original


def test_a_file_that_does_not_parse_is_refused_and_nothing_is_written(api, models):
    before = api.get("/presets").text
    for name, raw, words in [
        ("broken.json", b"{not json", "not JSON"),
        ("list.json", b"[1, 2]", "JSON object"),
        ("moon.json", json.dumps({"prompts": [{"identifier": "moon", "marker": True}], "prompt_order": []}).encode(), "moon"),
    ]:  # fmt: skip # one bad file per line
        r = api.post("/presets/import", files={"file": (name, raw, "application/json")}, headers=HX)
        assert r.status_code == 400 and words in html.unescape(r.text), (name, r.text)
    assert api.get("/presets").text == before


def test_a_presets_prefill_and_the_composers_start_with_begin_the_reply(api, models):
    chat = _chat(api, models)
    preset_id = _new_preset(api)
    sections = [_section("chat_history", "Chat history", marker="chat_history")]
    form = _preset_form("Prefilled", sections, prefill="*{{char}} smiles* ")
    assert api.post(f"/presets/{preset_id}", data=form, headers=HX).status_code == 200
    _use(api, chat["id"], preset_id)
    body = _send(api, models, chat["id"], reply=" and bows.")
    assert body["messages"][-2:] == [
        {"role": "user", "content": "Hello?"},
        {"role": "assistant", "content": "*Aria smiles*"},
    ]
    assert api.get(f"/api/chats/{chat['id']}/messages").json()[-1]["content"] == "*Aria smiles* and bows."
    # The composer's text wins over the preset's, for this reply.
    models.script(" then leaves.")
    r = api.post(
        f"/api/chats/{chat['id']}/generate",
        json={"action": "send", "content": "Bye.", "start_with": "*Aria sighs*"},
    )
    events = read_sse(r)
    assert "".join(d["text"] for e, d in events if e == "token") == "*Aria sighs* then leaves."
    assert models.last_request.json["messages"][-1] == {"role": "assistant", "content": "*Aria sighs*"}
    assert api.get(f"/api/chats/{chat['id']}/messages").json()[-1]["content"] == "*Aria sighs* then leaves."


def test_the_context_grid_warns_when_a_preset_puts_a_changing_part_above_stable_ones(api, models):
    chat = _chat(api, models)
    preset_id = _new_preset(api)
    sections = [
        _section("current_time", "Now", marker="current_time"),
        _section("character", "Character", marker="character"),
        _section("chat_history", "Chat history", marker="chat_history"),
    ]
    api.post(f"/presets/{preset_id}", data=_preset_form("Clock first", sections), headers=HX)
    options = f"/api/chats/{chat['id']}/options"
    api.put(options, json={"settings": {"time_awareness": True}})
    page = api.get(f"/chats/{chat['id']}/context").text
    assert 'id="context-cache-warning"' not in page
    api.put(options, json={"settings": {"time_awareness": True, "preset_id": preset_id}})
    page = html.unescape(api.get(f"/chats/{chat['id']}/context").text)
    assert 'id="context-cache-warning"' in page and "Current time (it changes every turn) above" in page

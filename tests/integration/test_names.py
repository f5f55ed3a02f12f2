"""Issue 21 (19): names a user gives (chats, characters, personas, lorebooks, connections, summary prompt
templates) took CR/LF and NUL. Each is refused with one sentence, through the JSON API and through the
page's form, and nothing is stored; names with emoji sequences and bidi marks still pass (app/platform/core/names.py)."""

import html

import pytest
from sqlalchemy import text

from tests.conftest import add_character, add_connection, new_chat

BAD = ("Two\nlines", "Carriage\rreturn", "Nul\x00here", "Tab\there", "Del\x7f", "Line\u2028separator")
GOOD = "Mirela 👩‍💻 \u200fعائشة"  # a ZWJ emoji sequence and a right-to-left mark are how names are written
HX = {"HX-Request": "true"}
TABLES = ("chat", "character", "persona", "lorebook", "connection", "summary_template")


def _counts(sugo) -> dict[str, int]:
    with sugo.engine.connect() as db:
        return {t: db.execute(text(f'select count(*) from "{t}"')).scalar_one() for t in TABLES}


def _names(sugo, table: str) -> list[str]:
    with sugo.engine.connect() as db:
        return list(db.execute(text(f'select name from "{table}"')).scalars())


def _api_refused(r, what: str) -> None:
    assert r.status_code == 422, (r.status_code, r.text[:300])
    messages = [e["msg"] for e in r.json()["detail"]]
    assert any(
        f"{what} cannot contain line breaks, tabs or other control characters." in m for m in messages
    ), messages


def _form_refused(r, what: str) -> None:
    assert r.status_code == 400, (r.status_code, r.text[:300])
    assert f"{what} cannot contain line breaks, tabs or other control characters." in html.unescape(r.text), (
        r.text[:500]
    )


@pytest.mark.parametrize("bad", BAD)
def test_the_json_api_refuses_control_characters_in_every_name(api, sugo, models, bad):
    char = add_character(api)
    conn = add_connection(api, models)
    chat = new_chat(api, [char["id"]], name="Good name")
    book = api.post("/api/lorebooks", json={"name": "Atlas"}).json()
    template = api.post("/api/summary-templates", json={"name": "Terse", "text": "Summarise."}).json()
    persona = api.post("/api/personas", json={"name": "Rowan"}).json()
    before = _counts(sugo)

    _api_refused(api.post("/api/chats", json={"character_ids": [char["id"]], "name": bad}), "A chat name")
    _api_refused(api.patch(f"/api/chats/{chat['id']}", json={"name": bad}), "A chat name")
    _api_refused(api.post("/api/characters", json={"name": bad}), "A character's name")
    _api_refused(api.put(f"/api/characters/{char['id']}", json={"name": bad}), "A character's name")
    _api_refused(api.post("/api/personas", json={"name": bad}), "A persona's name")
    _api_refused(api.put(f"/api/personas/{persona['id']}", json={"name": bad}), "A persona's name")
    _api_refused(api.post("/api/lorebooks", json={"name": bad}), "A lorebook's name")
    _api_refused(api.put(f"/api/lorebooks/{book['id']}", json={"name": bad}), "A lorebook's name")
    body = {"name": bad, "kind": "openai", "base_url": models.base_url, "model": "test-model"}
    _api_refused(api.post("/api/connections", json=body), "A connection's name")
    _api_refused(api.put(f"/api/connections/{conn['id']}", json=body), "A connection's name")
    r = api.post("/api/summary-templates", json={"name": bad, "text": "Summarise."})
    assert r.status_code == 400 and "A template name cannot contain line breaks" in r.json()["detail"], r.text
    r = api.patch(f"/api/summary-templates/{template['id']}", json={"name": bad})
    assert r.status_code == 400 and "A template name cannot contain line breaks" in r.json()["detail"], r.text

    assert _counts(sugo) == before
    assert _names(sugo, "chat") == ["Good name"] and _names(sugo, "character") == ["Aria"]
    assert _names(sugo, "persona") == ["Rowan"] and _names(sugo, "lorebook") == ["Atlas"]
    assert _names(sugo, "summary_template") == ["Terse"] and _names(sugo, "connection") == ["Test model"]


def test_the_forms_refuse_control_characters_in_every_name(api, sugo, models):
    char = add_character(api)
    chat = new_chat(api, [char["id"]], name="Good name")
    conn = add_connection(api, models)
    book = api.post("/api/lorebooks", json={"name": "Atlas"}).json()
    template = api.post("/api/summary-templates", json={"name": "Terse", "text": "Summarise."}).json()
    persona = api.post("/api/personas", json={"name": "Rowan"}).json()
    before = _counts(sugo)
    bad = "Two\r\nlines"

    _form_refused(
        api.post("/chats", data={"character_ids": str(char["id"]), "name": bad}, headers=HX), "A chat name"
    )
    _form_refused(api.post(f"/chats/{chat['id']}/settings", data={"name": bad}, headers=HX), "A chat name")
    _form_refused(api.post("/characters", data={"name": bad}, headers=HX), "A character's name")
    _form_refused(api.post(f"/characters/{char['id']}", data={"name": bad}, headers=HX), "A character's name")
    _form_refused(api.post("/personas", data={"name": bad}, headers=HX), "A persona's name")
    _form_refused(api.post(f"/personas/{persona['id']}", data={"name": bad}, headers=HX), "A persona's name")
    _form_refused(api.post("/lorebooks", data={"name": bad}, headers=HX), "A lorebook's name")
    _form_refused(api.post(f"/lorebooks/{book['id']}", data={"name": bad}, headers=HX), "A lorebook's name")
    form = {"name": bad, "kind": "openai", "base_url": models.base_url, "model": "test-model"}
    _form_refused(api.post("/connections", data=form, headers=HX), "A connection's name")
    _form_refused(api.post(f"/connections/{conn['id']}", data=form, headers=HX), "A connection's name")
    _form_refused(
        api.post(
            f"/chats/{chat['id']}/summary-templates",
            data={"template_name": bad, "template_text": "Summarise."},
            headers=HX,
        ),
        "A template name",
    )
    _form_refused(
        api.post(
            f"/chats/{chat['id']}/summary-templates/{template['id']}/edit",
            data={"template_name": bad, "template_text": "Summarise."},
            headers=HX,
        ),
        "A template name",
    )

    assert _counts(sugo) == before
    assert _names(sugo, "chat") == ["Good name"] and _names(sugo, "character") == ["Aria"]
    assert _names(sugo, "persona") == ["Rowan"] and _names(sugo, "lorebook") == ["Atlas"]
    assert _names(sugo, "summary_template") == ["Terse"] and _names(sugo, "connection") == ["Test model"]


def test_names_written_with_emoji_sequences_and_bidi_marks_are_kept(api, sugo, models):
    char = add_character(api, GOOD)
    chat = new_chat(api, [char["id"]], name=GOOD)
    assert api.patch(f"/api/chats/{chat['id']}", json={"name": GOOD + " 2"}).status_code == 200
    assert api.post("/api/personas", json={"name": GOOD}).status_code == 201
    assert api.post("/api/lorebooks", json={"name": GOOD}).status_code in (200, 201)
    assert api.post("/api/summary-templates", json={"name": GOOD, "text": "Summarise."}).status_code == 201
    add_connection(api, models, name=GOOD)
    assert _names(sugo, "chat") == [GOOD + " 2"]
    for table in ("character", "persona", "lorebook", "summary_template", "connection"):
        assert _names(sugo, table) == [GOOD], table

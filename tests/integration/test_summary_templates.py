"""Summary Prompt templates, Summary Provider, Maximum output size and group-chat parts (issue 12): Generate
sends the template chosen for every Roleplay chat (the Default once it is deleted), through the Summary Provider's
connection (the chat's once that is deleted), with Maximum output size as its budget; a character's reply
reads only the parts of a summary meant for them."""

from __future__ import annotations

import time

import pytest

from app.memory.summaries.core import answers
from app.memory.summaries.core.prompts import ROLEPLAY_ENTRY_PROMPT
from tests.conftest import add_character, add_connection, new_chat, read_sse

RECAP = "Rowan and Aria crossed the salt flats and lost the map."
MINE = "Summarise like a court chronicler, in three sentences."


def _chat(api, models, *, names=("Aria",), n: int = 4) -> int:
    add_connection(api, models)
    chat = new_chat(api, [add_character(api, name)["id"] for name in names])
    for i in range(n):
        assert (
            api.post(
                f"/api/chats/{chat['id']}/messages", json={"content": f"Step {i} along the road."}
            ).status_code
            == 201
        )
    return chat["id"]


def _settings(api, chat_id: int, **values) -> None:
    r = api.put(f"/api/chats/{chat_id}/options", json={"settings": values})
    assert r.status_code == 200, r.text


def _form(chat_id: int, **values) -> dict:
    """Chat Settings as the page posts it, Chat Summary section shown."""
    return {
        "name": f"Chat {chat_id}",
        "mode": "roleplay",
        "recent_message_limit": "40",
        "chat_summary_shown": "1",
        "summary_recent_tail": "10",
        "summary_max_tokens": "4096",
        **values,
    }


def _generate(api, models, chat_id: int) -> dict:
    models.script(RECAP)
    r = api.post(f"/api/chats/{chat_id}/summaries/generate", json={"scope": "last", "last": 2})
    assert r.status_code == 202, r.text
    for _ in range(600):  # no timing claim: the bound only stops a hung test
        status = api.get(f"/api/chats/{chat_id}/summaries/generate").json()
        if status["status"] != "running":
            assert status["status"] == "done", status
            return models.last_request.json
        time.sleep(0.05)
    raise AssertionError("the summary run never finished")


def test_templates_api_new_duplicate_edit_delete_and_limits(api):
    base = "/api/summary-templates"
    listed = api.get(base).json()
    assert listed == [
        {
            "id": None,
            "name": "Default",
            "text": ROLEPLAY_ENTRY_PROMPT,
            "builtin": True,
            "created_at": None,
            "updated_at": None,
        }
    ]
    mine = api.post(base, json={"name": "  Chronicler ", "text": MINE})
    assert mine.status_code == 201 and mine.json()["name"] == "Chronicler"
    tid = mine.json()["id"]
    copy = api.post(f"{base}/default/duplicate").json()
    assert copy["name"] == "Default (copy)" and copy["text"] == ROLEPLAY_ENTRY_PROMPT
    assert api.post(f"{base}/{tid}/duplicate").json()["name"] == "Chronicler (copy)"
    assert api.post(f"{base}/{tid}/duplicate").json()["name"] == "Chronicler (copy 2)"
    edited = api.patch(f"{base}/{copy['id']}", json={"name": "Terse", "text": "Be terse."})
    assert edited.status_code == 200 and edited.json()["text"] == "Be terse."
    assert [t["name"] for t in api.get(base).json()] == [
        "Default",
        "Chronicler",
        "Chronicler (copy 2)",
        "Chronicler (copy)",
        "Terse",
    ]

    for name, message in {
        "chronicler": "already exists",
        "default": "built-in",
        " ": "Give the template a name",
    }.items():
        r = api.post(base, json={"name": name, "text": "t"})
        assert r.status_code == 400 and message in r.json()["detail"], (name, r.text)
    assert api.post(base, json={"name": "x" * 101, "text": "t"}).status_code == 422
    assert "cannot be empty" in api.post(base, json={"name": "Blank", "text": "   "}).json()["detail"]
    assert api.post(base, json={"name": "Big", "text": "x" * 20_001}).status_code == 422
    assert "already exists" in api.patch(f"{base}/{copy['id']}", json={"name": "CHRONICLER"}).json()["detail"]
    assert api.delete(f"{base}/{tid}").status_code == 204
    assert api.get(f"{base}/{tid}").status_code == 404 and api.delete(f"{base}/{tid}").status_code == 404
    assert len(api.get(base).json()) == 4


def test_generate_sends_the_chosen_template_and_the_default_once_it_is_deleted(api, models):
    chat_id = _chat(api, models)
    assert _generate(api, models, chat_id)["messages"][0]["content"] == ROLEPLAY_ENTRY_PROMPT
    tid = api.post("/api/summary-templates", json={"name": "Chronicler", "text": MINE}).json()["id"]
    r = api.put("/api/summary-templates/chosen", json={"id": tid})
    assert r.status_code == 200 and (r.json()["id"], r.json()["name"], r.json()["missing"]) == (
        tid,
        "Chronicler",
        False,
    )
    sent = _generate(api, models, chat_id)["messages"]
    assert sent[0] == {"role": "system", "content": MINE} and "Step 3 along the road." in sent[1]["content"]
    page = api.get(f"/chats/{chat_id}/settings").text
    assert "selected>Chronicler</option>" in page and "summary-template-missing" not in page

    api.delete(f"/api/summary-templates/{tid}")
    assert _generate(api, models, chat_id)["messages"][0]["content"] == ROLEPLAY_ENTRY_PROMPT
    assert "The chosen template was deleted" in api.get(f"/chats/{chat_id}/settings").text
    chosen = api.get("/api/summary-templates/chosen").json()
    assert (chosen["id"], chosen["builtin"], chosen["missing"]) == (None, True, True)
    assert len(api.get(f"/api/chats/{chat_id}/summaries").json()) == 3  # earlier entries are not rewritten
    # Choosing the Default again clears the notice.
    assert api.put("/api/summary-templates/chosen", json={"id": None}).json()["missing"] is False
    assert "summary-template-missing" not in api.get(f"/chats/{chat_id}/settings").text


def test_the_choice_is_global_choosing_in_one_chat_changes_every_roleplay_chat(api, models):
    chat_a = _chat(api, models)
    chat_b = new_chat(api, [add_character(api, "Bram")["id"]])["id"]
    for i in range(3):
        api.post(f"/api/chats/{chat_b}/messages", json={"content": f"Bram walks {i}."})
    tid = api.post("/api/summary-templates", json={"name": "Chronicler", "text": MINE}).json()["id"]
    page_b = api.get(f"/chats/{chat_b}/settings").text  # drawn before chat A chooses
    assert "Used by every Roleplay chat." in page_b and 'name="summary_template_shown" value=""' in page_b

    # Choose in chat A with Save settings: chat B's Generate sends that template's text.
    hx = {"HX-Request": "true"}
    r = api.post(
        f"/chats/{chat_a}/settings",
        data=_form(chat_a, summary_template_id=str(tid), summary_template_shown=""),
        headers=hx,
    )
    assert r.status_code == 200, r.text
    assert _generate(api, models, chat_b)["messages"][0] == {"role": "system", "content": MINE}
    assert api.get("/api/summary-templates/chosen").json()["id"] == tid
    assert "summary_template_id" not in api.get(f"/api/chats/{chat_a}").json()["settings"]
    assert f'<option value="{tid}" selected>Chronicler</option>' in api.get(f"/chats/{chat_b}/settings").text

    # Saving chat B's settings from its page drawn before leaves the newer choice alone …
    r = api.post(
        f"/chats/{chat_b}/settings",
        data=_form(chat_b, summary_template_id="", summary_template_shown=""),
        headers=hx,
    )
    assert r.status_code == 200 and api.get("/api/summary-templates/chosen").json()["id"] == tid
    # … and choosing the Default there puts chat A back on it.
    r = api.post(
        f"/chats/{chat_b}/settings",
        data=_form(chat_b, summary_template_id="", summary_template_shown=str(tid)),
        headers=hx,
    )
    assert r.status_code == 200
    assert _generate(api, models, chat_a)["messages"][0]["content"] == ROLEPLAY_ENTRY_PROMPT

    # Deleting the chosen template puts every chat on the Default, and each chat's panel says so.
    api.put("/api/summary-templates/chosen", json={"id": tid})
    assert api.delete(f"/api/summary-templates/{tid}").status_code == 204
    for chat_id in (chat_a, chat_b):
        assert _generate(api, models, chat_id)["messages"][0]["content"] == ROLEPLAY_ENTRY_PROMPT
        assert (
            "The chosen template was deleted: every Roleplay chat uses the Default"
            in api.get(f"/chats/{chat_id}/settings").text
        )
    # A new template does not inherit the deleted one's choice (SQLite may reuse its id).
    again = api.post("/api/summary-templates", json={"name": "Again", "text": "Again."}).json()
    assert api.get("/api/summary-templates/chosen").json()["id"] is None, again
    assert _generate(api, models, chat_a)["messages"][0]["content"] == ROLEPLAY_ENTRY_PROMPT


def test_the_chosen_api_refuses_what_is_not_a_template(api):
    base = "/api/summary-templates/chosen"
    assert api.put(base, json={"id": 999}).status_code == 404
    assert api.put(base, json={}).status_code == 422 and api.put(base, json={"id": "x"}).status_code == 422
    assert api.put(base, json={"id": 2**70}).status_code == 422
    assert api.get(base).json() == {
        "id": None,
        "name": "Default",
        "text": ROLEPLAY_ENTRY_PROMPT,
        "builtin": True,
        "created_at": None,
        "updated_at": None,
        "missing": False,
    }


@pytest.fixture
def two_models(models):
    """The test model server also answers as "summary-model" (the second connection's model)."""
    before = list(models.models)
    models.models = [*before, "summary-model"]
    yield models
    models.models = before


def test_the_summary_provider_writes_and_the_chats_connection_once_it_is_deleted(api, two_models):
    models = two_models
    chat_id = _chat(api, models)
    other = add_connection(api, models, name="Summariser", model="summary-model")
    _settings(api, chat_id, summary_connection_id=other["id"])
    assert _generate(api, models, chat_id)["model"] == "summary-model"
    assert api.delete(f"/api/connections/{other['id']}").status_code in (200, 204)
    assert _generate(api, models, chat_id)["model"] == "test-model"
    assert "The connection chosen for summaries was deleted" in api.get(f"/chats/{chat_id}/settings").text


def test_maximum_output_size_is_the_requests_budget(api, models):
    chat_id = _chat(api, models)
    _settings(api, chat_id, summary_max_tokens=20_000)
    assert _generate(api, models, chat_id)["max_tokens"] == answers.request_max_tokens(20_000, 0) == 20_000
    _settings(api, chat_id, summary_max_tokens=100)
    assert _generate(api, models, chat_id)["max_tokens"] == answers.request_max_tokens(100, 0)


def test_settings_form_saves_the_three_and_refuses_a_bad_size(api, two_models):
    models = two_models
    chat_id = _chat(api, models)
    tid = api.post("/api/summary-templates", json={"name": "Chronicler", "text": MINE}).json()["id"]
    conn = add_connection(api, models, name="Summariser", model="summary-model")
    form = {
        "name": "Road",
        "mode": "roleplay",
        "recent_message_limit": "40",
        "chat_summary_shown": "1",
        "summary_recent_tail": "10",
        "summary_template_id": str(tid),
        "summary_template_shown": "",
        "summary_connection_id": str(conn["id"]),
    }
    before = api.get(f"/api/chats/{chat_id}").json()
    for bad in ("0", "32769", "abc", "", "1.5"):
        r = api.post(
            f"/chats/{chat_id}/settings",
            data={**form, "summary_max_tokens": bad},
            headers={"HX-Request": "true"},
        )
        assert r.status_code == 400 and "Maximum output size" in r.text and "from 1 to 32,768" in r.text, (
            bad,
            r.text,
        )
    assert api.get(f"/api/chats/{chat_id}").json() == before  # nothing half-written
    assert api.get("/api/summary-templates/chosen").json()["id"] is None
    # A refusal later in the form (an unknown provider) leaves the template choice unsaved too.
    r = api.post(
        f"/chats/{chat_id}/settings",
        data={**form, "summary_max_tokens": "10", "summary_connection_id": "999"},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 400 and api.get("/api/summary-templates/chosen").json()["id"] is None
    r = api.post(
        f"/chats/{chat_id}/settings",
        data={**form, "summary_max_tokens": "32768"},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 200, r.text
    assert 'id="summary-max-tokens" inputmode="numeric" value="32768"' in r.text
    settings = api.get(f"/api/chats/{chat_id}").json()["settings"]
    assert (settings["summary_max_tokens"], settings["summary_connection_id"]) == (32768, conn["id"])
    assert api.get("/api/summary-templates/chosen").json()["id"] == tid
    api.delete(f"/api/summary-templates/{tid}")
    r = api.post(
        f"/chats/{chat_id}/settings",
        data={**form, "summary_max_tokens": "10"},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 404 and "does not exist" in r.text


PRIVATE = 'They reached the gate. {{#if char == "Kaito"}}Kaito hid the key in his boot.{{/if}}{{#if narrator}}The key is cursed.{{/if}} Rain fell.'


def test_each_character_reads_only_the_parts_meant_for_them(api, models):
    chat_id = _chat(api, models, names=("Kaito", "Mira"))
    chars = {c["name"]: c["id"] for c in api.get("/api/characters").json()}
    api.post(f"/api/chats/{chat_id}/summaries", json={"content": PRIVATE, "scope": "last", "last": 2})

    def reply_as(name: str) -> str:
        models.script(f"{name} speaks.")
        r = api.post(
            f"/api/chats/{chat_id}/generate",
            json={"action": "send", "content": "Go on.", "speaker_id": chars[name]},
        )
        assert r.status_code == 200 and read_sse(r)
        return "\n".join(m["content"] for m in models.last_request.json["messages"])

    mira, kaito = reply_as("Mira"), reply_as("Kaito")
    assert "They reached the gate." in mira and "Rain fell." in mira
    assert "hid the key" not in mira and "cursed" not in mira
    assert "Kaito hid the key in his boot." in kaito and "cursed" not in kaito
    peek = api.get(f"/chats/{chat_id}/prompt").text
    assert "cursed" not in peek


def test_a_one_character_chat_reads_the_condition_for_that_character(api, models):
    chat_id = _chat(api, models, names=("Mira",))
    api.post(f"/api/chats/{chat_id}/summaries", json={"content": PRIVATE, "scope": "last", "last": 2})
    models.script("Mira speaks.")
    read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Go on."}))
    sent = "\n".join(m["content"] for m in models.last_request.json["messages"])
    assert "They reached the gate. Rain fell." in sent and "hid the key" not in sent


def test_the_template_manager_answers_its_own_part_and_keeps_the_unsaved_choice(api, models):
    chat_id = _chat(api, models)
    hx = {"HX-Request": "true"}
    base = f"/chats/{chat_id}/summary-templates"
    r = api.post(
        base,
        data={"template_name": "Chronicler", "template_text": MINE, "summary_template_id": ""},
        headers=hx,
    )
    assert (
        r.status_code == 200
        and "<html" not in r.text
        and r.text.lstrip().startswith('<div id="summary-prompt"')
    )
    tid = api.get("/api/summary-templates").json()[1]["id"]
    assert (
        f'<option value="{tid}" selected>Chronicler</option>' in r.text
        and "<details" in r.text
        and " open>" in r.text
    )
    # Duplicating keeps the select's unsaved choice and opens the copy's form.
    r = api.post(f"{base}/default/duplicate", data={"summary_template_id": str(tid)}, headers=hx)
    assert f'<option value="{tid}" selected>' in r.text and 'value="Default (copy)"' in r.text
    # Deleting the unsaved choice goes back to the Default without saying "deleted" (nothing was saved).
    r = api.post(f"{base}/{tid}/delete", data={"summary_template_id": str(tid)}, headers=hx)
    assert (
        '<option value="" selected>Default (built in)</option>' in r.text
        and "summary-template-missing" not in r.text
    )
    # Deleting the saved choice says so: every Roleplay chat now uses the Default.
    saved = api.post("/api/summary-templates", json={"name": "Saved", "text": MINE}).json()["id"]
    api.put("/api/summary-templates/chosen", json={"id": saved})
    r = api.post(f"{base}/{saved}/delete", data={"summary_template_id": str(saved)}, headers=hx)
    assert '<option value="" selected>' in r.text and "The chosen template was deleted" in r.text
    assert 'name="summary_template_shown" value="deleted"' in r.text
    assert (
        api.post(
            f"{base}/{tid}/edit", data={"template_name": "X", "template_text": "Y"}, headers=hx
        ).status_code
        == 404
    )
    r = api.post(f"{base}", data={"template_name": "", "template_text": "Y"}, headers=hx)
    assert (
        r.status_code == 400
        and "Give the template a name" in r.text
        and len(api.get("/api/summary-templates").json()) == 2
    )

"""Decide who sees new messages (issue 27, acceptance 3's second part): in a turn-by-turn group with the
option on, the helper decides each new message once, before the next reply; a message is hidden only
from those it names; the author and the narrator are never asked about; a message whose audience the
user set by hand is never decided; a failed decision hides nothing. The test model server plays the
helper and the members (the background jobs are held, so the order of requests is the reply path's)."""

from __future__ import annotations

import json

from sqlmodel import Session

from app.chats.models import Message
from app.memory.scenes.core.visibility import VISIBILITY_PROMPT
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply

CODE = "the vault code is 7-3-9"


def _group(api, models, **extra):
    add_connection(api, models)
    ids = {n: add_character(api, n, first_mes="")["id"] for n in ("Aria", "Bram", "Cleo")}
    chat = new_chat(api, list(ids.values()))
    settings = {
        **chat["settings"],
        "reply_order": "manual",
        "narrator_id": ids["Cleo"],
        "advanced_memory": True,
        "adv_check_interval": 100,
        "adv_decide_visibility": True,
        **extra,
    }
    r = api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings})
    assert r.status_code == 200, r.text
    return chat["id"], ids


def _send(api, chat_id, content, speaker_id):
    r = api.post(
        f"/api/chats/{chat_id}/generate",
        json={"action": "send", "content": content, "speaker_id": speaker_id},
    )
    assert r.status_code == 200, r.text
    return read_sse(r)


def _decisions(models) -> list[str]:
    """The decision requests' user parts, in order."""
    return [
        req.json["messages"][1]["content"]
        for req in models.requests
        if req.json["messages"][0]["content"] == VISIBILITY_PROMPT
    ]


def _messages(api, chat_id):
    return {m["content"]: m for m in api.get(f"/api/chats/{chat_id}/messages").json()}


def test_each_new_message_is_decided_once_before_the_next_reply(api, background_held, models):
    chat_id, ids = _group(api, models)
    models.script(json.dumps({"cannot_see": []}), "Aria waves.")
    _send(api, chat_id, "We gather at the gate.", ids["Aria"])
    first = _decisions(models)
    # The user's message, before the first reply; the narrator (Cleo) is never asked about.
    assert len(first) == 1 and "Characters to decide about: Aria, Bram\n" in first[0]
    assert first[0].endswith("NEW message:\n#1 User: We gather at the gate.")

    models.requests.clear()
    secret = f"Bram walks off to the stables. Aria, listen closely: {CODE}."
    models.script(json.dumps({"cannot_see": []}), json.dumps({"cannot_see": ["Bram"]}), "Aria nods.")
    _send(api, chat_id, secret, ids["Aria"])
    asked = _decisions(models)
    # Aria's reply first (its author is not asked about), then the user's message.
    assert len(asked) == 2
    assert "Characters to decide about: Bram\n" in asked[0] and asked[0].endswith("#2 Aria: Aria waves.")
    assert "#2 Aria: Aria waves." in asked[1] and asked[1].endswith(f"#3 User: {secret}")
    stored = _messages(api, chat_id)
    assert stored[secret]["hidden_for"] == [ids["Bram"]]
    assert stored["Aria waves."]["hidden_for"] == [] and stored["We gather at the gate."]["hidden_for"] == []
    # Aria's reply was written seeing it; Bram's prompt never holds it.
    aria_prompt = json.dumps(models.requests[-1].json["messages"])
    assert CODE in aria_prompt
    bram = api.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": ids["Bram"]}).json()
    assert CODE not in json.dumps(bram["messages"])
    cleo = api.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": ids["Cleo"]}).json()
    assert CODE in json.dumps(cleo["messages"])
    # Nothing is decided twice: a new version of Aria's reply asks nothing.
    models.requests.clear()
    models.script("Aria nods again.")
    reply_id = stored["Aria nods."]["id"]
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "swipe", "message_id": reply_id})
    assert r.status_code == 200, r.text
    read_sse(r)
    assert _decisions(models) == []


def test_a_hide_the_user_set_is_never_changed_and_a_failed_decision_hides_nothing(
    api, background_held, models, caplog
):
    chat_id, ids = _group(api, models)
    models.script(json.dumps({"cannot_see": []}), "Aria waves.")
    _send(api, chat_id, "We gather at the gate.", ids["Aria"])
    # A message the user shows to everyone by hand before it is decided: never asked about.
    posted = api.post(f"/api/chats/{chat_id}/messages", json={"content": "Everyone hears the bell."}).json()
    r = api.patch(f"/api/chats/{chat_id}/messages/{posted['id']}", json={"hidden_for": []})
    assert r.status_code == 200, r.text
    # Aria's reply is decided (the helper is sure Bram is away); the new message's decision fails.
    models.requests.clear()
    models.script(
        json.dumps({"cannot_see": ["Bram"]}),
        Reply(status=500, error="overloaded"),
        "Bram answers.",
    )
    _send(api, chat_id, "Bram, are you there?", ids["Bram"])
    asked = _decisions(models)
    assert len(asked) == 2 and not any(a.endswith("Everyone hears the bell.") for a in asked)
    stored = _messages(api, chat_id)
    assert stored["Aria waves."]["hidden_for"] == [ids["Bram"]]
    assert stored["Everyone hears the bell."]["hidden_for"] == []
    assert stored["Bram, are you there?"]["hidden_for"] == []
    assert any("deciding who sees message" in r.getMessage() for r in caplog.records)
    # The user's own change afterwards stays theirs: a later decision never touches it.
    r = api.patch(f"/api/chats/{chat_id}/messages/{stored['Aria waves.']['id']}", json={"hidden_for": []})
    assert r.status_code == 200
    with Session(background_held.engine) as s:
        msg = s.get(Message, stored["Aria waves."]["id"])
        assert msg is not None and msg.audience_manual and not msg.hidden_for


def test_off_by_default_and_never_in_a_merged_group(api, background_held, models):
    chat_id, ids = _group(api, models, adv_decide_visibility=False)
    models.script("Aria waves.")
    _send(api, chat_id, "We gather at the gate.", ids["Aria"])
    assert _decisions(models) == []
    chat = api.get(f"/api/chats/{chat_id}").json()
    assert chat["settings"]["adv_decide_visibility"] is False
    settings = {**chat["settings"], "adv_decide_visibility": True, "group_merged": True}
    assert api.put(f"/api/chats/{chat_id}/options", json={"settings": settings}).status_code == 200
    models.script("The group answers.")
    _send(api, chat_id, "Anyone?", None)
    assert _decisions(models) == []

"""Who sees a message in a group chat (issue 27, acceptance 1 for messages): a message hidden from one
character and a whisper to another stay out of every prompt built for a character who cannot see
them, live and in Peek Prompt, the context grid and the snapshot; the narrator's prompts hold all."""

import json

from tests.conftest import add_character, add_connection, new_chat, read_sse

SECRET = "The key is under the third lantern."
WHISPER = "Meet me at the mill at midnight."


def _group(api, models):
    add_connection(api, models)
    ids = {n: add_character(api, n, first_mes="")["id"] for n in ("Aria", "Bram", "Cleo")}
    chat = new_chat(api, list(ids.values()))
    settings = {**chat["settings"], "reply_order": "list", "narrator_id": ids["Cleo"]}
    r = api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings})
    assert r.status_code == 200 and r.json()["narrator_id"] == ids["Cleo"]
    return chat["id"], ids


def _send(api, chat_id, content="", **extra):
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content, **extra})
    assert r.status_code == 200, r.text
    return read_sse(r)


def _peek(api, chat_id, speaker_id) -> str:
    r = api.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": speaker_id})
    assert r.status_code == 200, r.text
    return json.dumps(r.json()["messages"])


def test_a_hidden_message_and_a_whisper_reach_only_those_who_may_see_them(api, models):
    chat_id, ids = _group(api, models)
    models.script("Aria listens.", "Bram listens.", "Cleo listens.")
    _send(api, chat_id, "We gather in the square.")
    secret = api.post(f"/api/chats/{chat_id}/messages", json={"content": SECRET}).json()
    r = api.patch(f"/api/chats/{chat_id}/messages/{secret['id']}", json={"hidden_for": [ids["Bram"]]})
    assert r.status_code == 200 and r.json()["hidden_for"] == [ids["Bram"]]

    # A whisper is answered by its recipient alone.
    models.requests.clear()
    models.script("Aria nods, unseen.")
    events = _send(api, chat_id, WHISPER, whisper_to=ids["Aria"])
    assert [e for e, _ in events if e == "start"] == ["start"]
    stored = api.get(f"/api/chats/{chat_id}/messages").json()
    whisper = next(m for m in stored if m["content"] == WHISPER)
    assert whisper["whisper_to"] == ids["Aria"] and whisper["hidden_for"] == []
    aria_live = json.dumps(models.requests[0].json["messages"])
    assert WHISPER in aria_live and SECRET in aria_live

    # The next round: everyone answers; Bram's live prompt has neither, Cleo (narrator) has both.
    models.requests.clear()
    models.script("Aria again.", "Bram again.", "Cleo again.")
    _send(api, chat_id, "What now?")
    live = {
        name: json.dumps(models.requests[i].json["messages"])
        for i, name in enumerate(("Aria", "Bram", "Cleo"))
    }
    assert SECRET not in live["Bram"] and WHISPER not in live["Bram"]
    assert SECRET in live["Cleo"] and WHISPER in live["Cleo"]
    assert SECRET in live["Aria"] and WHISPER in live["Aria"]
    # Aria's reply to the whisper is hers: Bram did not see the whisper, but sees her answer.
    assert "Aria nods, unseen." in live["Bram"]

    # The previews say the same for each member.
    assert SECRET not in _peek(api, chat_id, ids["Bram"]) and WHISPER not in _peek(api, chat_id, ids["Bram"])
    assert SECRET in _peek(api, chat_id, ids["Cleo"]) and WHISPER in _peek(api, chat_id, ids["Cleo"])
    grid = api.get(f"/api/chats/{chat_id}/context", params={"speaker_id": ids["Bram"]})
    assert grid.status_code == 200
    snap = api.get(
        f"/api/chats/{chat_id}/prompt/snapshot", params={"speaker_id": ids["Bram"], "format": "json"}
    )
    assert snap.status_code == 200 and SECRET not in snap.text and WHISPER not in snap.text
    snap_narrator = api.get(f"/api/chats/{chat_id}/prompt/snapshot", params={"speaker_id": ids["Cleo"]})
    assert SECRET in snap_narrator.text

    # Bram's Peek Prompt counts them among the messages left out as hidden.
    peek = api.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": ids["Bram"]}).json()
    assert peek["hidden_skipped"] == 2


def test_showing_a_message_to_everyone_again_and_a_narrator_who_left(api, models):
    chat_id, ids = _group(api, models)
    msg = api.post(
        f"/api/chats/{chat_id}/messages", json={"content": SECRET, "whisper_to": ids["Aria"]}
    ).json()
    assert SECRET not in _peek(api, chat_id, ids["Bram"])
    r = api.patch(f"/api/chats/{chat_id}/messages/{msg['id']}", json={"whisper_to": None})
    assert r.status_code == 200 and r.json()["whisper_to"] is None
    assert SECRET in _peek(api, chat_id, ids["Bram"])

    api.patch(f"/api/chats/{chat_id}/messages/{msg['id']}", json={"hidden_for": [ids["Cleo"]]})
    # The explicit hide wins over being the narrator.
    assert SECRET not in _peek(api, chat_id, ids["Cleo"])
    api.patch(f"/api/chats/{chat_id}/messages/{msg['id']}", json={"hidden_for": []})
    assert SECRET in _peek(api, chat_id, ids["Cleo"])


def test_audience_ids_must_be_members(api, models):
    chat_id, ids = _group(api, models)
    stranger = add_character(api, "Stranger")["id"]
    msg = api.post(f"/api/chats/{chat_id}/messages", json={"content": "Hello"}).json()
    for body in ({"hidden_for": [stranger]}, {"whisper_to": stranger}):
        r = api.patch(f"/api/chats/{chat_id}/messages/{msg['id']}", json=body)
        assert r.status_code == 400 and "not in this chat" in r.json()["detail"], r.text
    r = api.post(
        f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "psst", "whisper_to": stranger}
    )
    assert r.status_code == 400
    assert api.get(f"/api/chats/{chat_id}/messages").json()[-1]["content"] == "Hello"  # nothing stored
    assert api.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": stranger}).status_code == 400


def test_a_chat_of_one_has_no_whispers(api, models):
    add_connection(api, models)
    chat = new_chat(api, [add_character(api, "Aria")["id"]])
    aria = chat["character_ids"][0]
    r = api.post(f"/api/chats/{chat['id']}/messages", json={"content": "psst", "whisper_to": aria})
    assert r.status_code == 400 and "group" in r.json()["detail"]


def _character_book(api, character_id, name, content):
    book = api.post("/api/lorebooks", json={"name": name, "is_global": False}).json()
    entry = {"title": name, "content": content, "constant": True}
    assert api.post(f"/api/lorebooks/{book['id']}/entries", json=entry).status_code == 201
    r = api.post(
        f"/api/lorebooks/{book['id']}/links", json={"target": "character", "target_id": character_id}
    )
    assert r.status_code == 204, r.text


def test_each_member_reads_its_own_lorebook_on_its_turn_and_a_whisper_triggers_nothing_for_others(
    api, models
):
    chat_id, ids = _group(api, models)
    _character_book(api, ids["Aria"], "Aria's secrets", "Aria once stole the duke's seal.")
    _character_book(api, ids["Bram"], "Bram's secrets", "Bram owes the smugglers forty crowns.")
    book = api.post("/api/lorebooks", json={"name": "Town"}).json()
    entry = {"title": "Mill", "content": "The old mill burned down last winter.", "keys": ["mill"]}
    api.post(f"/api/lorebooks/{book['id']}/entries", json=entry)
    api.put(f"/api/chats/{chat_id}/lorebooks", json={"book_ids": [book["id"]]})
    api.post(
        f"/api/chats/{chat_id}/messages", json={"content": "Meet me at the mill.", "whisper_to": ids["Aria"]}
    )

    aria, bram = _peek(api, chat_id, ids["Aria"]), _peek(api, chat_id, ids["Bram"])
    assert "duke's seal" in aria and "forty crowns" not in aria
    assert "forty crowns" in bram and "duke's seal" not in bram
    # The whisper names the mill: its entry fires for the whisper's recipient only.
    assert "mill burned" in aria and "mill burned" not in bram


def test_a_memory_holding_a_whisper_is_recalled_for_its_recipient_only(api, sugo, models):
    from app.memory.recall.jobs import embed_chat
    from tests.integration.test_memory_recall import FACT, _fill

    add_connection(api, models, context_size=16384)
    ids = {n: add_character(api, n, first_mes="")["id"] for n in ("Aria", "Bram")}
    chat = new_chat(api, list(ids.values()), mode="conversation")
    message_ids = _fill(sugo, chat["id"], ids["Aria"], n=200, fact_at=20)
    fact_id = message_ids[19]
    r = api.patch(f"/api/chats/{chat['id']}/messages/{fact_id}", json={"whisper_to": ids["Aria"]})
    assert r.status_code == 200
    embed_chat(sugo.services, chat["id"])

    api.post(f"/api/chats/{chat['id']}/messages", json={"content": "Where did Elowen hide the brass key?"})

    def recalled(speaker):
        peek = api.get(f"/api/chats/{chat['id']}/prompt", params={"speaker_id": speaker}).json()
        return json.dumps(peek["messages"])

    # The whisper left the recent window long ago: only Memory Recall could bring it back.
    assert FACT in recalled(ids["Aria"])
    assert FACT not in recalled(ids["Bram"])


def test_a_member_with_its_own_new_start_reads_the_chat_from_there(api, sugo, models):
    chat_id, ids = _group(api, models)
    old = api.post(f"/api/chats/{chat_id}/messages", json={"content": "Old news: the dragon sleeps."}).json()
    start = api.post(
        f"/api/chats/{chat_id}/messages", json={"content": "Welcome, Bram, you just arrived."}
    ).json()
    r = api.put(f"/api/chats/{chat_id}/members/{ids['Bram']}", json={"start_message_id": start["id"]})
    assert r.status_code == 200, r.text
    bram_member = next(m for m in r.json()["members"] if m["character_id"] == ids["Bram"])
    assert bram_member["start_message_id"] == start["id"] and bram_member["muted"] is False
    bram, aria = _peek(api, chat_id, ids["Bram"]), _peek(api, chat_id, ids["Aria"])
    assert "dragon sleeps" not in bram and "Welcome, Bram" in bram
    assert "dragon sleeps" in aria and "Welcome, Bram" in aria
    # A new start is not a refresh mark: Peek Prompt does not say one cut the conversation.
    notes = api.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": ids["Bram"]}).json()["notes"]
    assert not any("refresh mark" in note for note in notes), notes
    # The live prompt is the same.
    models.requests.clear()
    models.script("Bram looks around.")
    r = api.post(
        f"/api/chats/{chat_id}/generate",
        json={"action": "send", "content": "Hello?", "speaker_id": ids["Bram"]},
    )
    read_sse(r)
    live = json.dumps(models.requests[-1].json["messages"])
    assert "dragon sleeps" not in live and "Welcome, Bram" in live
    # Back to the beginning; a message of another chat is refused.
    r = api.put(f"/api/chats/{chat_id}/members/{ids['Bram']}", json={"start_message_id": None})
    assert r.status_code == 200 and "dragon sleeps" in _peek(api, chat_id, ids["Bram"])
    other = new_chat(api, [ids["Aria"]])
    stranger = api.post(f"/api/chats/{other['id']}/messages", json={"content": "Elsewhere."}).json()
    r = api.put(f"/api/chats/{chat_id}/members/{ids['Bram']}", json={"start_message_id": stranger["id"]})
    assert r.status_code == 400 and "not in this chat" in r.json()["detail"]
    assert old["id"] < start["id"]

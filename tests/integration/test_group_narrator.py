"""A group's standalone narrator (issue 27): "a narrator of its own" is Sugo's Narrator card, written
once, joining the group muted as its narrator. It reads what the others cannot (a message hidden from
a member, a whisper to another), live and in Peek Prompt, and answers only when picked."""

import json

from tests.conftest import add_character, add_connection, new_chat, read_sse

SECRET = "The key is under the third lantern."
WHISPER = "Meet me at the mill at midnight."


def _group(api, models, names=("Aria", "Bram")) -> tuple[int, dict[str, int]]:
    add_connection(api, models)
    ids = {n: add_character(api, n, first_mes="")["id"] for n in names}
    chat = new_chat(api, list(ids.values()))
    r = api.put(
        f"/api/chats/{chat['id']}/options", json={"settings": {**chat["settings"], "reply_order": "list"}}
    )
    assert r.status_code == 200, r.text
    return chat["id"], ids


def _peek(api, chat_id: int, speaker_id: int) -> str:
    r = api.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": speaker_id})
    assert r.status_code == 200, r.text
    return json.dumps(r.json()["messages"])


def test_a_narrator_of_its_own_reads_everything_and_speaks_when_picked(api, models):
    chat_id, ids = _group(api, models)
    r = api.post(f"/api/chats/{chat_id}/narrator")
    assert r.status_code == 200, r.text
    chat = r.json()
    narrator = chat["narrator_id"]
    assert narrator not in ids.values()
    assert [(m["name"], m["muted"]) for m in chat["members"]] == [
        ("Aria", False),
        ("Bram", False),
        ("Narrator", True),
    ]
    card = api.get(f"/api/characters/{narrator}").json()
    assert "story's narrator" in card["description"]
    # Asked again, or by another group: the same card, joined once.
    again = api.post(f"/api/chats/{chat_id}/narrator").json()
    assert again["narrator_id"] == narrator and len(again["members"]) == 3
    other, _ = _group(api, models, names=("Cleo", "Dara"))
    assert api.post(f"/api/chats/{other}/narrator").json()["narrator_id"] == narrator
    assert [c["name"] for c in api.get("/api/characters").json()].count("Narrator") == 1

    secret = api.post(f"/api/chats/{chat_id}/messages", json={"content": SECRET}).json()
    api.patch(f"/api/chats/{chat_id}/messages/{secret['id']}", json={"hidden_for": [ids["Bram"]]})
    api.post(f"/api/chats/{chat_id}/messages", json={"content": WHISPER, "whisper_to": ids["Aria"]})
    bram, aria, told = (_peek(api, chat_id, i) for i in (ids["Bram"], ids["Aria"], narrator))
    assert SECRET not in bram and WHISPER not in bram and WHISPER in aria
    assert SECRET in told and WHISPER in told
    # Muted, it is not among those who answer by themselves; picked, it answers, reading it all.
    models.requests.clear()
    models.script("Aria nods.", "Bram shrugs.")
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Well?"})
    read_sse(r)
    names = [m["name"] for m in api.get(f"/api/chats/{chat_id}/messages").json()]
    assert names[-2:] == ["Aria", "Bram"]
    models.script("The lanterns flicker.")
    r = api.post(
        f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "", "speaker_id": narrator}
    )
    read_sse(r)
    assert api.get(f"/api/chats/{chat_id}/messages").json()[-1]["name"] == "Narrator"
    sent = json.dumps(models.requests[-1].json["messages"])
    assert SECRET in sent and WHISPER in sent and "[Write the next reply only as Narrator.]" in sent


def test_chat_settings_take_a_narrator_of_its_own_and_a_chat_of_one_is_refused(api, models):
    chat_id, ids = _group(api, models)
    form = {"name": "Square", "group_shown": "1", "reply_order": "list", "narrator_id": "standalone"}
    r = api.post(f"/chats/{chat_id}/settings", data=form, headers={"HX-Request": "true"})
    assert r.status_code == 200, r.text
    chat = api.get(f"/api/chats/{chat_id}").json()
    assert chat["narrator_id"] is not None and chat["members"][-1]["name"] == "Narrator"
    assert 'value="standalone"' not in r.text  # it is the narrator now, chosen by its name
    single = new_chat(api, [add_character(api, "Solo")["id"]])
    r = api.post(f"/api/chats/{single['id']}/narrator")
    assert r.status_code == 400 and "two characters or more" in r.text
    assert api.get(f"/api/chats/{single['id']}").json()["narrator_id"] is None
    assert [c["name"] for c in api.get("/api/characters").json()].count("Narrator") == 1

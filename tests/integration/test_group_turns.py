"""Who answers in a group chat, over real HTTP against the test model server (issue 27): the chat's
turn-taking order, the cards' talkativeness and mute decide the members who answer one send, each
reply streamed after the one before; Stop or a failure ends the group's turn."""

import threading

import pytest

from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.waiting import wait_for


def _group(api, models, *names, talk=None, **settings):
    add_connection(api, models)
    talk = talk or {}
    chars = {}
    for name in names:
        chars[name] = add_character(api, name, first_mes="", talkativeness=talk.get(name, 0.5))["id"]
    chat = new_chat(api, list(chars.values()))
    if settings:
        r = api.put(f"/api/chats/{chat['id']}/options", json={"settings": {**chat["settings"], **settings}})
        assert r.status_code == 200, r.text
    return chat["id"], chars


def _send(api, chat_id, content="", **extra):
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content, **extra})
    assert r.status_code == 200, r.text
    return read_sse(r)


def _replies(api, chat_id):
    return [m for m in api.get(f"/api/chats/{chat_id}/messages").json() if m["role"] == "assistant"]


def _starts(events):
    return [d["message_id"] for e, d in events if e == "start"]


def test_list_order_streams_every_member_one_after_the_other_each_with_the_one_before_in_its_prompt(
    api, models
):
    chat_id, chars = _group(api, models, "Aria", "Bram", "Cleo", reply_order="list")
    models.script("Aria waves.", "Bram nods.", "Cleo smiles.")
    events = _send(api, chat_id, "Good morning, all")

    replies = _replies(api, chat_id)
    assert [(m["name"], m["content"], m["status"]) for m in replies] == [
        ("Aria", "Aria waves.", "ok"),
        ("Bram", "Bram nods.", "ok"),
        ("Cleo", "Cleo smiles.", "ok"),
    ]
    # One stream: start … done for each reply, in order.
    assert [e for e, _ in events if e in ("start", "done")] == ["start", "done"] * 3
    assert _starts(events) == [m["id"] for m in replies]
    # Each member is asked as itself, and reads what the members before it said.
    bram, cleo = models.requests[1].json["messages"], models.requests[2].json["messages"]
    assert bram[-1]["content"] == "[Write the next reply only as Bram.]"
    assert cleo[-1]["content"] == "[Write the next reply only as Cleo.]"
    assert any("Bram nods." in m["content"] for m in cleo) and not any(
        "Cleo smiles." in m["content"] for m in bram
    )


def test_natural_order_puts_the_named_member_first_then_rolls_talkativeness(api, models):
    chat_id, chars = _group(api, models, "Aria", "Bram", "Cleo", talk={"Aria": 1, "Bram": 0, "Cleo": 0})
    models.script("Cleo answers.", "Aria adds.")
    _send(api, chat_id, "Cleo, what do you say?")
    assert [m["name"] for m in _replies(api, chat_id)] == ["Cleo", "Aria"]  # Bram never rolls in


def test_natural_order_lets_nobody_answer_itself_on_an_empty_send_unless_allowed(api, models, sugo):
    chat_id, chars = _group(api, models, "Aria", "Bram", talk={"Aria": 1, "Bram": 0})
    models.script("Aria speaks.")
    _send(api, chat_id, "Hello")
    # Aria spoke last: an empty send passes her by although she always rolls in; Bram never rolls, so
    # the one picked when nobody was drawn is Bram.
    models.script("Bram, at last.")
    _send(api, chat_id)
    assert [m["name"] for m in _replies(api, chat_id)] == ["Aria", "Bram"]

    chat = api.get(f"/api/chats/{chat_id}").json()
    api.put(
        f"/api/chats/{chat_id}/options", json={"settings": {**chat["settings"], "allow_self_responses": True}}
    )
    models.script("Aria again.")
    _send(api, chat_id)
    assert [m["name"] for m in _replies(api, chat_id)][-1] == "Aria"


def test_a_muted_member_answers_only_when_asked_for(api, models):
    chat_id, chars = _group(api, models, "Aria", "Bram", reply_order="list")
    r = api.put(f"/api/chats/{chat_id}/members/{chars['Bram']}", json={"muted": True})
    assert r.status_code == 200
    assert [(m["name"], m["muted"], m["talkativeness"]) for m in r.json()["members"]] == [
        ("Aria", False, 0.5),
        ("Bram", True, 0.5),
    ]
    _send(api, chat_id, "Anyone?")
    assert [m["name"] for m in _replies(api, chat_id)] == ["Aria"]
    _send(api, chat_id, "Bram, you?", speaker_id=chars["Bram"])
    assert [m["name"] for m in _replies(api, chat_id)] == ["Aria", "Bram"]
    # Everyone muted: the message is posted and nobody answers.
    api.put(f"/api/chats/{chat_id}/members/{chars['Aria']}", json={"muted": True})
    events = _send(api, chat_id, "Hello?")
    assert events == [
        ("start", {"message_id": None, "swipe_index": 0, "action": "send"}),
        ("done", {"message_id": None, "message_ids": []}),
    ]
    assert api.get(f"/api/chats/{chat_id}/messages").json()[-1]["content"] == "Hello?"


def test_muting_someone_not_in_the_chat_is_refused(api, models):
    chat_id, chars = _group(api, models, "Aria", "Bram")
    stranger = add_character(api, "Stranger")["id"]
    r = api.put(f"/api/chats/{chat_id}/members/{stranger}", json={"muted": True})
    assert r.status_code == 404 and "not in this chat" in r.json()["detail"]


def test_manual_order_posts_the_message_and_an_empty_send_brings_one_member(api, models):
    chat_id, chars = _group(api, models, "Aria", "Bram", reply_order="manual")
    events = _send(api, chat_id, "I look around.")
    assert [e for e, _ in events] == ["start", "done"] and models.requests == []
    assert _replies(api, chat_id) == []
    models.script("Someone answers.")
    _send(api, chat_id)
    assert len(_replies(api, chat_id)) == 1 and len(models.requests) == 1


def test_pooled_order_gives_each_member_a_turn_before_anyone_speaks_twice(api, models):
    chat_id, chars = _group(api, models, "Aria", "Bram", "Cleo", reply_order="pooled")
    _send(api, chat_id, "Who is first?")
    _send(api, chat_id)
    _send(api, chat_id)
    assert sorted(m["name"] for m in _replies(api, chat_id)) == ["Aria", "Bram", "Cleo"]


def test_stop_ends_the_groups_turn(api, models):
    chat_id, chars = _group(api, models, "Aria", "Bram", reply_order="list")
    models.script(Reply(text="word " * 200, chunk_size=5, delay_s=0.02), "Bram never speaks.")
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("events", _send(api, chat_id, "Talk")))
    t.start()
    wait_for(
        lambda: _replies(api, chat_id) and _replies(api, chat_id)[0]["content"], what="Aria's first words"
    )
    assert api.post(f"/api/chats/{chat_id}/stop").json() == {"stopped": True}
    t.join(10)
    assert result["events"][-1][0] == "stopped"
    assert [(m["name"], m["status"]) for m in _replies(api, chat_id)] == [("Aria", "partial")]
    assert len(models.requests) == 1


@pytest.mark.parametrize("first", [Reply(status=500, error="boom"), Reply(text="")])
def test_a_failed_or_empty_reply_ends_the_groups_turn(api, models, first):
    chat_id, chars = _group(api, models, "Aria", "Bram", reply_order="list")
    models.script(first, "Bram never speaks.")
    events = _send(api, chat_id, "Talk")
    assert events[-1][0] == "error"
    assert [(m["name"], m["status"]) for m in _replies(api, chat_id)] == [("Aria", "error")]


def test_talkativeness_is_the_cards_and_is_edited_with_it(api, models):
    chat_id, chars = _group(api, models, "Aria", "Bram", talk={"Aria": 0.8})
    aria = api.get(f"/api/characters/{chars['Aria']}").json()
    assert aria["talkativeness"] == 0.8 and aria["extensions"]["talkativeness"] == 0.8
    r = api.put(f"/api/characters/{chars['Aria']}", json={"name": "Aria", "talkativeness": 1.5})
    assert r.status_code == 422
    members = api.get(f"/api/chats/{chat_id}").json()["members"]
    assert [(m["name"], m["talkativeness"]) for m in members] == [("Aria", 0.8), ("Bram", 0.5)]


def _system(api, chat_id, speaker_id) -> str:
    return api.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": speaker_id}).json()["messages"][0][
        "content"
    ]


def test_the_groups_cards_joined_swapped_or_without_the_muted_and_its_own_scenario(api, models):
    add_connection(api, models)
    ids = {
        n: add_character(api, n, description=f"{n} is a {job}.", scenario=f"{n}'s scenario.")["id"]
        for n, job in (("Aria", "bard"), ("Bram", "smith"), ("Cleo", "thief"))
    }
    chat = new_chat(api, list(ids.values()))

    def use(**settings):
        body = {"settings": {**api.get(f"/api/chats/{chat['id']}").json()["settings"], **settings}}
        assert api.put(f"/api/chats/{chat['id']}/options", json=body).status_code == 200

    joined = _system(api, chat["id"], ids["Bram"])
    assert all(f"{n} is a" in joined for n in ids) and "Aria's scenario." in joined
    use(group_cards="swap")
    swapped = _system(api, chat["id"], ids["Bram"])
    assert "Bram is a smith." in swapped and "Aria is a" not in swapped and "Cleo is a" not in swapped
    assert models.requests == []  # a preview asks nothing of the model

    api.put(f"/api/chats/{chat['id']}/members/{ids['Cleo']}", json={"muted": True})
    use(group_cards="join_unmuted")
    assert "Cleo is a" not in _system(api, chat["id"], ids["Aria"])
    assert "Cleo is a thief." in _system(api, chat["id"], ids["Cleo"])  # a muted speaker keeps its own

    use(
        group_cards="join",
        group_join_prefix="[{{char}}'s <FIELDNAME>: ",
        group_join_suffix="]",
        group_scenario="A storm traps everyone in the inn.",
    )
    wrapped = _system(api, chat["id"], ids["Aria"])
    assert "[Bram's Description: Bram is a smith.]" in wrapped
    assert "Scenario: A storm traps everyone in the inn." in wrapped and "Aria's scenario." not in wrapped


def test_smart_order_asks_the_helper_who_answers_and_falls_back_to_the_next_in_turn(api, models):
    chat_id, chars = _group(api, models, "Aria", "Bram", "Cleo", reply_order="smart")
    models.script('{"next": "cleo"}', "Cleo answers.")
    events = _send(api, chat_id, "Who knows the way to the mill?")
    assert [e for e, _ in events if e in ("start", "done")] == ["start", "start", "done"]
    assert [m["name"] for m in _replies(api, chat_id)] == ["Cleo"]
    helper = models.requests[0].json["messages"]
    assert "Who knows the way to the mill?" in helper[-1]["content"] and "- Aria" in helper[0]["content"]

    # @Name picks without asking the helper.
    models.requests.clear()
    models.script("Bram grunts.")
    _send(api, chat_id, "@Bram, you have been quiet.")
    assert [m["name"] for m in _replies(api, chat_id)][-1] == "Bram" and len(models.requests) == 1

    # A helper that names nobody in the group, or fails: the member after the last speaker answers.
    models.script('{"next": "Gandalf"}', "Cleo again.", Reply(status=500, error="down"), "Aria at last.")
    _send(api, chat_id, "Anyone?")
    _send(api, chat_id, "Still there?")
    assert [m["name"] for m in _replies(api, chat_id)][-2:] == ["Cleo", "Aria"]


def test_a_merged_group_gets_one_reply_for_all_asked_with_the_members_names(api, models):
    chat_id, chars = _group(api, models, "Aria", "Bram", reply_order="list", group_merged=True)
    merged = '<speaker="Aria">*waves*\n\n<speaker="Bram">Hm.'
    models.script(merged, "Next.")
    _send(api, chat_id, "Evening.")
    replies = _replies(api, chat_id)
    assert [(m["name"], m["character_id"], m["content"]) for m in replies] == [("The group", None, merged)]
    nudge = models.requests[0].json["messages"][-1]["content"]
    assert nudge == (
        "[Write the next reply for the group: each character who speaks or acts gets a paragraph that "
        'starts with <speaker="Name">, Name being one of Aria, Bram. Never write for User.]'
    )
    _send(api, chat_id, "And then?")
    history = models.requests[1].json["messages"]
    # The merged reply goes back as it was written (its marks name the speakers); the user's line keeps its name.
    assert {"role": "assistant", "content": merged} in history
    assert {"role": "user", "content": "User: Evening."} in history

"""A new reply split at its scene breaks (issue 14) over real HTTP against the test model server: one
message per part with Advanced Memory on, the message info on the last; nothing split when it is off,
for a swipe, a regeneration, Continue, a break inside code, or a stream that broke."""

from __future__ import annotations

from sqlmodel import Session

from app.chats.models import Message
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply

SPLIT = "A\n\n***\n\nB"


def _chat(api, models, *, on: bool = True) -> int:
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    # A long check interval: no scene check asks the model server for anything in these tests.
    settings = {"advanced_memory": on, "adv_check_interval": 100}
    assert api.put(f"/api/chats/{chat_id}/options", json={"settings": settings}).status_code == 200
    return chat_id


def _generate(api, chat_id: int, action: str, **extra) -> list[tuple[str, dict]]:
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": action, **extra})
    assert r.status_code == 200, r.text
    return read_sse(r)


def _replies(api, chat_id: int) -> list[dict]:
    """The assistant messages after the greeting."""
    msgs = api.get(f"/api/chats/{chat_id}/messages").json()
    user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    return msgs[user + 1 :]


def _stored_version(sugo, message_id: int) -> dict:
    with Session(sugo.engine) as s:
        return s.get(Message, message_id).swipes[0]


def test_a_reply_with_a_scene_break_becomes_two_messages_with_the_info_on_the_last(api, models, sugo):
    chat_id = _chat(api, models)
    models.script(Reply(text=SPLIT, usage={"input_tokens": 10, "output_tokens": 5}))
    events = _generate(api, chat_id, "send", content="Go on.")
    replies = _replies(api, chat_id)
    assert [m["content"] for m in replies] == ["A", "***\n\nB"]
    first, last = replies
    assert events[-1] == ("done", {"message_id": first["id"], "message_ids": [first["id"], last["id"]]})
    assert first["role"] == last["role"] == "assistant"
    assert first["character_id"] == last["character_id"] and first["name"] == last["name"]
    assert [s["content"] for s in first["swipes"]] == ["A"] and [s["content"] for s in last["swipes"]] == [
        "***\n\nB"
    ]
    assert first["swipes"][0]["model"] is None and last["swipes"][0]["model"]
    assert not {"model", "usage", "gen_started", "gen_finished"} & set(_stored_version(sugo, first["id"]))
    info = _stored_version(sugo, last["id"])
    assert (
        info["model"] and info["usage"]["output_tokens"] == 5 and info["gen_started"] and info["gen_finished"]
    )
    assert first["status"] == last["status"] == "ok"


def test_with_advanced_memory_off_the_reply_stays_one_message(api, models):
    chat_id = _chat(api, models, on=False)
    models.script(SPLIT)
    events = _generate(api, chat_id, "send", content="Go on.")
    replies = _replies(api, chat_id)
    assert [m["content"] for m in replies] == [SPLIT]
    assert events[-1] == ("done", {"message_id": replies[0]["id"], "message_ids": [replies[0]["id"]]})
    assert replies[0]["swipes"][0]["model"]


def test_a_swipe_or_regeneration_of_the_last_part_makes_a_version_of_it_alone(api, models):
    chat_id = _chat(api, models)
    models.script(SPLIT)
    _generate(api, chat_id, "send", content="Go on.")
    first, last = _replies(api, chat_id)
    models.script("C\n\n***\n\nD")
    events = _generate(api, chat_id, "swipe", message_id=last["id"])
    assert events[-1] == ("done", {"message_id": last["id"], "message_ids": [last["id"]]})
    models.script("E\n\n---\n\nF")
    _generate(api, chat_id, "regenerate")
    replies = _replies(api, chat_id)
    assert [m["id"] for m in replies] == [first["id"], last["id"]]
    assert replies[0]["content"] == "A" and len(replies[0]["swipes"]) == 1
    assert [s["content"] for s in replies[1]["swipes"]] == ["***\n\nB", "C\n\n***\n\nD", "E\n\n---\n\nF"]


def test_continue_never_splits(api, models):
    chat_id = _chat(api, models)
    models.script("A")
    _generate(api, chat_id, "send", content="Go on.")
    models.script("\n\n***\n\nB")
    _generate(api, chat_id, "continue")
    assert [m["content"] for m in _replies(api, chat_id)] == ["A\n\n***\n\nB"]


def test_a_break_inside_a_code_block_does_not_split(api, models):
    chat_id = _chat(api, models)
    text = "A\n\n```\n***\n```\n\nB"
    models.script(text)
    _generate(api, chat_id, "send", content="Go on.")
    assert [m["content"] for m in _replies(api, chat_id)] == [text]


def test_a_broken_stream_keeps_what_arrived_in_one_message(api, models):
    chat_id = _chat(api, models)
    models.script(Reply(text=SPLIT + " and more to come", chunk_size=3, break_after_chunks=3))
    events = _generate(api, chat_id, "send", content="Go on.")
    assert events[-1][0] == "error"
    replies = _replies(api, chat_id)
    assert [m["content"] for m in replies] == [SPLIT] and replies[0]["status"] == "partial"


def test_three_parts_in_order(api, models):
    chat_id = _chat(api, models)
    models.script("A\n\n***\n\nB\n\n---\n\nC")
    _generate(api, chat_id, "send", content="Go on.")
    assert [m["content"] for m in _replies(api, chat_id)] == ["A", "***\n\nB", "---\n\nC"]

"""Memories from a chat's first messages (issue 21, item 6): a memory after every 5 new messages whatever
the recent-message window and whether recall is on; recall still sends only memories of messages outside
the window. Real Sugo, real built-in model, real HTTP to the test model server."""

from __future__ import annotations

from sqlmodel import Session, select

from app.chats.models import Message
from app.chats.service import new_message
from app.memory.recall.jobs import embed_chat
from app.memory.recall.service import finish_search, search, start_search
from tests.conftest import add_character, add_connection, hold_background, new_chat, read_sse
from tests.support.waiting import wait_for

FACT = "My sister Elowen hid the brass key inside the old clock tower, behind the third gear."


def _built(api, chat_id: int) -> dict:
    """The memory status once nothing is being made or embedded."""
    return wait_for(
        lambda: (s := api.get(f"/api/chats/{chat_id}/memories/status").json())["building"] is None and s,
        timeout=120,
        what="the chat's memories to be built",
    )


def _send(api, models, chat_id: int, text: str, reply: str) -> list[dict]:
    models.script(reply)
    events = read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": text}))
    assert events[-1][0] == "done", events
    return models.last_request.json["messages"]


def test_a_new_roleplay_chat_has_memories_after_five_messages_with_recall_off(api, sugo, models):
    add_connection(api, models, context_size=16384)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    assert api.get(f"/api/chats/{chat_id}").json()["settings"].get("memory_recall") in (None, False)
    _send(api, models, chat_id, FACT, "*Aria nods slowly.* Behind the third gear, then.")
    _send(api, models, chat_id, "We should go before the bells ring.", "The tower is two streets away.")
    assert _built(api, chat_id)["count"] == 0  # four messages after the pinned greeting: not five yet
    _send(api, models, chat_id, "Then let us hurry through the market.", "*She pulls her hood up.*")
    status = _built(api, chat_id)
    assert status["count"] == 1 and status["statuses"]["vectorized"] == 1
    (memory,) = api.get(f"/api/chats/{chat_id}/memories").json()
    messages = [m for m in api.get(f"/api/chats/{chat_id}/messages").json() if m["kind"] == "message"]
    assert memory["message_ids"] == [
        m["id"] for m in messages[1:6]
    ]  # the greeting is pinned, the sixth waits
    assert FACT in memory["content"]
    page = api.get(f"/chats/{chat_id}/memories").text
    assert "No memories yet" not in page and "Elowen" in page

    # Turned on, recall leaves out the memory while its messages are in the window: the prompt holds them.
    api.put(f"/api/chats/{chat_id}/options", json={"settings": {"memory_recall": True}})
    sent = _send(api, models, chat_id, "Where did Elowen hide the brass key?", "In the clock tower.")
    assert not any(m["content"].startswith("<memories>") for m in sent)
    assert sum(FACT in m["content"] for m in sent) == 1  # once, as the message itself
    note = next(
        n for n in api.get(f"/api/chats/{chat_id}/prompt").json()["notes"] if n.startswith("Memory Recall")
    )
    assert note.startswith("Memory Recall: nothing recalled"), note


def test_a_memory_enters_the_prompt_once_its_messages_leave_the_window(api, sugo, models):
    add_connection(api, models, context_size=16384)
    char = add_character(api)
    chat_id = new_chat(api, [char["id"]])["id"]
    api.put(
        f"/api/chats/{chat_id}/options",
        json={"settings": {"memory_recall": True, "recent_message_limit": 20}},
    )
    _send(api, models, chat_id, FACT, "Behind the third gear, then.")
    with Session(sugo.engine) as s:  # the talk goes on (stored directly: 40 replies would only be slower)
        for i in range(40):
            user = i % 2 == 0
            text = (
                f"We keep walking along the coast road, day {i}."
                if user
                else f"The wind picks up over the dunes, hour {i}."
            )
            s.add(new_message(chat_id, "user" if user else "assistant", "You" if user else "Aria", [text]))
        s.commit()
    embed_chat(sugo.services, chat_id)
    sent = _send(api, models, chat_id, "Where did Elowen hide the brass key?", "In the clock tower.")
    memories = [m["content"] for m in sent if m["content"].startswith("<memories>")]
    assert len(memories) == 1 and FACT in memories[0]
    # Only memories before the window: none of them holds a message the prompt sends as it is.
    window = {
        b["message_id"] for b in api.get(f"/api/chats/{chat_id}/prompt").json()["blocks"] if b["message_id"]
    }
    recalled = [c for c in api.get(f"/api/chats/{chat_id}/memories").json() if c["content"] in memories[0]]
    assert recalled and not window & {i for c in recalled for i in c["message_ids"]}


def test_memories_of_the_window_take_no_place_of_an_older_one(api, sugo):
    """The window's memories, each matching the query better than the old one, are left out before the
    candidates are picked: the old memory still ranks first for the prompt."""
    char = add_character(api)
    chat_id = new_chat(api, [char["id"]])["id"]
    with Session(sugo.engine) as s:
        for i in range(1, 181):
            user = i % 2 == 0
            text = (
                FACT
                if i == 10
                else f"Elowen and the brass key again, key {i}, Elowen's key, the brass key."
                if i > 80
                else f"We keep walking along the coast road, day {i}."
            )
            s.add(new_message(chat_id, "user" if user else "assistant", "Rowan" if user else "Aria", [text]))
        s.commit()
        ids = [m.id for m in s.exec(select(Message).where(Message.chat_id == chat_id).order_by(Message.id))]
    embed_chat(sugo.services, chat_id)
    services = sugo.services
    kw = {"bits": services.recall.index, "threads": services.recall.queries}
    with Session(sugo.engine) as s:
        everything, _ = search(s, chat_id, "Where did Elowen hide the brass key?", None, **kw, k=8)
        assert all(max(h.chunk.message_ids) > ids[80] for h in everything)  # the window's memories crowd it
        pending = start_search(
            s.get_bind(), chat_id, "Where did Elowen hide the brass key?", None, **kw, window_start_id=ids[80]
        )
        hits, _ = finish_search(s, pending, k=8)
    assert hits and ids[9] in hits[0].chunk.message_ids
    assert all(max(h.chunk.message_ids) < ids[80] for h in hits)


def test_a_message_shown_to_the_ai_again_is_back_in_its_memory_and_a_forgotten_one_stays_forgotten(api, sugo):
    char = add_character(api)
    chat_id = new_chat(api, [char["id"]])["id"]
    with Session(sugo.engine) as s:
        for i in range(1, 121):
            s.add(
                new_message(
                    chat_id,
                    "user" if i % 2 else "assistant",
                    "Rowan" if i % 2 else "Aria",
                    [FACT if i == 20 else f"Along the coast road, step {i}."],
                )
            )
        s.commit()
        fact_id = s.exec(select(Message.id).where(Message.chat_id == chat_id, Message.content == FACT)).one()
    embed_chat(sugo.services, chat_id)
    with hold_background(sugo):  # the syncs the changes schedule would otherwise run first
        api.patch(f"/api/chats/{chat_id}/messages/{fact_id}", json={"hidden": True})
        embed_chat(sugo.services, chat_id)
        assert not any(fact_id in c["message_ids"] for c in api.get(f"/api/chats/{chat_id}/memories").json())
        api.patch(f"/api/chats/{chat_id}/messages/{fact_id}", json={"hidden": False})
        embed_chat(sugo.services, chat_id)
    memories = api.get(f"/api/chats/{chat_id}/memories").json()
    assert sum(fact_id in c["message_ids"] for c in memories) == 1
    held = sorted(i for c in memories for i in c["message_ids"])
    assert held == sorted(set(held))  # no message twice
    assert embed_chat(sugo.services, chat_id) == (0, 0, 0)  # settled

    # A memory the user forgot leaves a whole chunk of messages in none: that is no mistake to mend.
    forgotten = memories[6]
    assert api.delete(f"/api/chats/{chat_id}/memories/{forgotten['id']}").status_code == 204
    assert embed_chat(sugo.services, chat_id) == (0, 0, 0)
    assert forgotten["content"] not in [
        c["content"] for c in api.get(f"/api/chats/{chat_id}/memories").json()
    ]

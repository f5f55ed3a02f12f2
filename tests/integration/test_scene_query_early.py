"""Advanced Memory embeds the scene query of a new message while the message is stored (`expect`),
the same text the turn then searches with: the turn finds its vector made instead of waiting for
the model. A group chat, whose next speaker is chosen with the turn, is left to the turn."""

from __future__ import annotations

from sqlmodel import Session

from app.chats.history import history_window
from app.chats.service import chat_characters, get_chat, user_name
from app.memory.recall.embedders import MiniLM
from app.memory.scenes.core import recalled
from app.memory.scenes.source import AdvancedMemorySource
from tests.conftest import add_character, new_chat
from tests.support.waiting import wait_for

WORDS = "Do you still have the brass key Aria gave you at the lighthouse?"


def _turn_query(session: Session, chat_id: int) -> str:
    """The query the turn's `begin` makes from the history (as app/memory/scenes/source.py does)."""
    chat = get_chat(session, chat_id)
    speaker, user = chat_characters(session, chat_id)[0].name, user_name(session, chat)
    messages = history_window(session, chat_id, before_id=None, limit=80).messages
    return recalled.scene_query(
        [recalled.QueryMessage(m.role, m.name, m.content) for m in messages], speaker, ignore=(speaker, user)
    )


def test_the_scene_query_is_embedded_before_the_turn_asks(sugo, api):
    MiniLM.loading.start()
    MiniLM.loading.model()  # the early embedding is skipped while the built-in model loads
    chat_id = new_chat(api, [add_character(api)["id"]], mode="roleplay")["id"]
    body = {"settings": {"advanced_memory": True}, "mode": "roleplay"}
    assert api.put(f"/api/chats/{chat_id}/options", json=body).status_code == 200
    vectors = sugo.services.recall.query_vectors
    with Session(sugo.engine) as session:
        AdvancedMemorySource().expect(sugo.services, session, get_chat(session, chat_id), WORDS)
    assert api.post(f"/api/chats/{chat_id}/messages", json={"content": WORDS}).status_code == 201
    with Session(sugo.engine) as session:
        query = _turn_query(session, chat_id)
    assert query and "Aria" not in query  # the speaker's name is left out of it
    wait_for(lambda: vectors.ready(query), timeout=30, what="the early scene query's vector")


def test_a_group_chat_leaves_the_query_to_the_turn(sugo, api):
    ids = [add_character(api, "Aria")["id"], add_character(api, "Bram")["id"]]
    chat_id = new_chat(api, ids, mode="roleplay")["id"]
    assert (
        api.put(f"/api/chats/{chat_id}/options", json={"settings": {"advanced_memory": True}}).status_code
        == 200
    )
    with Session(sugo.engine) as session:
        AdvancedMemorySource().expect(sugo.services, session, get_chat(session, chat_id), WORDS)
    assert not sugo.services.recall.query_vectors.ready(WORDS.replace("Aria", "").strip())

"""The memory tools over a live Sugo: long-term memories created, updated and deleted through
Tool.run with a real ToolContext, their limits, another character's memory refused, what reaches the
next prompt (Peek Prompt's blocks and slots), short-term memory's expiry by replies and by date, and
its part of Chat Settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from sqlmodel import Session, select

from app.tools.builtin import builtin_tools
from app.tools.memories import service
from app.tools.memories.models import LongTermMemory, ShortTermMemory
from app.tools.registry import ToolContext, ToolError, ToolRegistry
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.waiting import wait_for

TOOLS = ToolRegistry(builtin_tools())


def call(ctx: ToolContext, name: str, **arguments):
    tool = TOOLS.get(name)
    assert tool is not None and tool.permission == "memory"
    return tool.run(ctx, tool.args.model_validate(arguments))


def context(sugo, chat_id: int, character_id: int, *, now: datetime | None = None, message_id=None):
    return ToolContext(
        services=sugo.services,
        chat_id=chat_id,
        character_id=character_id,
        persona_id=None,
        message_id=message_id,
        now=now or datetime.now(UTC),
    )


@pytest.fixture
def setup(sugo, api, models):
    add_connection(api, models)
    aria = add_character(api, "Aria")
    kaito = add_character(api, "Kaito")
    chat = new_chat(api, [aria["id"]])
    return {"aria": aria, "kaito": kaito, "chat": chat, "ctx": context(sugo, chat["id"], aria["id"])}


def blocks(api, chat_id: int) -> dict[str, dict]:
    peek = api.get(f"/api/chats/{chat_id}/prompt").json()
    return {b["label"]: b for b in peek["blocks"]}


def test_a_plain_chat_gets_no_memory_block(api, setup):
    peek = api.get(f"/api/chats/{setup['chat']['id']}/prompt").json()
    labels = {b["label"] for b in peek["blocks"]}
    assert not labels & {"Memories (all characters)", "Aria's memories", "Short-term memory"}
    assert not [n for n in peek["notes"] if n.startswith(("Long-term memories", "Short-term memory"))]


def test_memories_are_created_shown_and_sent_in_the_next_prompt_then_updated_and_deleted(api, setup):
    ctx, chat_id = setup["ctx"], setup["chat"]["id"]
    own = call(ctx, "create_long_term_memory", content="The user prefers tea to coffee.")
    shared = call(ctx, "create_long_term_memory", content="The user's name is Mika.", scope="global")
    own_id = int(own.text.split("#")[1].split()[0])
    shared_id = int(shared.text.split("#")[1].split()[0])
    assert own.text == f"Saved memory #{own_id} (for you): The user prefers tea to coffee."
    assert own.notice == "Remembered: The user prefers tea to coffee."
    assert "for all characters" in shared.text

    # The Memories page and its JSON twin list them, newest first.
    listed = api.get("/api/memories").json()
    assert [m["id"] for m in listed["memories"]] == [shared_id, own_id] and listed["total"] == 2
    assert (
        listed["memories"][1]["character_name"] == "Aria"
        and listed["memories"][1]["created_in_chat_id"] == chat_id
    )
    page = api.get("/memories").text
    assert "The user prefers tea to coffee." in page and "The user&#39;s name is Mika." in page

    # The next prompt: the global one in the system part, the character's own above the conversation.
    got = blocks(api, chat_id)
    assert got["Memories (all characters)"]["group"] == "system"
    assert f"[#{shared_id}] The user's name is Mika." in got["Memories (all characters)"]["text"]
    assert got["Aria's memories"]["group"] == "above_conversation"
    assert f"[#{own_id}] The user prefers tea to coffee." in got["Aria's memories"]["text"]

    # Another character of the same install reads the global memory but not Aria's.
    other = new_chat(api, [setup["kaito"]["id"]])
    theirs = blocks(api, other["id"])
    assert (
        "Memories (all characters)" in theirs
        and "Kaito's memories" not in theirs
        and "Aria's memories" not in theirs
    )

    updated = call(ctx, "update_long_term_memory", memory_id=own_id, content="The user prefers green tea.")
    assert updated.text == f"Updated memory #{own_id}: The user prefers green tea."
    assert f"[#{own_id}] The user prefers green tea." in blocks(api, chat_id)["Aria's memories"]["text"]

    deleted = call(ctx, "update_long_term_memory", memory_id=own_id, content="  ")
    assert (
        deleted.text == f"Deleted memory #{own_id}."
        and deleted.notice == "Forgot: The user prefers green tea."
    )
    assert "Aria's memories" not in blocks(api, chat_id)
    assert [m["id"] for m in api.get("/api/memories").json()["memories"]] == [shared_id]


def test_another_characters_memory_is_refused_and_unknown_ids_too(sugo, api, setup):
    theirs = api.post(
        "/api/memories", json={"content": "Kaito owes the user a song.", "character_id": setup["kaito"]["id"]}
    )
    assert theirs.status_code == 201
    memory_id = theirs.json()["id"]
    with pytest.raises(ToolError, match="belongs to another character"):
        call(setup["ctx"], "update_long_term_memory", memory_id=memory_id, content="")
    with pytest.raises(ToolError, match="belongs to another character"):
        call(setup["ctx"], "update_long_term_memory", memory_id=memory_id, content="Changed.")
    with pytest.raises(ToolError, match="There is no memory #999"):
        call(setup["ctx"], "update_long_term_memory", memory_id=999, content="x")
    with Session(sugo.engine) as session:
        assert session.get(LongTermMemory, memory_id).content == "Kaito owes the user a song."


def test_bad_arguments_never_reach_the_handler(setup):
    tool = TOOLS.get("create_long_term_memory")
    for bad in ({"content": "x" * 1001}, {"content": ""}, {"content": "ok", "scope": "everyone"}):
        with pytest.raises(ValidationError):
            tool.args.model_validate(bad)
    stm = TOOLS.get("update_short_term_memory")
    for bad in (
        {"add": [{"content": "x" * 501}]},
        {"add": [{"content": "a", "expires_after_replies": 0}]},
        {"add": [{"content": "a"}] * 21},
        {"add": [{"content": "a", "expires_at": "next week"}]},
    ):
        with pytest.raises(ValidationError):
            stm.args.model_validate(bad)


def test_the_limits_refuse_with_a_sentence_naming_them(sugo, api, setup):
    aria_id = setup["aria"]["id"]
    with Session(sugo.engine) as session:
        session.add_all(LongTermMemory(character_id=None, content=f"global {i}") for i in range(200))
        session.add_all(LongTermMemory(character_id=aria_id, content=f"own {i}") for i in range(200))
        session.commit()
    with pytest.raises(ToolError, match="limit of 200 memories for all characters"):
        call(setup["ctx"], "create_long_term_memory", content="One more.", scope="global")
    with pytest.raises(ToolError, match="Aria has reached the limit of 200 memories"):
        call(setup["ctx"], "create_long_term_memory", content="One more.")
    r = api.post("/api/memories", json={"content": "One more.", "character_id": None})
    assert r.status_code == 400 and "limit of 200" in r.json()["detail"]
    r = api.post(
        "/memories", data={"content": "One more.", "scope": str(aria_id)}, headers={"HX-Request": "true"}
    )
    assert r.status_code == 400 and "Aria has reached the limit of 200 memories" in r.text
    with Session(sugo.engine) as session:
        assert len(session.exec(select(LongTermMemory)).all()) == 400
    # Kaito has room of his own.
    r = api.post("/api/memories", json={"content": "Kaito's first.", "character_id": setup["kaito"]["id"]})
    assert r.status_code == 201
    # The page's other refusals: no text, too long.
    r = api.post("/memories", data={"content": "  ", "scope": "global"}, headers={"HX-Request": "true"})
    assert r.status_code == 400 and "A memory needs some text." in r.text
    r = api.put("/api/memories/999999", json={"content": "x"})
    assert r.status_code == 404


def test_the_memories_page_adds_edits_deletes_and_undoes(sugo, api, setup):
    hx = {"HX-Request": "true"}
    r = api.post("/memories", data={"content": "Likes <b>storms</b>.", "scope": "global"}, headers=hx)
    assert r.status_code == 200 and "Added memory #" in r.text
    assert "Likes &lt;b&gt;storms&lt;/b&gt;." in r.text and "<b>storms" not in r.text  # model text is escaped
    memory_id = api.get("/api/memories").json()["memories"][0]["id"]
    r = api.post(f"/memories/{memory_id}", data={"content": "Likes thunderstorms."}, headers=hx)
    assert "Saved." in r.text and "Likes thunderstorms." in r.text
    r = api.post(f"/memories/{memory_id}/delete", headers=hx)
    assert "Deleted memory" in r.text and "Undo" in r.text
    assert api.get("/api/memories").json()["total"] == 0
    r = api.post("/memories/restore", data={"content": "Likes thunderstorms.", "scope": "global"}, headers=hx)
    assert "Restored." in r.text
    assert [m["content"] for m in api.get("/api/memories").json()["memories"]] == ["Likes thunderstorms."]
    filtered = api.get("/api/memories", params={"show": str(setup["aria"]["id"])}).json()
    assert filtered["total"] == 0
    assert api.get("/api/memories", params={"show": "global"}).json()["total"] == 1


def test_short_term_memory_expires_by_replies(sugo, api, models, setup):
    chat_id = setup["chat"]["id"]
    result = call(
        setup["ctx"],
        "update_short_term_memory",
        add=[{"content": "The door is locked.", "expires_after_replies": 1}, {"content": "It is raining."}],
    )
    assert result.notice == "Short-term memory: 2 added"
    locked_id = int(result.text.split("#")[1].split(":")[0])
    # Written during a reply: that reply does not count against it.
    during = call(
        context(sugo, chat_id, setup["aria"]["id"], message_id=1),
        "update_short_term_memory",
        add=[{"content": "The lamp is lit.", "expires_after_replies": 1}],
    )
    assert "Added #" in during.text
    got = blocks(api, chat_id)["Short-term memory"]
    assert got["group"] == "above_conversation"
    assert f"[#{locked_id}] The door is locked." in got["text"] and "It is raining." in got["text"]

    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Shall we go?"})
    assert read_sse(r)[-1][0] == "done"
    # The reply was counted in the background: the door note is gone, from the prompt and the table.
    wait_for(
        lambda: "The door is locked." not in blocks(api, chat_id)["Short-term memory"]["text"], what="expiry"
    )
    text = blocks(api, chat_id)["Short-term memory"]["text"]
    assert "It is raining." in text and "The lamp is lit." in text
    with Session(sugo.engine) as session:
        assert session.get(ShortTermMemory, locked_id) is None
    service.count_reply(sugo.engine, chat_id)  # a second reply: the lamp note has now been read once
    assert "The lamp is lit." not in blocks(api, chat_id)["Short-term memory"]["text"]


def test_short_term_memory_expires_by_date_and_refuses_a_past_date(sugo, api, setup):
    chat_id, aria_id = setup["chat"]["id"], setup["aria"]["id"]
    then = datetime.now(UTC) - timedelta(days=2)
    call(
        context(sugo, chat_id, aria_id, now=then),
        "update_short_term_memory",
        add=[{"content": "The market is open today.", "expires_at": (then + timedelta(days=1)).isoformat()}],
    )
    call(
        setup["ctx"],
        "update_short_term_memory",
        add=[
            {
                "content": "The guests arrive tomorrow.",
                "expires_at": (datetime.now(UTC) + timedelta(days=1)).isoformat(),
            }
        ],
    )
    text = blocks(api, chat_id)["Short-term memory"]["text"]
    assert "The guests arrive tomorrow." in text and "The market is open today." not in text
    with pytest.raises(ToolError, match="expires_at is in the past"):
        call(
            setup["ctx"],
            "update_short_term_memory",
            add=[{"content": "Late.", "expires_at": "2020-01-01T00:00:00Z"}],
        )
    assert [i["content"] for i in api.get(f"/api/chats/{chat_id}/short-term-memory").json()] == [
        "The guests arrive tomorrow."
    ]


def test_short_term_limit_removal_and_unknown_ids(sugo, api, setup):
    ctx, chat_id = setup["ctx"], setup["chat"]["id"]
    call(ctx, "update_short_term_memory", add=[{"content": f"note {i}"} for i in range(20)])
    with pytest.raises(ToolError, match="at most 20 items"):
        call(ctx, "update_short_term_memory", add=[{"content": "one more"}])
    ids = [i["id"] for i in api.get(f"/api/chats/{chat_id}/short-term-memory").json()]
    with pytest.raises(ToolError, match="no item #99999; nothing was changed"):
        call(ctx, "update_short_term_memory", remove=[ids[0], 99999])
    assert len(api.get(f"/api/chats/{chat_id}/short-term-memory").json()) == 20
    # Removing makes room for what the same call adds.
    result = call(ctx, "update_short_term_memory", remove=[ids[0]], add=[{"content": "one more"}])
    assert result.notice == "Short-term memory: 1 added, 1 removed" and f"Removed #{ids[0]}." in result.text
    # Another chat's items are not this chat's to remove.
    other = new_chat(api, [setup["aria"]["id"]])
    with pytest.raises(ToolError, match="no item"):
        call(context(sugo, other["id"], setup["aria"]["id"]), "update_short_term_memory", remove=[ids[1]])


def test_chat_settings_lists_short_term_memory_with_delete_and_clear(sugo, api, setup):
    chat_id = setup["chat"]["id"]
    call(
        setup["ctx"],
        "update_short_term_memory",
        add=[{"content": "Hide the <key>."}, {"content": "Find the map."}],
    )
    items = api.get(f"/api/chats/{chat_id}/short-term-memory").json()
    page = api.get(f"/chats/{chat_id}/settings").text
    assert (
        'id="short-term-memory-section"' in page
        and "Hide the &lt;key&gt;." in page
        and "Find the map." in page
    )
    r = api.post(
        f"/chats/{chat_id}/short-term-memory/{items[0]['id']}/delete", headers={"HX-Request": "true"}
    )
    assert (
        r.status_code == 200
        and "Removed." in r.text
        and "Hide the" not in r.text
        and "Find the map." in r.text
    )
    r = api.post(
        f"/chats/{chat_id}/short-term-memory/{items[0]['id']}/delete", headers={"HX-Request": "true"}
    )
    assert r.status_code == 404
    r = api.post(f"/chats/{chat_id}/short-term-memory/clear", headers={"HX-Request": "true"})
    assert "Cleared 1 item." in r.text and "Nothing kept for this chat." in r.text
    assert api.get(f"/api/chats/{chat_id}/short-term-memory").json() == []
    assert "Short-term memory" not in blocks(api, chat_id)


def test_out_of_range_filters_and_owners_are_refused_calmly(api, setup):
    huge = str(2**70)
    assert api.get("/api/memories", params={"show": huge}).status_code == 400
    assert api.get("/api/memories", params={"offset": 2**62}).json()["memories"] == []
    r = api.get("/memories", params={"show": "nobody"}, headers={"HX-Request": "true"})
    assert r.status_code == 400 and "Show: choose all, global, or a character." in r.text
    r = api.post("/memories", data={"content": "x", "scope": huge}, headers={"HX-Request": "true"})
    assert r.status_code == 400 and "Choose who keeps the memory" in r.text
    r = api.post("/memories", data={"content": "x", "scope": "999"}, headers={"HX-Request": "true"})
    assert r.status_code == 404 and "Character 999 does not exist." in r.text


def test_deleting_a_character_or_a_chat_takes_its_memories_along(sugo, api, setup):
    ctx, chat_id = setup["ctx"], setup["chat"]["id"]
    call(ctx, "create_long_term_memory", content="Aria's own fact.")
    call(ctx, "create_long_term_memory", content="A fact for everyone.", scope="global")
    call(ctx, "update_short_term_memory", add=[{"content": "A note of this chat."}])
    assert api.delete(f"/api/chats/{chat_id}").status_code in (200, 204)
    with Session(sugo.engine) as session:
        assert session.exec(select(ShortTermMemory)).all() == []
        kept = session.exec(select(LongTermMemory)).all()
    assert {m.content for m in kept} == {"Aria's own fact.", "A fact for everyone."}
    assert {m.created_in_chat_id for m in kept} == {None}  # the chat is gone; the memories stay
    assert api.delete(f"/api/characters/{setup['aria']['id']}").status_code in (200, 204)
    assert [m["content"] for m in api.get("/api/memories").json()["memories"]] == ["A fact for everyone."]

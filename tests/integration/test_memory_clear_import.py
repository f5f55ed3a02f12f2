"""Clear all, Import and the pause switch in the memory viewer (issue 10, finding 2): Clear all,
then Import of the file just exported, then a reply leaves each memory once, in the store, in the
recall block sent to the model and in search; paused, Clear all stays cleared after a reply."""

import html
import json
import re

from sqlmodel import Session

from app.chats.service import new_message
from app.memory.recall.jobs import embed_chat
from tests.conftest import add_character, add_connection, new_chat, read_sse

FACT = "My sister Elowen hid the brass key inside the old clock tower, behind the third gear."
QUESTION = "Where did Elowen hide the brass key?"
HX = {"HX-Request": "true"}


def _chat_with_memories(api, sugo, models) -> int:
    add_connection(api, models, context_size=16384)
    char = add_character(api)
    cid = new_chat(api, [char["id"]], mode="conversation")["id"]
    with Session(sugo.engine) as s:
        for i in range(1, 121):
            user = i % 2 == 0
            text = (
                FACT
                if i == 20
                else (
                    f"We keep walking along the coast road, day {i}."
                    if user
                    else f"The wind picks up over the dunes, hour {i}."
                )
            )
            s.add(new_message(cid, "user" if user else "assistant", "Rowan" if user else "Aria", [text]))
        s.commit()
    embed_chat(sugo.services, cid)
    return cid


def _reply(api, models, sugo, cid: int, content: str) -> str:
    """A reply, then the memory job it schedules (run here: the app's job queue is paused); the
    recall block of the request the model received."""
    events = read_sse(api.post(f"/api/chats/{cid}/generate", json={"action": "send", "content": content}))
    assert events[-1][0] == "done", events[-1]
    assert sugo.services.queue.pending("memory.embed_chat", chat_id=cid)
    embed_chat(sugo.services, cid)
    return "\n".join(
        m["content"] for m in models.last_request.json["messages"] if m["content"].startswith("<memories>")
    )


def test_clear_then_import_the_export_then_a_reply_keeps_each_memory_once(api, sugo, models):
    cid = _chat_with_memories(api, sugo, models)
    exported = api.get(f"/api/chats/{cid}/memories/export")
    texts = [c["content"] for c in exported.json()["data"]["chunks"]]
    count = len(texts)
    assert count > 5 and any(FACT in t for t in texts)

    cleared = api.post(f"/chats/{cid}/memories/clear", headers=HX)
    assert cleared.status_code == 200 and f"Removed {count} memories" in cleared.text
    assert "made from them again after the next reply" in cleared.text  # says plainly that it will not last
    imported = api.post(
        f"/chats/{cid}/memories/import", files={"file": ("m.marinara.json", exported.content)}, headers=HX
    )
    assert imported.status_code == 200
    assert f"Imported {count} ({count} matching this chat&#39;s messages), skipped 0" in imported.text

    sugo.services.queue.pause()
    try:
        _reply(api, models, sugo, cid, "Let us rest a while.")
        memories = api.get(f"/api/chats/{cid}/memories").json()
        contents = [m["content"] for m in memories]
        # Each once (a reply may move the window far enough for the messages to make a new one).
        assert len(contents) == len(set(contents)) and all(contents.count(t) == 1 for t in texts)
        assert not any(m["imported"] for m in memories)  # linked to the messages, as if made here

        block = _reply(api, models, sugo, cid, QUESTION)
        assert block.count(FACT) == 1
        bodies = block.split("--- Memory ")[1:]
        assert bodies and len({b.split("---\n", 1)[1].strip() for b in bodies}) == len(bodies)
        found = api.get(f"/api/chats/{cid}/memories/search", params={"q": QUESTION}).json()["results"]
        assert found and len({r["content"] for r in found}) == len(found)
        page = api.get(f"/chats/{cid}/memories/search", params={"q": QUESTION}, headers=HX)
        assert (
            html.unescape(re.sub(r"</?mark>", "", page.text)).count(FACT[:60]) == 1
        )  # words found are marked
        contents = [m["content"] for m in api.get(f"/api/chats/{cid}/memories").json()]
        assert len(contents) == len(set(contents))
    finally:
        sugo.services.queue.resume()


def test_paused_chunking_keeps_clear_all_cleared_after_a_reply(api, sugo, models):
    cid = _chat_with_memories(api, sugo, models)
    count = len(api.get(f"/api/chats/{cid}/memories").json())
    paused = api.post(f"/chats/{cid}/memories/chunking", data={"paused": "true"}, headers=HX)
    assert (
        paused.status_code == 200
        and "Making memories is paused" in paused.text
        and "<html" not in paused.text
    )
    assert 'id="memory-chunking-paused" checked' in api.get(f"/chats/{cid}/settings").text
    cleared = api.post(f"/chats/{cid}/memories/clear", headers=HX)
    assert "made from them again" not in cleared.text

    sugo.services.queue.pause()
    try:
        assert _reply(api, models, sugo, cid, QUESTION) == ""
        assert api.get(f"/api/chats/{cid}/memories").json() == []
        # Resumed, the messages make them again.
        api.post(f"/chats/{cid}/memories/chunking", data={"paused": "false"}, headers=HX)
        embed_chat(sugo.services, cid)
        assert FACT in _reply(api, models, sugo, cid, QUESTION)
        assert len(api.get(f"/api/chats/{cid}/memories").json()) >= count
    finally:
        sugo.services.queue.resume()


def test_the_same_text_twice_in_the_store_enters_the_prompt_and_search_once(api, sugo, models):
    """A file whose times differ from the chat's own memories is not a duplicate by Marinara's rule
    (first time, last time, text), so its copies stay beside them, unlinked: recall and search still
    give each text once."""
    cid = _chat_with_memories(api, sugo, models)
    doc = api.get(f"/api/chats/{cid}/memories/export").json()
    for chunk in doc["data"]["chunks"]:
        chunk["firstMessageAt"] = chunk["lastMessageAt"] = "2026-01-02T03:04:05.000Z"
    result = api.post(
        f"/api/chats/{cid}/memories/import", files={"file": ("m.marinara.json", json.dumps(doc))}
    ).json()
    count = len(doc["data"]["chunks"])
    assert result == {"imported": count, "skipped": 0, "queued": 0, "linked": 0}
    contents = [m["content"] for m in api.get(f"/api/chats/{cid}/memories").json()]
    assert contents.count(next(t for t in contents if FACT in t)) == 2

    sugo.services.queue.pause()
    try:
        assert _reply(api, models, sugo, cid, QUESTION).count(FACT) == 1
    finally:
        sugo.services.queue.resume()
    found = api.get(f"/api/chats/{cid}/memories/search", params={"q": QUESTION}).json()["results"]
    assert found and len({r["content"] for r in found}) == len(found)

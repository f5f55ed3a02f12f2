"""Memories right after an import or a branch (issue 13, acceptance 1): a 600-message SillyTavern
chat is searchable without a reply, a restart or the sweep; a branch gets its memories at once;
Rebuild on a chat without memories makes them."""

import json
from datetime import datetime, timedelta

from sqlmodel import Session

from app.chats.service import new_message
from tests.conftest import add_character, hold_background, new_chat
from tests.support.waiting import wait_for

FACT = (
    40,
    "My grandmother painted the lighthouse on Kestrel Point a deep cobalt blue in the spring of 1962.",
)
QUESTION = "What colour did the grandmother paint the lighthouse on Kestrel Point?"
# Generous: only a hung job stops the test; how fast it is goes in bench/recall_ready.py.
BOUND_S = 300


def long_chat_jsonl(n: int = 600) -> bytes:
    """A SillyTavern chat of `n` messages, one day of talk per 40, FACT among the oldest."""
    start = datetime(2024, 3, 1, 9, 0)
    lines = [
        {
            "user_name": "Rowan",
            "character_name": "Mirela",
            "create_date": start.isoformat(),
            "chat_metadata": {},
        }
    ]
    topics = [
        "the harbour market",
        "the rain over the hills",
        "the old mill",
        "the choir practice",
        "the ferry timetable",
        "the bakery on the square",
        "the broken fence",
        "the village fair",
    ]
    for i in range(n):
        user = i % 2 == 0
        text = (
            FACT[1]
            if i == FACT[0]
            else (
                f"Day {i // 40 + 1}: did you hear about {topics[i % len(topics)]}? Message {i}."
                if user
                else f"I did, and {topics[(i * 3) % len(topics)]} reminded me of something, number {i}."
            )
        )
        lines.append(
            {
                "name": "Rowan" if user else "Mirela",
                "is_user": user,
                "is_system": False,
                "send_date": (start + timedelta(days=i // 40, minutes=i)).isoformat(),
                "mes": text,
            }
        )
    return "\n".join(json.dumps(line) for line in lines).encode()


def _finds_fact(api, chat_id: int) -> bool:
    r = api.get(f"/api/chats/{chat_id}/memories/search", params={"q": QUESTION, "k": 5})
    assert r.status_code == 200, r.text
    return any(
        "cobalt blue" in hit["content"] and hit["similarity"] is not None for hit in r.json()["results"]
    )


def _all_embedded(api, chat_id: int) -> dict | None:
    status = api.get(f"/api/chats/{chat_id}/memories/status").json()
    return status if status["count"] and status["building"] is None else None


def _import(api) -> int:
    add_character(api, "Mirela")
    r = api.post("/api/chats/import", files={"file": ("long.jsonl", long_chat_jsonl())})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_an_imported_chat_is_searchable_without_a_reply(sugo, api):
    chat_id = _import(api)
    # Found by its vectors (similarity set), not by its words alone while the embedding waits.
    wait_for(
        lambda: _finds_fact(api, chat_id), timeout=BOUND_S, interval=0.5, what="the fact found by search"
    )
    status = wait_for(
        lambda: _all_embedded(api, chat_id), timeout=BOUND_S, interval=0.5, what="every memory embedded"
    )
    assert status["statuses"]["vectorized"] == status["count"] > 20
    assert len(api.get(f"/api/chats/{chat_id}/messages").json()) == 600  # nothing was sent


def test_the_page_import_builds_memories_too(sugo, api):
    add_character(api, "Mirela")
    r = api.post(
        "/chats/import", files={"file": ("long.jsonl", long_chat_jsonl(200))}, headers={"HX-Request": "true"}
    )
    assert r.status_code == 204, r.text
    chat_id = int(r.headers["HX-Redirect"].rsplit("/", 1)[1])
    wait_for(
        lambda: _all_embedded(api, chat_id), timeout=BOUND_S, interval=0.5, what="the page import's memories"
    )


def test_a_branch_has_its_memories_at_once(sugo, api):
    chat_id = _import(api)
    messages = api.get(f"/api/chats/{chat_id}/messages").json()
    r = api.post(f"/api/chats/{chat_id}/messages/{messages[300]['id']}/branch")
    assert r.status_code == 201, r.text
    branch = r.json()["id"]
    wait_for(
        lambda: _finds_fact(api, branch), timeout=BOUND_S, interval=0.5, what="the fact found in the branch"
    )
    status = wait_for(
        lambda: _all_embedded(api, branch), timeout=BOUND_S, interval=0.5, what="the branch embedded"
    )
    source_ids = {m["id"] for m in messages}
    memories = api.get(f"/api/chats/{branch}/memories").json()
    assert memories and not source_ids & {
        i for c in memories for i in c["message_ids"]
    }  # made from its copies
    assert status["count"] == len(memories)


def test_rebuild_on_a_chat_without_memories_makes_them(sugo, api):
    char = add_character(api, "Mirela")
    chat = new_chat(api, [char["id"]])
    # Written straight to the database: no job is asked for, as after an older version's import.
    with Session(sugo.engine) as s:
        for i in range(120):
            user = i % 2 == 0
            text = FACT[1] if i == FACT[0] else f"We talk about the weather on the coast, turn {i}."
            msg = new_message(
                chat["id"], "user" if user else "assistant", "Rowan" if user else "Mirela", [text]
            )
            msg.character_id = None if user else char["id"]
            s.add(msg)
        s.commit()
    assert api.get(f"/api/chats/{chat['id']}/memories").json() == []
    assert (
        "Make memories from the messages with all-MiniLM-L6-v2?"
        in api.get(f"/chats/{chat['id']}/memories").text
    )
    r = api.post(f"/api/chats/{chat['id']}/memories/rebuild")
    assert r.status_code == 202 and r.json()["making"] is True, r.text

    def finished():
        rebuild = api.get(f"/api/chats/{chat['id']}/memories/status").json()["rebuild"]
        return rebuild if not rebuild["running"] else None

    rebuild = wait_for(finished, timeout=BOUND_S, interval=0.2, what="the rebuild to end")
    assert rebuild["error"] is None and not rebuild["stopped"] and rebuild["done"] == rebuild["total"] > 0
    status = api.get(f"/api/chats/{chat['id']}/memories/status").json()
    assert status["statuses"]["vectorized"] == status["count"] == rebuild["total"]
    assert _finds_fact(api, chat["id"])
    page = api.get(f"/chats/{chat['id']}/memories").text
    assert f"Made {rebuild['total']} memories from the messages" in page


def test_the_viewer_says_memories_are_being_built(sugo, api):
    """While the job is held back (the queue paused), the viewer and the status say "building",
    not "0 memories", and keep polling; once it runs, the count."""
    add_character(api, "Mirela")
    with hold_background(sugo):
        r = api.post("/api/chats/import", files={"file": ("long.jsonl", long_chat_jsonl(200))})
        chat_id = r.json()["id"]
        assert api.get(f"/api/chats/{chat_id}/memories/status").json()["building"] == {"done": 0, "total": 0}
        page = api.get(f"/chats/{chat_id}/memories").text
        assert "Building memories: reading the messages" in page and 'id="memory-count"' not in page
        assert f'hx-get="/chats/{chat_id}/memories/status"' in page
    wait_for(lambda: _all_embedded(api, chat_id), timeout=BOUND_S, interval=0.5, what="the memories built")
    page = api.get(f"/chats/{chat_id}/memories").text
    assert "Building memories" not in page and 'id="memory-count"' in page

"""Memory Recall after messages change (issue 10). Finding 1: a message edited, hidden, swiped or
deleted never reaches the model as a recalled memory, and its chat's memory sync is scheduled at
once; the job is kept from running (the scheduler paused), so recall itself must leave the old
text out. Finding 11: the sweep and the per-chat job never sync one chat at once."""

import threading
import time

from sqlmodel import Session, select

from app.chats.models import Message
from app.chats.service import new_message
from app.memory.recall.jobs import embed_chat, schedule_embed_chat, sweep
from app.memory.recall.models import MemoryChunk
from tests.conftest import ON_POSTGRES, add_character, add_connection, new_chat, read_sse
from tests.support.waiting import wait_for

# change: (message number, its text, the question that recalls it, words only that text holds)
SECRETS = {
    "edit": (
        8,
        "My sister Elowen hid the brass key inside the old clock tower, behind the third gear.",
        "Where did Elowen hide the brass key?",
        "behind the third gear",
    ),
    "hide": (
        13,
        "The smuggler Dorrik keeps his ledger under the loose floorboard of the chapel.",
        "Where does the smuggler Dorrik keep his ledger?",
        "loose floorboard of the chapel",
    ),
    "swipe": (
        23,
        "Captain Ysolde buried the emerald crown beneath the lighthouse steps.",
        "Where did Captain Ysolde bury the emerald crown?",
        "beneath the lighthouse steps",
    ),
    "delete": (
        28,
        "The password to the vault is marigold seventeen, whispered by old Tamsin.",
        "What is the password to old Tamsin's vault?",
        "marigold seventeen",
    ),
}


def _fill(sugo, chat_id: int, character_id: int, n: int = 120) -> dict[int, int]:
    """n messages after the greeting, the secrets among the oldest; message number -> id."""
    by_number = {}
    at = {number: (change, text) for change, (number, text, _, _) in SECRETS.items()}
    with Session(sugo.engine) as s:
        for i in range(1, n + 1):
            user = i % 2 == 0
            change, text = at.get(i, (None, None))
            text = text or (
                f"We keep walking along the coast road, day {i}."
                if user
                else f"The wind picks up over the dunes, hour {i}."
            )
            versions = [text, "The gulls cry over the empty harbour."] if change == "swipe" else [text]
            msg = new_message(chat_id, "user" if user else "assistant", "Rowan" if user else "Aria", versions)
            msg.character_id = None if user else character_id
            s.add(msg)
            s.flush()
            by_number[i] = msg.id
        s.commit()
    return by_number


def _memories_sent(api, models, chat_id: int, question: str) -> str:
    """Ask, and return the recall block of the request the model received ("" for none)."""
    events = read_sse(
        api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": question})
    )
    assert events[-1][0] == "done", events[-1]
    sent = models.last_request.json["messages"]
    return "\n".join(m["content"] for m in sent if m["content"].startswith("<memories>"))


def _change(api, chat_id: int, change: str, message_id: int) -> None:
    """Through the page routes, as the chat page sends them."""
    base = f"/chats/{chat_id}/messages/{message_id}"
    r = {
        "edit": lambda: api.post(f"{base}/edit", data={"content": "We rested by the harbour wall."}),
        "hide": lambda: api.post(f"{base}/hide"),
        "swipe": lambda: api.post(f"{base}/swipe", params={"to": 1}),
        "delete": lambda: api.post(f"{base}/delete"),
    }[change]()
    assert r.status_code == 200, r.text


def test_an_edited_hidden_swiped_or_deleted_message_is_not_recalled_before_the_sync_runs(api, sugo, models):
    add_connection(api, models, context_size=16384)
    char = add_character(api)
    chat = new_chat(api, [char["id"]], mode="conversation")
    cid = chat["id"]
    ids = _fill(sugo, cid, char["id"])
    embed_chat(sugo.services, cid)
    queue = sugo.services.queue
    queue.pause()  # jobs may be added, none runs
    try:
        for change, (number, _, question, words) in SECRETS.items():
            assert words in _memories_sent(api, models, cid, question), change  # recalled before the change
            queue.cancel("memory.embed_chat", chat_id=cid)  # the reply scheduled one
            _change(api, cid, change, ids[number])
            assert queue.pending("memory.embed_chat", chat_id=cid), (
                f"{change} did not schedule the memory sync"
            )

            assert words not in _memories_sent(api, models, cid, question), change
            peek = api.get(f"/chats/{cid}/prompt")
            assert peek.status_code == 200 and words not in peek.text, change
            found = api.get(f"/chats/{cid}/memories/search", params={"q": question})
            assert found.status_code == 200 and words not in found.text, change
            found = api.get(f"/api/chats/{cid}/memories/search", params={"q": question}).json()
            assert not any(words in r["content"] for r in found["results"]), change
        with Session(sugo.engine) as s:  # the job has not run: the old chunks are all still stored
            stored = "\n".join(s.exec(select(MemoryChunk.content).where(MemoryChunk.chat_id == cid)))
        assert all(words in stored for _, _, _, words in SECRETS.values())
    finally:
        queue.resume()
    # Once the scheduler runs, the scheduled sync drops them from the store too.
    deadline = time.monotonic() + 60
    while True:
        with Session(sugo.engine) as s:
            stored = "\n".join(s.exec(select(MemoryChunk.content).where(MemoryChunk.chat_id == cid)))
        if not any(words in stored for _, _, _, words in SECRETS.values()):
            break
        assert time.monotonic() < deadline, "the scheduled memory sync did not run"
        time.sleep(0.1)


def test_the_json_api_schedules_the_memory_sync_for_each_change(api, sugo):
    char = add_character(api)
    cid = new_chat(api, [char["id"]])["id"]
    with Session(sugo.engine) as s:
        msg = new_message(cid, "assistant", "Aria", ["One.", "Two."])
        s.add(msg)
        s.commit()
        mid = msg.id
    queue = sugo.services.queue
    queue.pause()
    try:
        for call in (
            lambda: api.patch(f"/api/chats/{cid}/messages/{mid}", json={"content": "One, edited."}),
            lambda: api.patch(f"/api/chats/{cid}/messages/{mid}", json={"hidden": True}),
            lambda: api.post(f"/api/chats/{cid}/messages/{mid}/swipe", json={"index": 1}),
            lambda: api.delete(f"/api/chats/{cid}/messages/{mid}"),
        ):
            queue.cancel("memory.embed_chat", chat_id=cid)
            assert call().status_code in (200, 204)
            assert queue.pending("memory.embed_chat", chat_id=cid)
    finally:
        queue.resume()
    with Session(sugo.engine) as s:
        assert s.get(Message, mid) is None


def test_the_sweep_and_the_chat_job_never_sync_one_chat_at_once(api, sugo, models):
    """Finding 11: the per-chat job is held in the middle of its embedding call; a sweep meanwhile
    neither embeds the same chunks again nor waits for it, and the job goes once more for it."""
    add_connection(api, models, embedding_model="test-embedding")
    char = add_character(api)
    cid = new_chat(api, [char["id"]])["id"]
    with Session(sugo.engine) as s:
        for i in range(120):
            s.add(
                new_message(
                    cid,
                    "user" if i % 2 else "assistant",
                    "Rowan" if i % 2 else "Aria",
                    [f"We rest, hour {i}."],
                )
            )
        s.commit()

    def embedding_calls() -> int:
        return sum(1 for r in list(models.requests) if r.path == "/v1/embeddings")

    gate = models.embedding_gate = threading.Event()
    job = threading.Thread(target=embed_chat, args=(sugo.services, cid))
    sweeper = threading.Thread(target=sweep, args=(sugo.services,))
    try:
        job.start()
        wait_for(
            lambda: embedding_calls() == 1, timeout=60, what="the job did not call the embeddings server"
        )
        assert sugo.services.recall.syncs.busy(cid)
        sweeper.start()
        wait_for(
            lambda: not sweeper.is_alive() or embedding_calls() > 1,
            timeout=60,
            what="the sweep neither ended nor embedded",
        )
        assert embedding_calls() == 1, "the sweep embedded the chat the job was embedding"
    finally:
        gate.set()
        job.join(60)
        sweeper.join(60)
        models.embedding_gate = None
    assert not sugo.services.recall.syncs.busy(cid)
    with Session(sugo.engine) as s:
        chunks = list(s.exec(select(MemoryChunk).where(MemoryChunk.chat_id == cid)))
    assert chunks and all(c.status == "vectorized" for c in chunks)
    # The job's second round (for the sweep) found nothing left to do.
    assert embedding_calls() == 1 and embed_chat(sugo.services, cid) == (0, 0, 0)


def test_a_message_deleted_while_its_chat_is_being_synced_is_not_left_for_the_sweep(api, sugo, models):
    """The scheduled sync is held in its embedding call when a message it chunked is deleted: the
    sync the delete schedules must not be dropped by the scheduler (one instance per job id), and
    the running one goes again, so the deleted text leaves the store without waiting for a sweep."""
    add_connection(api, models, embedding_model="test-embedding")
    char = add_character(api)
    cid = new_chat(api, [char["id"]])["id"]
    ids = _fill(sugo, cid, char["id"])
    number, _, _, words = SECRETS["delete"]
    syncs = sugo.services.recall.syncs

    gate = models.embedding_gate = threading.Event()
    try:
        schedule_embed_chat(sugo.services, cid)
        wait_for(
            lambda: any(r.path == "/v1/embeddings" for r in list(models.requests)),
            timeout=60,
            what="the sync did not start",
        )
        assert api.post(f"/chats/{cid}/messages/{ids[number]}/delete").status_code == 200
        # In process the running sync is asked to go again; on PostgreSQL's job queue the delete's job
        # waits, queued, for the chat's lock that the running one holds (app/platform/queue.py).
        wait_for(
            lambda: (
                sugo.services.queue.pending("memory.embed_chat", chat_id=cid)
                if ON_POSTGRES
                else syncs.asked_again(cid)
            ),
            timeout=60,
            what="the sync the delete scheduled never ran",
        )
    finally:
        gate.set()
        models.embedding_gate = None

    def chunks() -> list[MemoryChunk]:
        with Session(sugo.engine) as s:
            return list(s.exec(select(MemoryChunk).where(MemoryChunk.chat_id == cid)))

    def deleted_text_gone() -> bool:
        return not any(words in c.content or ids[number] in c.message_ids for c in chunks())

    if ON_POSTGRES:  # the queued job runs once the first lets go of the chat
        wait_for(deleted_text_gone, timeout=60, what="the queued sync to drop the deleted text")
    wait_for(lambda: not syncs.busy(cid), timeout=60, what="the sync did not end")
    assert chunks() and deleted_text_gone()

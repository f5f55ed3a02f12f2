"""The prompt-source seam: a source registered in one place reaches Peek Prompt, the context grid,
the snapshot and the request the model receives, with its note; its after-reply hook and its jobs
run; a failing source is left out and named, never failing the reply."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from app.generation.reply import INTERNAL_PROMPT_ERROR
from app.memory.recall.models import MemoryChunk
from app.platform.jobs import Job
from app.prompt.core.builder import DepthNote, DynamicBlock
from app.prompt.sources import Contribution, PromptSource, PromptSources, Turn
from app.sources import default_sources
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.live import LiveSugo
from tests.support.waiting import wait_for

FACT = "Aria is secretly afraid of moths."
DOC = "The harbour ledger lists three ships."
NOTE = "Keep the tension high."


class Probe(PromptSource):
    """A throwaway source: one fixed block, one dynamic block, one depth note, a note; it records
    the replies it heard of and the runs of its job."""

    name = "probe"
    label = "Probe"

    def __init__(self) -> None:
        self.replied: list[int] = []
        self.job_runs = threading.Event()
        self.seen_windows: list[int] = []

    def contribute(self, turn: Turn) -> Contribution:
        self.seen_windows.append(len(turn.history.messages))
        return Contribution(
            fixed=(DynamicBlock("long_term_memory", "Probe facts", FACT),),
            dynamic=(DynamicBlock("retrieved_documents", "Probe document", DOC),),
            depth_notes=(DepthNote(NOTE, depth=1, label="Probe note"),),
            note=f"Probe: one fact, one document and one note for chat {turn.chat.id}.",
        )

    def after_reply(self, services, chat_id: int) -> None:
        self.replied.append(chat_id)

    def jobs(self):
        return (Job("probe.tick", lambda services: self.job_runs.set(), every_minutes=60, at_start=True),)


class Broken(PromptSource):
    name = "broken"
    label = "Broken source"

    def contribute(self, turn: Turn) -> Contribution:
        raise RuntimeError("the index file is missing")

    def after_reply(self, services, chat_id: int) -> None:
        raise RuntimeError("cannot schedule")


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
def probed(tmp_path, probe):
    sources = default_sources()
    sources.register(probe)
    with LiveSugo(tmp_path / "data", sources=sources) as live:
        yield live


def _chat(api, models):
    add_connection(api, models)
    char = add_character(api)
    return new_chat(api, [char["id"]])


def test_a_registered_source_reaches_peek_prompt_grid_snapshot_and_the_request(probed, probe, models):
    with probed.client() as api:
        chat = _chat(api, models)
        peek = api.get(f"/api/chats/{chat['id']}/prompt").json()
        blocks = {b["label"]: b for b in peek["blocks"]}
        assert blocks["Probe facts"]["group"] == "system" and blocks["Probe facts"]["text"] == FACT
        assert blocks["Probe document"]["group"] == "dynamic"
        assert blocks["Probe note (depth 1)"]["group"] == "at_depth"
        assert f"Probe: one fact, one document and one note for chat {chat['id']}." in peek["notes"]
        # The fixed block joins the one cached system message; the others sit among the turns.
        assert FACT in peek["messages"][0]["content"] and peek["messages"][0]["role"] == "system"

        page = api.get(f"/chats/{chat['id']}/prompt").text
        assert "Probe facts" in page and FACT in page and "Probe: one fact" in page

        grid = api.get(f"/api/chats/{chat['id']}/context").json()
        assert "Probe facts" in {row["label"] for row in grid["sizes"]}
        snapshot = api.get(f"/api/chats/{chat['id']}/prompt/snapshot", params={"format": "text"}).text
        assert "Probe facts" in snapshot and DOC in snapshot

        r = api.post(
            f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Where are the ships?"}
        )
        assert read_sse(r)[-1][0] == "done"
        sent = models.last_request.json["messages"]
        assert FACT in sent[0]["content"]
        contents = [m["content"] for m in sent]
        # The document just above the newest turns, the note one message before the newest.
        assert contents.index(DOC) < contents.index("Where are the ships?")
        assert contents[-2:] == [NOTE, "Where are the ships?"]
        wait_for(lambda: probe.replied == [chat["id"]], timeout=10)
        assert probe.job_runs.wait(10), "the source's job did not run at start"
        assert probed.services.scheduler.get_job("probe.tick") is not None


def test_the_registry_keeps_the_declared_order_and_refuses_a_second_name():
    sources = default_sources()
    assert sources.names() == [
        "tools",
        "game",
        "recall",
        "lore",
        "summaries",
        "day_summaries",
        "scenes",
        "character_note",
        "context_note",
        "time_awareness",
        "participant_info",
        "documents",
        "tasks",
        "long_term_memory",
        "short_term_memory",
        "chat_notes",
        "expressions",
    ]
    sources.register(Probe(), before="lore")
    assert sources.names()[2:5] == ["recall", "probe", "lore"]
    with pytest.raises(ValueError):
        sources.register(Probe())
    with pytest.raises(ValueError):
        PromptSources([Broken(), Broken()])


def test_a_failing_source_is_left_out_and_named_and_the_reply_still_comes(tmp_path, models):
    sources = default_sources()
    sources.register(Broken(), before="recall")
    with LiveSugo(tmp_path / "data", sources=sources) as live, live.client() as api:
        chat = _chat(api, models)
        peek = api.get(f"/api/chats/{chat['id']}/prompt").json()
        assert (
            "Broken source failed and was left out of this prompt (the server log has the details)."
            in peek["warnings"]
        )
        assert "the index file is missing" not in str(peek)  # the error's own text stays in the log
        r = api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Still there?"})
        assert read_sse(r)[-1][0] == "done"
        assert models.last_request.json["messages"][-1]["content"] == "Still there?"


class BadQuery(PromptSource):
    """A source whose SQL fails mid-turn, as a source reading a table another version dropped could."""

    name = "bad_query"
    label = "Bad query source"

    def history_limit(self, session, chat, settings) -> int | None:
        session.execute(text("SELECT no_such_column FROM chat"))
        return None

    def contribute(self, turn: Turn) -> Contribution:
        turn.session.execute(text("SELECT no_such_column FROM chat"))
        return Contribution()


@pytest.mark.parametrize("on", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_source_whose_sql_fails_leaves_the_other_sources_and_the_reply_whole(on, request, tmp_path, models):
    """On PostgreSQL a failed statement aborts the transaction: without a savepoint per source, every
    source after it (and the reply's own writes) failed too."""
    sources = default_sources()
    sources.register(BadQuery(), before="recall")
    url = request.getfixturevalue("migrated_postgres_url") if on == "postgres" else None
    with LiveSugo(tmp_path / "data", sources=sources, database_url=url) as live, live.client() as api:
        chat = _chat(api, models)
        assert (
            api.post(
                f"/api/chats/{chat['id']}/memory/notes", json={"text": "Aria hates the rain."}
            ).status_code
            == 201
        )
        peek = api.get(f"/api/chats/{chat['id']}/prompt").json()
        assert [w for w in peek["warnings"] if "failed" in w] == [
            "Bad query source failed and was left out of this prompt (the server log has the details)."
        ]
        r = api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Still there?"})
        assert read_sse(r)[-1][0] == "done"
        sent = str(models.last_request.json["messages"])
        assert "Aria hates the rain." in sent  # a source after the failing one still contributed
        assert [m["role"] for m in api.get(f"/api/chats/{chat['id']}/messages").json()][-2:] == [
            "user",
            "assistant",
        ]


class Poisoning(PromptSource):
    """Keeps a row the database refuses, as a source that stores its work with the turn could."""

    name = "poisoning"
    label = "Poisoning source"

    def contribute(self, turn: Turn) -> None:
        if turn.for_reply:
            turn.session.add(MemoryChunk(chat_id=turn.chat.id, content=None, message_ids=[]))


def test_an_internal_error_building_the_prompt_shows_a_sentence_not_sql(tmp_path, models):
    """Issue 10 finding 5: the reply used to fail with "The prompt could not be built:
    (OperationalError)…" and the SQL text, in the page and stored with the message."""
    sources = default_sources()
    sources.register(Poisoning())
    with LiveSugo(tmp_path / "data", sources=sources) as live, live.client() as api:
        chat = _chat(api, models)
        events = read_sse(
            api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Hello?"})
        )
        assert events[-1][0] == "error"
        assert events[-1][1]["message"] == INTERNAL_PROMPT_ERROR
        stored = api.get(f"/api/chats/{chat['id']}/messages").json()[-1]
        page = api.get(f"/chats/{chat['id']}").text
        for shown in (str(events), str(stored), page):
            assert not any(w in shown for w in ("IntegrityError", "INSERT", "memory_chunk", "Traceback")), (
                shown[:3000]
            )
        assert stored["error"] == INTERNAL_PROMPT_ERROR

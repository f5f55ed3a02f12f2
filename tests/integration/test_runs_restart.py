"""Issue 21, item 11: every kind of run a restart can cut short is resumed to its end or closed with its
reason by the next start, never left "running". Each case starts a real Sugo process (`python -m app`),
starts the run with the test model server holding the helper's answer (the run is mid-way), SIGKILLs the
process, starts a new one on the same data folder and follows the run there over HTTP.

RESUME: Prepare existing history, Backfill Summary, day Backfill, an automatic summary, a Generate that
was waiting its turn behind a Backfill, Memory Recall's Rebuild (a row since issue 26: it goes on from the
last memory it embedded). CLOSE: Fix, Re-scan scenes, a Generate whose answer was on its way."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import Session, select

from app.chats.models import Message
from app.memory.scenes import fix, rescans
from app.memory.scenes.core.check import SCENE_CHECK_PROMPT
from app.memory.scenes.core.recap import DEFAULT_RECAP_PROMPT
from app.memory.summaries import generate
from app.memory.summaries.core.prompts import ROLEPLAY_ENTRY_PROMPT
from app.memory.summaries.models import SummaryJob, SummaryRun
from app.platform.db import make_engine
from app.platform.timeutil import utcnow
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.integration.test_summaries_days import DAY_PROMPT_START, _seed
from tests.support.model_server import ModelServer, Reply
from tests.support.process import SugoProcess
from tests.support.scenes import stored_scene
from tests.support.waiting import wait_for

AUTO = "Aria answered the traveller, and they went onward."
DAY = '```json\n{"summary": "Morning talk, an answer and a late note.", "keyDetails": ["a late note"]}\n```'
HOLD = Reply("held until the process is killed", first_delay_s=600)  # the run is mid-way while it waits
LINES = [
    ("You", "Aria, the bridge is out."),
    ("Aria", "*Aria ties the rope.* We cross here."),
    ("You", "Fine."),
]


class _Folder:
    """The data folder's database, opened beside the running process (what tests.support.scenes expects)."""

    def __init__(self, data_dir: Path) -> None:
        self.engine = make_engine(data_dir / "sugo.db")

    def session(self) -> Session:
        return Session(self.engine)


def _asked(models: ModelServer, prompt_start: str) -> list[dict]:
    return [
        r.json
        for r in models.requests
        if r.path.endswith("/chat/completions") and r.json["messages"][0]["content"].startswith(prompt_start)
    ]


def _seed_messages(db: _Folder, chat_id: int, count: int) -> None:
    """`count` more messages after the greeting, alternating the user and Aria."""
    with db.session() as s:
        for n in range(2, count + 2):
            name, role = ("You", "user") if n % 2 == 0 else ("Aria", "assistant")
            text = f"Step {n} along the road."
            s.add(
                Message(
                    chat_id=chat_id,
                    role=role,
                    name=name,
                    content=text,
                    swipes=[{"content": text, "status": "ok"}],
                )
            )
        s.commit()


def _roleplay(api, models, db: _Folder, messages: int, **settings) -> int:
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api, "Aria")["id"]])["id"]
    if settings:
        assert api.put(f"/api/chats/{chat_id}/options", json={"settings": settings}).status_code == 200
    _seed_messages(db, chat_id, messages)
    return chat_id


def _until_ended(read: Callable[[], dict], what: str) -> dict:
    """The run's status once it is no longer running (waiting its turn counts as not ended)."""
    return wait_for(
        lambda: (s := read())["status"] not in ("running", "waiting") and s,
        timeout=240,
        interval=0.1,
        what=what,
    )


@dataclass
class Case:
    name: str
    begin: Callable  # (api, models, db) -> ctx: sets up, starts the run; the helper's answer is held
    held: Callable  # (models) -> bool: the held request has arrived
    rest: tuple  # what the model answers after the restart
    after: Callable  # (api, models, db, ctx) -> None: follows the run in the new process


# RESUME ---------------------------------------------------------------------------------------------


def _begin_prepare(api, models, db):
    chat_id = _roleplay(
        api, models, db, 19, advanced_memory=True, adv_check_interval=5
    )  # windows 1–10, 11–20
    models.script(json.dumps({"ends": [{"messageNumber": 8}]}), HOLD)
    assert api.post(f"/api/chats/{chat_id}/scenes/prepare").status_code == 202
    return chat_id


def _after_prepare(api, models, db, chat_id):
    done = _until_ended(lambda: api.get(f"/api/chats/{chat_id}/scenes/prepare").json(), "Prepare to end")
    assert done["status"] == "done" and done["reason"] == "", done
    assert [s["state"] for s in api.get(f"/api/chats/{chat_id}/scenes").json()] == ["written", "written"]
    windows = [
        re.match(r"Messages to check: #(\d+)", r["messages"][1]["content"]).group(1)
        for r in _asked(models, SCENE_CHECK_PROMPT)
    ]
    assert windows == ["1", "11", "11"]  # the window the kill cut short asked again, the first never


def _begin_backfill(api, models, db):
    chat_id = _roleplay(api, models, db, 119)  # 120 messages: 1–110 are older than the tail, 3 batches
    models.script("Part 1 of the road.", HOLD)
    assert api.post(f"/api/chats/{chat_id}/summaries/backfill").status_code == 202
    return chat_id


def _after_backfill(api, models, db, chat_id):
    done = _until_ended(lambda: api.get(f"/api/chats/{chat_id}/summaries/backfill").json(), "Backfill to end")
    assert done["status"] == "done" and done["done"] == done["total"] == 3, done
    entries = api.get(f"/api/chats/{chat_id}/summaries").json()
    assert [(e["first_position"], e["last_position"]) for e in entries] == [(1, 50), (51, 100), (101, 110)]


def _begin_waiting_generate(api, models, db):
    chat_id = _begin_backfill(api, models, db)
    wait_for(
        lambda: len(_asked(models, ROLEPLAY_ENTRY_PROMPT)) == 2, timeout=240, what="the second batch asked"
    )
    r = api.post(f"/api/chats/{chat_id}/summaries/generate", json={"scope": "last", "last": 2})
    assert r.status_code == 202, r.text  # today's main refused it with 400
    assert r.json()["status"] == "waiting" and r.json()["waiting_for"] == "Backfill", r.json()
    return chat_id


def _after_waiting_generate(api, models, db, chat_id):
    backfill = _until_ended(
        lambda: api.get(f"/api/chats/{chat_id}/summaries/backfill").json(), "Backfill to end"
    )
    assert backfill["status"] == "done" and backfill["done"] == 3, backfill
    done = _until_ended(
        lambda: api.get(f"/api/chats/{chat_id}/summaries/generate").json(), "the Generate to end"
    )
    assert done["status"] == "done" and (done["first_position"], done["last_position"]) == (119, 120), done
    entries = api.get(f"/api/chats/{chat_id}/summaries").json()
    assert [(e["first_position"], e["last_position"]) for e in entries] == [
        (1, 50),
        (51, 100),
        (101, 110),
        (119, 120),
    ]
    asked = _asked(models, ROLEPLAY_ENTRY_PROMPT)
    assert asked[-1]["messages"][1]["content"].count("Step") == 2  # the Generate went after the batches


def _begin_automatic(api, models, db):
    chat_id = _roleplay(api, models, db, 0, summary_auto=True, summary_every=1)
    models.script("A reply from Aria.", HOLD)
    read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Onward, then."}))
    return chat_id


def _automatic_run(db: _Folder, chat_id: int) -> SummaryRun | None:
    with db.session() as s:
        return s.exec(
            select(SummaryRun)
            .where(SummaryRun.chat_id == chat_id, SummaryRun.kind == "automatic")
            .order_by(SummaryRun.id.desc())
        ).first()  # type: ignore[union-attr]


def _after_automatic(api, models, db, chat_id):
    run = wait_for(
        lambda: (r := _automatic_run(db, chat_id)) is not None and r.status == "done" and r,
        timeout=240,
        interval=0.1,
        what="the automatic summary to be written",
    )
    assert run.done == 1
    assert [e["content"] for e in api.get(f"/api/chats/{chat_id}/summaries").json()] == [AUTO]


def _begin_days(api, models, db):
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api, "Aria")["id"]], mode="conversation")["id"]
    _seed(db.engine, chat_id, 5)
    models.script(DAY, DAY, HOLD)
    assert api.post(f"/api/chats/{chat_id}/days/backfill").status_code == 202
    wait_for(
        lambda: len(api.get(f"/api/chats/{chat_id}/days").json()) == 2, timeout=240, what="two days written"
    )
    return chat_id


def _after_days(api, models, db, chat_id):
    done = _until_ended(
        lambda: api.get(f"/api/chats/{chat_id}/days/backfill").json(), "the day Backfill to end"
    )
    assert done["status"] == "done" and done["added"] == 3 and done["failed"] == 0, done  # main: "none"
    days = [d["date"] for d in api.get(f"/api/chats/{chat_id}/days").json()]
    assert len(days) == len(set(days)) == 5
    asked = [r["messages"][1]["content"] for r in _asked(models, DAY_PROMPT_START)]
    assert len(asked) == 6 and len(set(asked)) == 5  # only the day the kill cut short was asked twice


# CLOSE ----------------------------------------------------------------------------------------------


def _begin_fix(api, models, db):
    chat_id = _roleplay(api, models, db, 0, advanced_memory=True, adv_check_interval=100)
    # Failed scenes whose retry is far off: only Fix asks the helper for them (not the sweep at start).
    for _ in range(2):
        stored_scene(
            db,
            chat_id,
            LINES,
            state="failed",
            reason="The helper gave no answer.",
            next_attempt_at=utcnow() + timedelta(days=1),
        )
    models.script(HOLD)
    r = api.post(f"/api/chats/{chat_id}/scenes/fix")
    assert r.status_code == 202 and r.json()["run"]["status"] == "running", r.text
    return chat_id


def _after_fix(api, models, db, chat_id):
    run = api.get(f"/api/chats/{chat_id}/scenes/problems").json()["run"]
    assert (run["status"], run["reason"], run["working"]) == ("stopped", fix.RESTARTED, False), (
        run
    )  # main: "running"
    assert run["current"] == ""
    panel = api.get(f"/chats/{chat_id}/scenes/problems", headers={"HX-Request": "true"}).text
    assert fix.RESTARTED in panel and 'id="scenes-fix"' in panel  # Fix is offered again


def _begin_rescan(api, models, db):
    chat_id = _roleplay(api, models, db, 11, advanced_memory=True, adv_check_interval=5)
    models.script(HOLD)
    r = api.post(f"/api/chats/{chat_id}/scenes/rescan", json={"first": 1, "last": 12})
    assert r.status_code == 202 and r.json()["status"] == "running", r.text
    return chat_id


def _after_rescan(api, models, db, chat_id):
    status = api.get(f"/api/chats/{chat_id}/scenes/rescan").json()
    assert (status["status"], status["message"]) == ("stopped", rescans.RESTARTED), status  # main: "none"
    assert (status["first"], status["last"]) == (1, 12)
    assert api.get(f"/api/chats/{chat_id}/scenes").json() == []  # nothing was changed
    panel = api.get(f"/chats/{chat_id}/scenes/rescan", headers={"HX-Request": "true"}).text
    assert rescans.RESTARTED in panel and "every 1s" not in panel


def _begin_generate(api, models, db):
    chat_id = _roleplay(api, models, db, 5)
    models.script(HOLD)
    r = api.post(f"/api/chats/{chat_id}/summaries/generate", json={"scope": "last", "last": 3})
    assert r.status_code == 202 and r.json()["status"] == "running", r.text
    return chat_id


def _after_generate(api, models, db, chat_id):
    status = api.get(f"/api/chats/{chat_id}/summaries/generate").json()
    assert (status["status"], status["reason"]) == ("failed", generate.INTERRUPTED), status
    with db.session() as s:  # kept so, not only shown so (main left the row "running")
        assert [j.status for j in s.exec(select(SummaryJob).where(SummaryJob.chat_id == chat_id))] == [
            "failed"
        ]
    panel = api.get(f"/chats/{chat_id}/summaries", headers={"HX-Request": "true"}).text
    assert generate.INTERRUPTED in panel and 'id="summary-retry"' in panel


# Memory Recall's Rebuild ---------------------------------------------------------------------------


def _begin_rebuild(api, models, db):
    """Rebuild on a chat without memories: it makes them, and is killed in its first embedding call."""
    add_connection(api, models, embedding_model="test-embedding")
    chat_id = new_chat(api, [add_character(api, "Aria")["id"]])["id"]
    _seed_messages(db, chat_id, 119)  # older messages than the live window: memories to make
    models.embedding_gate = threading.Event()
    r = api.post(f"/api/chats/{chat_id}/memories/rebuild")
    assert r.status_code == 202 and r.json()["running"] and r.json()["making"], r.text
    return chat_id


def _after_rebuild(api, models, db, chat_id):
    gate, models.embedding_gate = models.embedding_gate, None
    gate.set()
    # The new process resumed it: it ends "done" with every memory made and embedded.
    status = wait_for(
        lambda: (
            not (s := api.get(f"/api/chats/{chat_id}/memories/status").json())["rebuild"]["running"] and s
        ),
        timeout=240,
        interval=0.1,
        what="the resumed rebuild's end",
    )
    rebuild = status["rebuild"]
    assert rebuild["status"] == "done" and rebuild["making"] and rebuild["error"] is None, rebuild
    assert rebuild["done"] == rebuild["total"] == status["count"] > 0, status
    assert status["statuses"]["vectorized"] == status["count"], status


def _embedding_held(models: ModelServer) -> bool:
    return any(r.path.endswith("/embeddings") for r in list(models.requests))


def _held(prompt_start: str, count: int = 1) -> Callable[[ModelServer], bool]:
    return lambda models: len(_asked(models, prompt_start)) >= count


CASES = [
    Case(
        "prepare",
        _begin_prepare,
        _held(SCENE_CHECK_PROMPT, 2),
        (
            json.dumps({"ends": [{"messageNumber": 15}]}),
            json.dumps({"summary": "Aria walked the road.", "participants": ["Aria"]}),
            json.dumps({"summary": "Aria walked on along the road.", "participants": ["Aria"]}),
        ),
        _after_prepare,
    ),
    Case(
        "backfill",
        _begin_backfill,
        _held(ROLEPLAY_ENTRY_PROMPT, 2),
        ("Part 2 of the road.", "Part 3 of the road."),
        _after_backfill,
    ),
    Case(
        "waiting_generate",
        _begin_waiting_generate,
        _held(ROLEPLAY_ENTRY_PROMPT, 2),
        ("Part 2 of the road.", "Part 3 of the road.", "The last two steps along the road."),
        _after_waiting_generate,
    ),
    Case("automatic", _begin_automatic, _held(ROLEPLAY_ENTRY_PROMPT), (AUTO,), _after_automatic),
    Case("day_backfill", _begin_days, _held(DAY_PROMPT_START, 3), (DAY,) * 6, _after_days),
    Case("fix", _begin_fix, _held(DEFAULT_RECAP_PROMPT[:60]), (), _after_fix),
    Case("rescan", _begin_rescan, _held(SCENE_CHECK_PROMPT), (), _after_rescan),
    Case("generate", _begin_generate, _held(ROLEPLAY_ENTRY_PROMPT), (), _after_generate),
    Case("rebuild", _begin_rebuild, _embedding_held, (), _after_rebuild),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_run_killed_midway_is_resumed_or_closed_by_the_next_start(tmp_path, models, case: Case):
    data_dir = tmp_path / "data"
    server = SugoProcess(data_dir).start()
    try:
        db = _Folder(data_dir)
        with server.client() as api:
            ctx = case.begin(api, models, db)
            wait_for(
                lambda: case.held(models), timeout=240, interval=0.05, what=f"the {case.name} run mid-way"
            )
        server.kill()
        models.script(*case.rest)
        server = SugoProcess(data_dir).start()
        with server.client() as api:
            case.after(api, models, db, ctx)
    finally:
        server.kill()


def _embedded_inputs(models: ModelServer, since: int) -> list[list[str]]:
    """The texts of each /embeddings call after the first `since` requests."""
    return [r.json["input"] for r in list(models.requests)[since:] if r.path.endswith("/embeddings")]


def test_a_rebuild_killed_midway_goes_on_from_the_last_memory_it_embedded(tmp_path, models):
    """Issue 26: a rebuild's progress is its row, written with each batch's vectors; the next start resumes
    it after the last memory embedded, so nothing is embedded twice but the batch the kill cut short."""
    data_dir = tmp_path / "data"
    server = SugoProcess(data_dir).start()
    try:
        db = _Folder(data_dir)
        with server.client() as api:
            chat_id = _roleplay(api, models, db, 219)  # the built-in model makes and embeds its memories
            assert api.post(f"/api/chats/{chat_id}/memories/rebuild").json()["making"]
            made = _until_rebuilt(api, chat_id)
            count = made["count"]
            assert count > 2 * 16, made  # one batch done, one in flight at the kill, the rest after
            embedding = add_connection(api, models, name="Embedder", embedding_model="test-embedding")
            api.put(f"/api/chats/{chat_id}/options", json={"connection_id": embedding["id"]})
            since = len(models.requests)
            first = models.embedding_gate = threading.Event()
            started = api.post(f"/api/chats/{chat_id}/memories/rebuild").json()
            assert started["total"] == count and not started["making"], started
            wait_for(lambda: len(_embedded_inputs(models, since)) == 1, what="the first batch asked")
            models.embedding_gate = threading.Event()  # the second batch waits here for the kill
            first.set()
            wait_for(lambda: len(_embedded_inputs(models, since)) == 2, what="the second batch asked")
            assert api.get(f"/api/chats/{chat_id}/memories/status").json()["rebuild"]["done"] == 16
        server.kill()
        held, models.embedding_gate = models.embedding_gate, None
        held.set()
        server = SugoProcess(data_dir).start()
        with server.client() as api:
            status = _until_rebuilt(api, chat_id)
    finally:
        server.kill()
    rebuild = status["rebuild"]
    assert rebuild["status"] == "done" and rebuild["done"] == rebuild["total"] == count, rebuild
    assert status["other_space"] == 0 and status["statuses"]["vectorized"] == count, status
    calls = _embedded_inputs(models, since)
    before_kill, after = calls[:2], calls[2:]
    assert after[0] == before_kill[1]  # the batch in flight at the kill, asked again
    texts = [t for call in calls for t in call]
    twice = {t for t in texts if texts.count(t) > 1}
    assert twice == set(before_kill[1]), "only the batch the kill cut short is embedded twice"
    assert not set(before_kill[0]) & {t for call in after for t in call}  # the first batch: never again


def _until_rebuilt(api, chat_id: int) -> dict:
    return wait_for(
        lambda: (
            not (s := api.get(f"/api/chats/{chat_id}/memories/status").json())["rebuild"]["running"] and s
        ),
        timeout=240,
        interval=0.1,
        what="the rebuild's end",
    )

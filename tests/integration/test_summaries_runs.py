"""Automatic Summaries and Backfill Summary (issue 12): entries written in the background by the test model
server, the run kept in the database (progress, Stop, resume after a restart, retry after backoff)."""

from __future__ import annotations

import time
from datetime import timedelta

from sqlmodel import select

from app.memory.summaries import generate, runs
from app.memory.summaries.core.prompts import ROLEPLAY_ENTRY_PROMPT
from app.memory.summaries.models import SummaryRun
from app.platform.jobs import settle_runs
from app.platform.timeutil import utcnow
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.live import LiveSugo
from tests.support.model_server import Reply


def _until(check, what: str):
    """Poll until `check()` is truthy (no timing claim: the bound only stops a hung test)."""
    for _ in range(600):
        if value := check():
            return value
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def _entries(api, chat_id: int) -> list[dict]:
    return api.get(f"/api/chats/{chat_id}/summaries").json()


def _ranges(api, chat_id: int) -> list[tuple[int, int]]:
    return [(e["first_position"], e["last_position"]) for e in _entries(api, chat_id)]


def _summary_requests(models) -> list[str]:
    """The transcripts of the summary requests the model server received, oldest first."""
    return [
        r.json["messages"][1]["content"]
        for r in models.requests
        if r.path.endswith("/chat/completions") and r.json["messages"][0]["content"] == ROLEPLAY_ENTRY_PROMPT
    ]


def _long_chat(api, models, n: int) -> int:
    """A chat of n messages: the greeting and n - 1 posted ones (as an imported chat would be)."""
    add_connection(api, models)
    chat = new_chat(api, [add_character(api)["id"]])
    for i in range(2, n + 1):
        assert (
            api.post(
                f"/api/chats/{chat['id']}/messages", json={"content": f"Step {i} along the road."}
            ).status_code
            == 201
        )
    return chat["id"]


def _send(api, chat_id: int, text: str) -> None:
    read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": text}))


def test_automatic_every_5_user_messages_summarises_the_new_messages(api, models):
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    assert (
        api.put(
            f"/api/chats/{chat_id}/options", json={"settings": {"summary_auto": True, "summary_every": 5}}
        ).status_code
        == 200
    )
    for n in range(1, 5):
        if n == 3:
            models.script("Discarded swipe text", "Kept swipe text")
            _send(api, chat_id, "User turn 3")
            read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "swipe"}))
        else:
            _send(api, chat_id, f"User turn {n}")
    assert _entries(api, chat_id) == [] and _summary_requests(models) == []
    _send(api, chat_id, "User turn 5")
    _until(lambda: _entries(api, chat_id), "an entry after the 5th user message")
    # Greeting, then five user messages with their replies: messages 1–11.
    assert _ranges(api, chat_id) == [(1, 11)]
    first = _summary_requests(models)[0]
    assert "Kept swipe text" in first and "User turn 5" in first and "Discarded swipe text" not in first
    entry = _entries(api, chat_id)[0]
    assert entry["origin"] == "model" and entry["active"]

    for n in range(6, 10):
        _send(api, chat_id, f"User turn {n}")
    assert len(_entries(api, chat_id)) == 1
    _send(api, chat_id, "User turn 10")
    _until(lambda: len(_entries(api, chat_id)) == 2, "a second entry after the 10th user message")
    assert _ranges(api, chat_id) == [(1, 11), (12, 21)]
    second = _summary_requests(models)[1]
    assert "User turn 6" in second and "User turn 10" in second and "User turn 5" not in second
    assert _entries(api, chat_id)[0] == entry
    assert len(_summary_requests(models)) == 2


def test_backfill_writes_the_batches_oldest_first_with_progress(api, models):
    chat_id = _long_chat(api, models, 120)
    base = f"/api/chats/{chat_id}/summaries/backfill"
    assert api.get(base).json()["status"] == "none"
    models.script(*(Reply(f"Part {i} of the road went by.", first_delay_s=0.4) for i in (1, 2, 3)))
    r = api.post(base)
    assert r.status_code == 202 and r.json()["status"] == "running" and r.json()["total"] == 3, r.text
    busy = api.post(base)
    assert busy.status_code == 409 and "already being written" in busy.json()["detail"]
    seen = set()
    while (status := api.get(base).json())["status"] == "running":
        seen.add((status["done"], status["total"], status["current"]))
        time.sleep(0.05)
    assert status["status"] == "done" and status["done"] == 3 == status["total"], status
    # Older than the tail of 10: messages 1–110, in batches of 50.
    assert {(0, 3, "messages 1–50"), (1, 3, "messages 51–100"), (2, 3, "messages 101–110")} <= seen
    assert _ranges(api, chat_id) == [(1, 50), (51, 100), (101, 110)]
    assert [e["content"] for e in _entries(api, chat_id)] == [
        f"Part {i} of the road went by." for i in (1, 2, 3)
    ]
    transcripts = _summary_requests(models)
    assert (
        "Step 2 along the road." in transcripts[0]
        and "Step 50 along" in transcripts[0]
        and "Step 51 " not in transcripts[0]
    )
    nothing = api.post(base)
    assert nothing.status_code == 400 and "nothing to backfill" in nothing.json()["detail"]


def test_stop_half_way_keeps_finished_entries_and_writes_no_more(api, models):
    chat_id = _long_chat(api, models, 120)
    base = f"/api/chats/{chat_id}/summaries/backfill"
    models.script(*(Reply(f"Part {i}.", first_delay_s=0.6) for i in (1, 2, 3)))
    assert api.post(base).status_code == 202
    _until(lambda: api.get(base).json()["done"] == 1, "the first step finishes")
    stopping = api.post(f"{base}/stop").json()
    assert stopping["stop_requested"] and stopping["status"] == "running"
    status = _until(lambda: (s := api.get(base).json())["status"] != "running" and s, "the run stops")
    assert status["status"] == "stopped" and status["done"] == 2 and status["total"] == 3
    assert _ranges(api, chat_id) == [(1, 50), (51, 100)]  # the call in hand when Stop came is kept
    assert models.pending_replies == 1 and len(_summary_requests(models)) == 2
    assert api.post(f"{base}/stop").status_code == 400
    # Backfill again picks up where it stopped.
    assert api.post(base).json()["total"] == 1
    _until(lambda: api.get(base).json()["status"] == "done", "the rest is done")
    assert _ranges(api, chat_id) == [(1, 50), (51, 100), (101, 110)]


def test_a_restart_mid_backfill_resumes_without_duplicate_ranges(tmp_path, models):
    data = tmp_path / "data"
    first = LiveSugo(data).start()
    with first.client() as api:
        chat_id = _long_chat(api, models, 120)
        base = f"/api/chats/{chat_id}/summaries/backfill"
        models.script(
            Reply("Part 1."),
            Reply("Part 2, never used.", first_delay_s=3.0),
            Reply("Part 2."),
            Reply("Part 3."),
        )
        assert api.post(base).status_code == 202
        _until(
            lambda: (
                api.get(base).json()["current"] == "messages 51–100" and len(_summary_requests(models)) == 2
            ),
            "the second step's call is on its way",
        )
    first.stop()
    with LiveSugo(data) as second, second.client() as api:
        status = _until(
            lambda: (s := api.get(base).json())["status"] == "done" and s, "the resumed run finishes"
        )
        assert status["done"] == status["total"] == 3
        # The stopped app's call answers later and is thrown away, as if its process had died.
        _until(lambda: not generate.running(first.services, chat_id), "the stopped app's thread ends")
        assert _ranges(api, chat_id) == [(1, 50), (51, 100), (101, 110)]
        assert [e["content"] for e in _entries(api, chat_id)] == ["Part 1.", "Part 2.", "Part 3."]


def test_a_failing_automatic_run_is_retried_after_backoff_and_never_changes_earlier_entries(
    sugo, api, models
):
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    api.put(f"/api/chats/{chat_id}/options", json={"settings": {"summary_auto": True, "summary_every": 1}})
    _send(api, chat_id, "User turn 1")
    kept = _until(lambda: _entries(api, chat_id), "the first automatic entry")[0]

    def run() -> SummaryRun:
        with sugo.session() as s:
            return s.exec(
                select(SummaryRun).where(SummaryRun.chat_id == chat_id).order_by(SummaryRun.id.desc())
            ).first()

    def due_now() -> None:
        """Time passes: the retry is due, and the scheduler's sweep runs."""
        with sugo.session() as s:
            row = s.get(SummaryRun, run().id)
            row.next_attempt_at = utcnow() - timedelta(seconds=1)
            s.add(row)
            s.commit()
        runs.sweep(sugo.services)

    models.script("A reply.", Reply(status=500, error="upstream exploded"))
    _send(api, chat_id, "User turn 2")
    failed = _until(
        lambda: (r := run()) is not None and r.status == "failed" and r, "the automatic run fails"
    )
    assert failed.attempts == 1 and failed.reason
    wait = failed.next_attempt_at - failed.updated_at
    assert timedelta(seconds=55) < wait < timedelta(seconds=65)  # answers.retry_delay(1): one minute
    page = api.get(f"/chats/{chat_id}/summaries").text
    assert "The automatic summary of messages 4–5 failed" in page and "summary-auto-retry" in page
    # Not due yet: neither the sweep nor a new reply calls the model again.
    asked = len(_summary_requests(models))
    runs.sweep(sugo.services)
    _send(api, chat_id, "User turn 3")
    time.sleep(0.3)  # a wrong run would have started by now; its absence is checked, not its speed
    assert len(_summary_requests(models)) == asked and run().status == "failed"

    for attempt in (2, 3, 4):
        models.script(Reply("<think>only thinking</think>"), Reply("<think>still</think>"))
        due_now()
        again = run()
        assert again.status == "failed" and again.attempts == attempt
    assert again.next_attempt_at is None  # given up: it waits for Retry
    assert "automatic summaries wait for Retry" in api.get(f"/chats/{chat_id}/summaries").text
    assert _entries(api, chat_id) == [kept]

    models.script("The second stretch of the road.")
    r = api.post(f"/chats/{chat_id}/summaries/automatic/retry", data={"inactive": "1"})
    assert r.status_code == 200
    _until(lambda: run().status == "done", "Retry succeeds")
    assert _entries(api, chat_id)[0] == kept
    assert _ranges(api, chat_id) == [(1, 3), (4, 7)]


def test_backfill_refuses_what_it_cannot_do_with_a_sentence(api, models):
    chat_id = _long_chat(api, models, 8)
    base = f"/api/chats/{chat_id}/summaries/backfill"
    r = api.post(base)
    assert r.status_code == 400 and "nothing to backfill" in r.json()["detail"]
    assert api.post(f"{base}/stop").status_code == 400
    assert api.post("/api/chats/999999/summaries/backfill").status_code == 404
    bad = api.post(f"/chats/{chat_id}/settings", data={"chat_summary_shown": "1", "summary_every": "0"})
    assert bad.status_code == 400 and "from 1 to 200" in bad.text


def test_a_failed_backfill_batch_stops_the_run_and_retry_goes_on_from_it(api, models):
    chat_id = _long_chat(api, models, 120)
    base = f"/api/chats/{chat_id}/summaries/backfill"
    models.script("Part 1.", Reply(status=500, error="upstream exploded"))
    assert api.post(base).status_code == 202
    status = _until(lambda: (s := api.get(base).json())["status"] != "running" and s, "the run fails")
    assert status["status"] == "failed" and status["done"] == 1 and status["total"] == 3, status
    assert status["current"] == "messages 51–100" and "500" in status["reason"]
    assert _ranges(api, chat_id) == [(1, 50)]
    page = api.get(f"/chats/{chat_id}/summaries").text
    assert "Backfill stopped at step 2 of 3 (messages 51–100)" in page and "summary-backfill-retry" in page
    models.script("Part 2.", "Part 3.")
    again = api.post(base).json()
    assert again["run_id"] == status["run_id"] and (again["done"], again["total"]) == (1, 3)
    _until(lambda: api.get(base).json()["status"] == "done", "the retried run finishes")
    assert _ranges(api, chat_id) == [(1, 50), (51, 100), (101, 110)]
    assert [e["content"] for e in _entries(api, chat_id)] == ["Part 1.", "Part 2.", "Part 3."]


def test_a_cut_short_backfill_with_nothing_left_or_stop_asked_ends_quietly_at_start(sugo, api, models):
    chat_id = _long_chat(api, models, 30)  # older than the tail: messages 1–20
    assert (
        api.post(
            f"/api/chats/{chat_id}/summaries",
            json={"content": "All of it.", "scope": "range", "start": 1, "end": 20},
        ).status_code
        == 201
    )
    with sugo.session() as s:
        s.add(SummaryRun(chat_id=chat_id, kind="backfill", total=2, done=1, current="messages 1–20"))
        s.commit()
    settle_runs(sugo.services)  # what the next start does first
    status = api.get(f"/api/chats/{chat_id}/summaries/backfill").json()
    assert status["status"] == "done" and status["reason"] == "" and status["done"] == 2
    api.delete(f"/api/chats/{chat_id}/summaries/{_entries(api, chat_id)[0]['id']}")
    with sugo.session() as s:
        s.add(
            SummaryRun(
                chat_id=chat_id, kind="backfill", total=1, stop_requested=True, current="messages 1–20"
            )
        )
        s.commit()
    settle_runs(sugo.services)
    assert api.get(f"/api/chats/{chat_id}/summaries/backfill").json()["status"] == "stopped"
    assert _summary_requests(models) == [] and _entries(api, chat_id) == []


def test_a_backfill_step_the_model_does_not_answer_in_time_fails_the_run(tmp_path, models):
    """A real timeout: Sugo started with SUGO_MODEL_TIMEOUT_S=1, the model answers the second step after 4 s."""
    with LiveSugo(tmp_path / "data", model_timeout_s=1.0) as sugo, sugo.client() as api:
        chat_id = _long_chat(api, models, 70)
        base = f"/api/chats/{chat_id}/summaries/backfill"
        models.script("Part 1.", Reply("Too late.", first_delay_s=4))
        assert api.post(base).status_code == 202
        status = _until(lambda: (s := api.get(base).json())["status"] != "running" and s, "the run fails")
        assert status["status"] == "failed" and "did not answer within 1" in status["reason"], status
        assert [e["content"] for e in _entries(api, chat_id)] == ["Part 1."]


def test_switching_automatic_off_drops_a_failed_run_waiting_for_its_retry(sugo, api, models):
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    options = f"/api/chats/{chat_id}/options"
    api.put(options, json={"settings": {"summary_auto": True, "summary_every": 1}})
    models.script("A reply.", Reply(status=500, error="upstream exploded"))
    _send(api, chat_id, "User turn 1")

    def run() -> SummaryRun:
        with sugo.session() as s:
            return s.exec(select(SummaryRun).where(SummaryRun.chat_id == chat_id)).first()

    _until(lambda: (r := run()) is not None and r.status == "failed", "the automatic run fails")
    api.put(options, json={"settings": {"summary_auto": False}})
    r = api.post(f"/chats/{chat_id}/summaries/automatic/retry", data={"inactive": "1"})
    assert r.status_code == 200
    _until(lambda: run().status == "stopped", "the run is dropped")
    assert run().next_attempt_at is None and _summary_requests(models) == [_summary_requests(models)[0]]
    assert "summary-auto-failed" not in api.get(f"/chats/{chat_id}/summaries").text


def test_review_outputs_holds_automatic_and_backfill_entries(api, models):
    chat_id = _long_chat(api, models, 30)
    api.put(
        f"/api/chats/{chat_id}/options",
        json={"settings": {"summary_review": True, "summary_auto": True, "summary_every": 1}},
    )
    models.script("Part 1.")
    assert api.post(f"/api/chats/{chat_id}/summaries/backfill").status_code == 202
    _until(
        lambda: api.get(f"/api/chats/{chat_id}/summaries/backfill").json()["status"] == "done",
        "Backfill ends",
    )
    _send(api, chat_id, "User turn")
    entries = _until(lambda: len(e := _entries(api, chat_id)) == 2 and e, "the automatic entry")
    assert [(e["awaiting_review"], e["active"]) for e in entries] == [(True, False), (True, False)]
    assert _ranges(api, chat_id) == [(1, 20), (21, 32)]


def test_deleting_the_chat_mid_backfill_ends_the_run_quietly(sugo, api, models, caplog):
    """The user deletes a chat whose Backfill is waiting on the model: the run ends, nothing is written
    anywhere, and nothing is logged as an error (it is not one)."""
    chat_id = _long_chat(api, models, 120)
    models.script(*(Reply(f"Part {i}.", first_delay_s=0.8) for i in (1, 2, 3)))
    assert api.post(f"/api/chats/{chat_id}/summaries/backfill").status_code == 202
    _until(
        lambda: len(models.requests) and models.requests[-1].path.endswith("/chat/completions"),
        "the first call",
    )
    with caplog.at_level("ERROR"):
        assert api.delete(f"/api/chats/{chat_id}").status_code in (200, 204)
        _until(lambda: not generate.running(sugo.services, chat_id), "the run lets go of the chat")
    assert [r.getMessage() for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")] == []
    with sugo.session() as s:
        assert s.exec(select(SummaryRun).where(SummaryRun.chat_id == chat_id)).all() == []

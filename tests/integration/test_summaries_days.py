"""Conversation chats' automatic day and week summaries (issue 12, acceptance 2 and 3): one summary per
finished day (never today, a message before the Day Rollover Hour counting for the day before), a week
summary once a week ends, the prompt shape (weeks, days, tail, today), Backfill with progress and Stop,
a killed server resuming without duplicates, and bad answers leaving every summary untouched."""

from __future__ import annotations

import json
import time as clock
from datetime import UTC, date, datetime, time, timedelta

from sqlmodel import Session

from app.chats.models import Message
from app.memory.days import runs as day_runs
from app.memory.days import service as conversation
from app.memory.days.core.days import chat_day, week_finished, week_start
from app.memory.summaries.core.prompts import day_label
from app.platform.db import make_engine
from app.platform.timeutil import utcnow
from tests.conftest import add_character, add_connection, jobs_waiting, new_chat, read_sse
from tests.support.live import LiveSugo
from tests.support.model_server import Reply
from tests.support.process import SugoProcess
from tests.support.waiting import wait_for

DAY_PROMPT_START = "You summarize one day of a conversation"
WEEK_PROMPT_START = "You consolidate the daily summaries"


def _today() -> date:
    return chat_day(utcnow(), conversation.local_zone(), 4)


def _at(day: date, hour: int, minute: int = 0) -> datetime:
    """Local wall-clock time on `day`, as the UTC the database stores."""
    return datetime.combine(day, time(hour, minute)).astimezone().astimezone(UTC)


def _seed(engine, chat_id: int, days_back: int) -> dict[date, list[str]]:
    """Two messages at 10:00 of each of the `days_back` days before today, and a late one at 03:30 the
    next morning (before the rollover hour, so still that day)."""
    by_day: dict[date, list[str]] = {}
    with Session(engine) as session:
        for back in range(days_back, 0, -1):
            day = _today() - timedelta(days=back)
            texts = [
                f"Morning talk of {day.isoformat()}",
                f"Answer on {day.isoformat()}",
                f"Late note of {day.isoformat()}",
            ]
            when = [_at(day, 10), _at(day, 10, 1), _at(day + timedelta(days=1), 3, 30)]
            roles = ["user", "assistant", "user"]
            for text, at, role in zip(texts, when, roles, strict=True):
                session.add(
                    Message(
                        chat_id=chat_id,
                        role=role,
                        name="You" if role == "user" else "Aria",
                        content=text,
                        swipes=[{"content": text}],
                        created_at=at,
                        updated_at=at,
                    )
                )
            by_day[day] = texts
        session.commit()
    return by_day


def _answer(n: int) -> str:
    return f'```json\n{{"summary": "Summary number {n}.", "keyDetails": ["detail {n}"]}}\n```'


def _chat(api, models) -> int:
    add_connection(api, models)
    return new_chat(api, [add_character(api)["id"]], mode="conversation")["id"]


def _summary_requests(models, prompt: str) -> list[str]:
    return [
        r.json["messages"][1]["content"]
        for r in models.requests
        if r.path.endswith("/chat/completions") and r.json["messages"][0]["content"].startswith(prompt)
    ]


def test_each_finished_day_then_each_finished_week_and_the_prompt_shape(sugo, api, models, background_held):
    chat_id = _chat(api, models)
    seeded = _seed(sugo.engine, chat_id, 10)
    today = _today()
    expected_weeks = sorted({week_start(d) for d in seeded if week_finished(week_start(d), today)})

    models.script(*[_answer(n) for n in range(1, 20)])
    day_runs.summarize_chat(sugo.services, chat_id)  # the scheduled job's work for one chat
    first = api.get(f"/api/chats/{chat_id}/days").json()
    assert [d["date"] for d in first] == [d.isoformat() for d in sorted(seeded)[-day_runs.JOB_DAYS :]]
    day_runs.summarize_chat(sugo.services, chat_id)
    models.reset()

    days = api.get(f"/api/chats/{chat_id}/days").json()
    assert [d["date"] for d in days] == [d.isoformat() for d in sorted(seeded)]  # one per day, never today
    assert all(d["summary"].startswith("Summary number") and d["origin"] == "model" for d in days)
    assert len({d["summary"] for d in days}) == len(days)
    weeks = api.get(f"/api/chats/{chat_id}/weeks").json()
    assert [w["date"] for w in weeks] == [w.isoformat() for w in expected_weeks]

    day_runs.summarize_chat(sugo.services, chat_id)  # nothing left: no request at all
    assert models.requests == []

    # The day's request held the 03:30 message of the next morning, and no other day's messages.
    models.script(*[_answer(n) for n in range(50, 52)])
    newest = sorted(seeded)[-1]
    if week_start(newest) in expected_weeks:  # a week summary speaks for its days: delete it too
        assert api.delete(f"/api/chats/{chat_id}/weeks/{week_start(newest).isoformat()}").status_code == 204
    assert api.delete(f"/api/chats/{chat_id}/days/{newest.isoformat()}").status_code == 204
    day_runs.summarize_chat(sugo.services, chat_id)
    [asked] = _summary_requests(models, DAY_PROMPT_START)
    assert all(text in asked for text in seeded[newest]) and day_label(newest) in asked
    assert not any(text in asked for day, texts in seeded.items() if day != newest for text in texts)
    models.reset()

    # A reply's request: week summaries, then the days of weeks not consolidated, then the tail and today.
    models.script("Good to hear from you.")
    read_sse(
        api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Hello again today"})
    )
    sent = next(r.json for r in models.requests if r.json.get("stream"))
    system = "\n".join(m["content"] for m in sent["messages"] if m["role"] == "system")
    rest = [m["content"] for m in sent["messages"] if m["role"] != "system"]
    by_date = {d["date"]: d for d in api.get(f"/api/chats/{chat_id}/days").json()}
    weeks = api.get(f"/api/chats/{chat_id}/weeks").json()
    for w in weeks:
        assert (
            w["summary"] in system and f'<summary week="{day_label(date.fromisoformat(w["date"]))}' in system
        )
    in_weeks = {d for d in seeded if week_start(d) in expected_weeks}
    for day in seeded:
        shown = by_date[day.isoformat()]["summary"] in system
        assert shown == (day not in in_weeks), day
    if weeks and len(in_weeks) < len(seeded):
        assert system.index("<summary week=") < system.index("<summary date=")
    assert "<important_memories>" in system
    tail = [t for d in sorted(seeded) for t in seeded[d]][-10:]
    older = [t for d in sorted(seeded) for t in seeded[d]][:-10]
    assert all(any(t in m for m in rest) for t in tail)
    assert not any(t in m for t in older for m in rest)
    assert rest[-1].endswith("Hello again today")


def test_backfill_fills_missing_days_with_progress_and_stops(sugo, api, models, background_held):
    chat_id = _chat(api, models)
    seeded = _seed(sugo.engine, chat_id, 16)
    base = f"/api/chats/{chat_id}/days/backfill"
    assert api.get(base).json()["status"] == "none"
    models.script(*[Reply(_answer(n), first_delay_s=0.2) for n in range(1, 15)])
    started = api.post(base)
    assert started.status_code == 202 and started.json()["status"] == "running"
    seen = []

    def finished():
        status = api.get(base).json()
        seen.append((status["done"], status["total"]))
        return status if status["status"] != "running" else None

    done = wait_for(finished, timeout=60, interval=0.05, what="the Backfill to finish")
    assert done["status"] == "done" and done["added"] == 14 and done["failed"] == 0
    assert done["result"] == "Added 14 summaries · 2 older days remain"
    assert any(0 < d < 14 and t == 14 for d, t in seen)  # the progress line moved
    newest = sorted(seeded)[-14:]
    assert [d["date"] for d in api.get(f"/api/chats/{chat_id}/days").json()] == [
        d.isoformat() for d in newest
    ]
    page = api.get(f"/chats/{chat_id}/settings").text
    assert "2 finished days lack a summary" in page

    # Stop: the days already done stay, the rest are left for later.
    models.reset()
    api.delete(f"/api/chats/{chat_id}/days/{newest[-1].isoformat()}")
    api.delete(f"/api/chats/{chat_id}/days/{newest[-2].isoformat()}")
    models.script(Reply(_answer(90), first_delay_s=0.5), Reply(_answer(91)), Reply(_answer(92)))
    assert api.post(base).status_code == 202
    wait_for(lambda: _summary_requests(models, DAY_PROMPT_START), timeout=30, what="the first day asked")
    stopped = api.post(f"{base}/stop")
    assert stopped.status_code == 200
    done = wait_for(finished, timeout=60, interval=0.05, what="the stopped Backfill to end")
    assert done["status"] == "stopped" and done["added"] == 1 and done["result"].endswith("stopped")
    assert len(api.get(f"/api/chats/{chat_id}/days").json()) == 13
    assert api.post(f"{base}/stop").status_code == 400


def test_backfill_with_nothing_missing_says_so(sugo, api, models, background_held):
    chat_id = _chat(api, models)
    base = f"/api/chats/{chat_id}/days/backfill"
    assert api.post(base).status_code == 202
    done = wait_for(
        lambda: (s := api.get(base).json())["status"] != "running" and s, timeout=30, what="the Backfill"
    )
    assert done["result"] == "No missing summaries found." and models.requests == []


def test_a_killed_server_resumes_the_days_without_duplicates(tmp_path, models):
    data_dir = tmp_path / "data"
    server = SugoProcess(data_dir).start()
    try:
        with server.client() as api:
            chat_id = _chat(api, models)
            seeded = _seed(make_engine(data_dir / "sugo.db"), chat_id, 5)
            models.script(Reply(_answer(1)), Reply(_answer(2)), Reply(_answer(3), first_delay_s=30))
            assert api.post(f"/api/chats/{chat_id}/days/backfill").status_code == 202
            wait_for(
                lambda: len(api.get(f"/api/chats/{chat_id}/days").json()) == 2, timeout=60, what="two days"
            )
            wait_for(lambda: models.pending_replies == 0, timeout=60, what="the third day asked")
        server.kill()
    finally:
        server.kill()
    models.reset()
    models.script(*[_answer(n) for n in range(10, 20)])
    with LiveSugo(data_dir) as again, again.client() as api:  # its start-up run resumes the work
        wait_for(lambda: len(api.get(f"/api/chats/{chat_id}/days").json()) == 5, timeout=60, what="every day")
        days = api.get(f"/api/chats/{chat_id}/days").json()
    assert [d["date"] for d in days] == [d.isoformat() for d in sorted(seeded)]
    assert len(_summary_requests(models, DAY_PROMPT_START)) == 3  # only the days still missing


def test_bad_answers_keep_summaries_and_the_day_stays_missing_with_its_reason(
    sugo, api, models, background_held
):
    chat_id = _chat(api, models)
    seeded = sorted(_seed(sugo.engine, chat_id, 2))
    models.script(_answer(1), _answer(2))
    day_runs.summarize_chat(sugo.services, chat_id)
    kept = api.get(f"/api/chats/{chat_id}/days").json()
    assert len(kept) == 2
    api.delete(f"/api/chats/{chat_id}/days/{seeded[-1].isoformat()}")
    kept = kept[:1]
    base = f"/api/chats/{chat_id}/days/backfill"
    bad = {
        "garbage": ([Reply("\x00\x01 ~~~ not a summary")], "not JSON"),
        "empty": ([Reply("   ")], "Empty answer"),
        "only thinking": ([Reply("<think>hmm</think>"), Reply("<think>hmm more</think>")], "Only thinking"),
        "no summary": ([Reply('{"keyDetails": ["x"]}')], "no summary"),
        "HTTP 500": ([Reply(status=500, error="upstream exploded")], ""),
    }
    for name, (replies, reason) in bad.items():
        models.reset()
        models.script(*replies)
        assert api.post(base).status_code == 202, name
        done = wait_for(
            lambda: (s := api.get(base).json())["status"] != "running" and s, timeout=60, what=name
        )
        assert done["failed"] == 1 and done["added"] == 0, name
        assert api.get(f"/api/chats/{chat_id}/days").json() == kept, name
        page = api.get(f"/chats/{chat_id}/settings").text
        assert "1 finished day lacks a summary" in page and seeded[-1].strftime("%d.%m.%Y") in page, name
        assert reason.lower() in page.lower(), name
    # The scheduled job waits out the backoff instead of asking again at once.
    models.reset()
    day_runs.summarize_chat(sugo.services, chat_id)
    assert models.requests == []
    models.script(_answer(3))
    assert api.post(base).status_code == 202
    wait_for(lambda: api.get(base).json()["status"] == "done", timeout=60, what="the Backfill")
    assert len(api.get(f"/api/chats/{chat_id}/days").json()) == 2
    assert "lacks a summary" not in api.get(f"/chats/{chat_id}/settings").text


def test_a_day_reads_only_active_swipes_and_skips_hidden_messages(sugo, api, models, background_held):
    chat_id = _chat(api, models)
    day = _today() - timedelta(days=1)
    with Session(sugo.engine) as session:
        at = _at(day, 12)
        session.add(
            Message(
                chat_id=chat_id,
                role="assistant",
                name="Aria",
                content="Kept swipe",
                active_swipe=1,
                swipes=[{"content": "Discarded swipe"}, {"content": "Kept swipe"}],
                created_at=at,
                updated_at=at,
            )
        )
        session.add(
            Message(
                chat_id=chat_id,
                role="user",
                name="You",
                content="A hidden aside",
                hidden=True,
                created_at=at,
                updated_at=at,
            )
        )
        session.commit()
    models.script(_answer(1))
    day_runs.summarize_chat(sugo.services, chat_id)
    [asked] = _summary_requests(models, DAY_PROMPT_START)
    assert "Aria: Kept swipe" in asked and "Discarded swipe" not in asked and "hidden aside" not in asked
    sent = models.requests[0].json
    assert sent["max_tokens"] >= 8196 and sent["temperature"] == 0.3 and not sent.get("stream")
    assert [d["date"] for d in api.get(f"/api/chats/{chat_id}/days").json()] == [day.isoformat()]


def test_a_long_day_is_summarised_in_parts_then_combined(sugo, api, models, background_held):
    chat_id = _chat(api, models)
    day = _today() - timedelta(days=1)
    with Session(sugo.engine) as session:
        for n in range(40):  # ~41,000 characters: two parts
            at = _at(day, 9) + timedelta(minutes=n)
            text = f"Message {n}: " + "words " * 165
            session.add(
                Message(chat_id=chat_id, role="user", name="You", content=text, created_at=at, updated_at=at)
            )
        session.commit()
    models.script(
        _answer(1), _answer(2), '{"summary": "The whole long day.", "keyDetails": ["detail 1", "detail 2"]}'
    )
    day_runs.summarize_chat(sugo.services, chat_id)
    parts = _summary_requests(models, DAY_PROMPT_START)
    assert [p.split("]")[0] for p in parts] == [
        f"[{day_label(day)}, part 1 of 2",
        f"[{day_label(day)}, part 2 of 2",
    ]
    assert "Message 0:" in parts[0] and "Message 39:" in parts[1] and "Message 39:" not in parts[0]
    assert all(len(p) < 33_000 for p in parts)
    [combined] = _summary_requests(models, "You combine the partial summaries")
    assert (
        combined
        == "[Part 1]\nSummary number 1.\nKey details: detail 1\n\n[Part 2]\nSummary number 2.\nKey details: detail 2"
    )
    [saved] = api.get(f"/api/chats/{chat_id}/days").json()
    assert (saved["summary"], saved["key_details"]) == ("The whole long day.", ["detail 1", "detail 2"])

    # A part that fails fails the day: nothing is written and the reason names the part.
    api.delete(f"/api/chats/{chat_id}/days/{day.isoformat()}")
    models.reset()
    models.script(_answer(1), Reply("not json at all"))
    assert api.post(f"/api/chats/{chat_id}/days/backfill").status_code == 202
    wait_for(
        lambda: api.get(f"/api/chats/{chat_id}/days/backfill").json()["status"] == "done",
        timeout=30,
        what="Backfill",
    )
    assert api.get(f"/api/chats/{chat_id}/days").json() == []
    assert "Part 2 of 2:" in api.get(f"/chats/{chat_id}/settings").text


def test_the_scheduled_run_stops_at_a_provider_error(sugo, api, models, background_held):
    chat_id = _chat(api, models)
    seeded = sorted(_seed(sugo.engine, chat_id, 3))
    models.script(Reply(status=503, error="overloaded"))
    day_runs.summarize_chat(sugo.services, chat_id)
    assert len(_summary_requests(models, DAY_PROMPT_START)) == 1  # not once per missing day
    assert api.get(f"/api/chats/{chat_id}/days").json() == []
    page = api.get(f"/chats/{chat_id}/settings").text
    assert "3 finished days lack a summary" in page and seeded[-1].strftime("%d.%m.%Y") in page


def test_a_reply_starts_the_summaries_of_finished_days(sugo, api, models, background_held):
    chat_id = _chat(api, models)
    # The queue resumed before the day is there: on PostgreSQL the restarted worker may defer a
    # periodic tick it missed while paused, and that day-summary pass would take the model's first
    # scripted answer (the reply's) as the summary. It ends first, on a chat with no finished day; the
    # reply's job then writes the day.
    sugo.services.queue.resume()
    if sugo.engine.dialect.name == "postgresql":
        clock.sleep(0.5)  # the worker's start-up deferral lands in the table
        wait_for(lambda: jobs_waiting(sugo.engine) == 0, timeout=30, what="the jobs the resume started")
    seeded = sorted(_seed(sugo.engine, chat_id, 1))
    models.script("Nice to see you.", _answer(1))
    read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Morning!"}))
    days = wait_for(
        lambda: api.get(f"/api/chats/{chat_id}/days").json(), timeout=30, what="the day's summary"
    )
    assert [d["date"] for d in days] == [seeded[0].isoformat()] and days[0]["summary"] == "Summary number 1."


def test_day_routes_refuse_roleplay_chats_and_bad_input(api, models):
    add_connection(api, models)
    roleplay = new_chat(api, [add_character(api)["id"]])["id"]
    for method, path in [
        ("get", "days"),
        ("get", "weeks"),
        ("post", "days/backfill"),
        ("get", "days/backfill"),
    ]:
        r = getattr(api, method)(f"/api/chats/{roleplay}/{path}")
        assert r.status_code == 400 and "Conversation" in r.json()["detail"], path
    for path in ["days/missing", "days/edit"]:
        r = api.get(f"/chats/{roleplay}/{path}", headers={"HX-Request": "true"})
        assert r.status_code == 400 and "Conversation" in r.text and "<html" not in r.text, path
    assert "Automatic Summarization" not in api.get(f"/chats/{roleplay}/settings").text
    chat_id = new_chat(api, [add_character(api, "Bo")["id"]], mode="conversation")["id"]
    assert api.patch(f"/api/chats/{chat_id}/days/2026-01-05", json={"summary": "x"}).status_code == 404
    assert api.patch(f"/api/chats/{chat_id}/days/not-a-date", json={"summary": "x"}).status_code == 422
    assert api.patch(f"/api/chats/{chat_id}/weeks/2026-01-06", json={"summary": "x"}).status_code == 400
    assert api.post(f"/api/chats/{chat_id}/days/backfill/stop").status_code == 400


def test_the_settings_form_saves_the_rollover_hour_and_tail_and_refuses_bad_ones(api, models):
    chat_id = _chat(api, models)
    form = {
        "name": "Talk",
        "day_summaries_shown": "1",
        "summary_rollover_hour": "6",
        "summary_recent_tail": "3",
    }
    assert api.post(f"/chats/{chat_id}/settings", data=form).status_code == 200
    settings = api.get(f"/api/chats/{chat_id}").json()["settings"]
    assert (settings["summary_rollover_hour"], settings["summary_recent_tail"]) == (6, 3)
    for field, value in [
        ("summary_rollover_hour", "12"),
        ("summary_rollover_hour", "-1"),
        ("summary_recent_tail", "x"),
    ]:
        r = api.post(f"/chats/{chat_id}/settings", data={**form, field: value})
        assert r.status_code == 400 and (
            "less than or equal" in r.text or "greater than" in r.text or "is not a number" in r.text
        ), (field, value)
        assert api.get(f"/api/chats/{chat_id}").json()["settings"]["summary_rollover_hour"] == 6, (
            field,
            value,
        )


def test_editing_a_day_keeps_it_and_marks_it_as_the_users(sugo, api, models, background_held):
    chat_id = _chat(api, models)
    seeded = sorted(_seed(sugo.engine, chat_id, 1))
    models.script(_answer(1))
    day_runs.summarize_chat(sugo.services, chat_id)
    url = f"/api/chats/{chat_id}/days/{seeded[0].isoformat()}"
    r = api.patch(
        url, json={"summary": "  We planned the trip.  ", "key_details": ["Leave Friday", " ", "Bring maps"]}
    )
    assert r.status_code == 200, r.text
    assert (r.json()["summary"], r.json()["key_details"], r.json()["origin"]) == (
        "We planned the trip.",
        ["Leave Friday", "Bring maps"],
        "user",
    )
    assert api.patch(url, json={"summary": "   "}).status_code == 400
    assert api.get(f"/api/chats/{chat_id}/days").json()[0]["summary"] == "We planned the trip."
    assert json.dumps(api.get(f"/api/chats/{chat_id}/days").json())  # plain JSON

"""Tasks and reminders (issue 24, acceptance 1): a reminder set one minute ahead through the tool fires
into its chat exactly once with the app's clock moved, also when Sugo was restarted in between and
when it was down at the due time; a storm of reminders stops at the per-chat limit; a recurring task
moves on to its next slot. Real Sugo, real SQLite, the test model server over HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import select

from app.chats.models import Message
from app.generation.reply import start as start_reply
from app.personas.models import Persona
from app.platform.claims import TASK_DELIVERIES
from app.platform.timeutil import as_utc
from app.tools.registry import ToolContext, ToolError
from app.tools.tasks.firing import claim, fire_due_tasks, reopen_cut_short
from app.tools.tasks.models import Task
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.live import LiveSugo
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

PURPOSE = "Remind Sam to stretch after the long writing session. Sam asked for it and hates sitting still."
REMINDER = f'Reminder: "{PURPOSE}". Write to'


def _setup(sugo: LiveSugo, models) -> tuple[int, int]:
    with sugo.client() as api:
        add_connection(api, models)
        char = add_character(api)
        chat = new_chat(api, [char["id"]], name="Writing desk")
    return chat["id"], char["id"]


def _ctx(sugo: LiveSugo, chat_id: int, char_id: int, persona_id: int | None = None) -> ToolContext:
    services = sugo.services
    return ToolContext(services, chat_id, char_id, persona_id, None, services.clock.now())


def _run(sugo: LiveSugo, name: str, ctx: ToolContext, args: dict):
    tool = sugo.services.tools.get(name)
    return tool.run(ctx, tool.args.model_validate(args))


def _ticks_by_hand(sugo: LiveSugo) -> LiveSugo:
    """Leave the firing to the test's own ticks: the 15-second one is taken off the running app's
    scheduler, and the one at start is waited for until it has run to its end (it reads the clock as it
    runs: moved meanwhile, it would fire what the test means its own tick to fire). On PostgreSQL the
    ticks are the job queue's: this server's worker stops taking jobs, once those it runs have ended."""
    if sugo.services.queue.shared:
        sugo.services.queue.pause()
        return sugo
    scheduler = sugo.services.scheduler
    scheduler.remove_job("tasks.fire")
    running = scheduler._executors["default"]._instances  # APScheduler's count of each job's running runs

    def at_start_ended() -> bool:
        # Taken off the job store as it is handed to the executor, which counts it until it ends.
        return scheduler.get_job("tasks.fire_at_start") is None and not running.get("tasks.fire_at_start")

    wait_for(at_start_ended, what="the tick at start to end")
    return sugo


def _tick(sugo: LiveSugo, racing: int = 1, start=start_reply) -> int:
    """Run the firing tick on the app's own event loop (where replies run), `racing` at once; how many
    reminders they started."""
    loop = sugo.services.scheduler._eventloop  # the loop the app's scheduler and replies run on
    futures = [
        asyncio.run_coroutine_threadsafe(fire_due_tasks(sugo.services, start), loop) for _ in range(racing)
    ]
    return sum(f.result(timeout=60) for f in futures)


def _task(sugo: LiveSugo, task_id: int) -> Task:
    with sugo.session() as session:
        return session.get(Task, task_id)


def _replies(sugo: LiveSugo, chat_id: int, text: str) -> list[Message]:
    with sugo.session() as session:
        rows = session.exec(select(Message).where(Message.chat_id == chat_id, Message.role == "assistant"))
        return [m for m in rows if text in m.content]


def _reminder_prompts(models) -> list[str]:
    found = []
    for request in models.requests:
        body = request.json or {}
        text = "\n".join(str(m.get("content")) for m in body.get("messages", []))
        if REMINDER in text:
            found.append(text)
    return found


def _delivered(sugo: LiveSugo, chat_id: int, task_id: int, text: str) -> Task:
    wait_for(lambda: _replies(sugo, chat_id, text), what="the reminder's reply")
    return wait_for(
        lambda: (t := _task(sugo, task_id)).status not in ("open", "firing") and t, what="the task settled"
    )


def _set_reminder(sugo: LiveSugo, chat_id: int, char_id: int, **args) -> int:
    result = _run(sugo, "create_task", _ctx(sugo, chat_id, char_id), {"purpose": PURPOSE, **args})
    assert result.notice.startswith("Reminder set for ")
    with sugo.session() as session:
        return session.exec(select(Task.id).order_by(Task.id.desc())).first()


def test_a_reminder_one_minute_ahead_fires_once_when_the_clock_gets_there(tmp_path, models):
    with LiveSugo(tmp_path / "data") as sugo:
        _ticks_by_hand(sugo)
        chat_id, char_id = _setup(sugo, models)
        task_id = _set_reminder(sugo, chat_id, char_id, minutes_from_now=1)
        models.script("Sam! Up you get, time to stretch.")
        assert _tick(sugo) == 0, "not due yet"
        sugo.services.clock.advance(timedelta(seconds=61))
        asked = []

        async def recording_start(services, **kwargs):
            asked.append(kwargs)
            return await start_reply(services, **kwargs)

        assert (
            _tick(sugo, racing=2, start=recording_start) == 1
        )  # two ticks racing: the database gives it to one
        [turn] = asked
        assert turn["content"] is None and turn["speaker_id"] == char_id
        assert turn["excluded_tools"] == {"create_task", "update_task", "cancel_task"}
        task = _delivered(sugo, chat_id, task_id, "time to stretch")
        assert task.status == "done" and not task.late and task.fired_at is not None
        assert _tick(sugo, racing=2) == 0
        assert len(_replies(sugo, chat_id, "time to stretch")) == 1
        prompts = _reminder_prompts(models)
        assert len(prompts) == 1 and "Write to " in prompts[0] and "late by" not in prompts[0]
        assert "{{user}}" not in prompts[0]  # the macro became the user's name


def test_a_reminder_fires_once_after_a_restart_in_between(tmp_path, models):
    data = tmp_path / "data"
    with LiveSugo(data) as first:
        chat_id, char_id = _setup(first, models)
        task_id = _set_reminder(first, chat_id, char_id, minutes_from_now=1)
    second = LiveSugo(data)
    with second:
        _ticks_by_hand(second)
        assert _task(second, task_id).status == "open"
        models.script("Stretch time, Sam.")
        second.services.clock.advance(timedelta(seconds=61))
        assert _tick(second, racing=2) == 1
        task = _delivered(second, chat_id, task_id, "Stretch time")
        assert task.status == "done" and not task.late
        assert _tick(second) == 0
        assert len(_replies(second, chat_id, "Stretch time")) == 1
        assert len(_reminder_prompts(models)) == 1


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_a_reminder_the_model_sets_in_a_streamed_tool_call_fires_once_after_a_restart(
    tmp_path, models, shape
):
    """The whole path: the model asks for the reminder in its provider's streamed shape, Sugo stops and
    starts again, and the controllable clock reaching the due time fires it into the chat once."""
    data = tmp_path / "data"
    with LiveSugo(data) as first, first.client() as api:
        if shape == "anthropic":
            add_connection(api, models, kind="anthropic", base_url=models.anthropic_base_url)
        else:
            add_connection(api, models)
        char_id = add_character(api)["id"]
        chat_id = new_chat(api, [char_id], name="Writing desk")["id"]
        arguments = json.dumps({"purpose": PURPOSE, "minutes_from_now": 1})
        models.script(
            Reply(
                text="",
                tool_calls=[
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "create_task", "arguments": arguments},
                    }
                ],
            ),
            Reply(text="I will remind you."),
        )
        r = api.post(
            f"/api/chats/{chat_id}/generate",
            json={"action": "send", "content": "Remind me in a minute to stretch"},
        )
        assert r.status_code == 200 and read_sse(r)[-1][0] == "done", r.text
        (opened,) = api.get("/api/tasks").json()["open"]
        assert opened["purpose"] == PURPOSE
    second = LiveSugo(data)
    with second:
        _ticks_by_hand(second)
        models.script("Stretch time, Sam.")
        assert _tick(second) == 0, "not due yet"
        second.services.clock.advance(timedelta(seconds=61))
        assert _tick(second, racing=2) == 1
        task = _delivered(second, chat_id, opened["id"], "Stretch time")
        assert task.status == "done" and not task.late
        assert _tick(second, racing=2) == 0
        assert len(_replies(second, chat_id, "Stretch time")) == 1
        assert len(_reminder_prompts(models)) == 1


def test_a_reminder_due_while_sugo_was_down_fires_once_at_start_marked_late(tmp_path, models):
    data = tmp_path / "data"
    with LiveSugo(data) as first:
        chat_id, char_id = _setup(first, models)
        task_id = _set_reminder(first, chat_id, char_id, minutes_from_now=1)
    models.script("Sorry I'm late, Sam: stretch!")
    later = LiveSugo(data)
    later.services.clock.advance(timedelta(hours=2, minutes=1))  # down at the due time, up two hours later
    with later:
        task = _delivered(later, chat_id, task_id, "stretch!")  # the tick at start fired it
        assert task.status == "done" and task.late
        assert _tick(later, racing=2) == 0
        assert len(_replies(later, chat_id, "stretch!")) == 1
        prompts = _reminder_prompts(models)
        assert len(prompts) == 1
        assert "It is late by 2 hours: Sugo was not running at the due time." in prompts[0]


def test_a_task_left_firing_by_a_crash_opens_again_at_start_and_fires_once(tmp_path, models):
    data = tmp_path / "data"
    with LiveSugo(data) as first:
        chat_id, char_id = _setup(first, models)
        task_id = _set_reminder(first, chat_id, char_id, minutes_from_now=1)
    with LiveSugo(data, start_scheduler=False).services.engine.begin() as conn:  # as a dead server left it
        conn.exec_driver_sql(f"UPDATE task SET status = 'firing' WHERE id = {task_id}")
    models.script("Here again: stretch, Sam.")
    again = LiveSugo(data)
    again.services.clock.advance(timedelta(seconds=61))
    with again:
        task = _delivered(again, chat_id, task_id, "Here again")
        assert task.status == "done"
        assert len(_replies(again, chat_id, "Here again")) == 1


def test_a_storm_of_reminders_stops_at_fifty_open_per_chat(sugo, models):
    chat_id, char_id = _setup(sugo, models)
    ctx = _ctx(sugo, chat_id, char_id)
    refused = []
    for i in range(1_000):
        try:
            _run(sugo, "create_task", ctx, {"purpose": f"Reminder number {i}.", "hours_from_now": 1 + i})
        except ToolError as err:
            refused.append(str(err))
    assert len(refused) == 950
    assert "50 open tasks, the most it may have" in refused[0]
    with sugo.session() as session:
        assert len(session.exec(select(Task).where(Task.chat_id == chat_id)).all()) == 50
    # Cancelling one makes room for one more.
    _run(sugo, "cancel_task", ctx, {"task_id": 1})
    _run(sugo, "create_task", ctx, {"purpose": "One more.", "hours_from_now": 2})
    with pytest.raises(ToolError, match="50 open tasks"):
        _run(sugo, "create_task", ctx, {"purpose": "And another.", "hours_from_now": 2})


def test_a_recurring_task_moves_to_its_next_slot_skipping_those_missed(sugo, models):
    _ticks_by_hand(sugo)
    chat_id, char_id = _setup(sugo, models)
    task_id = _set_reminder(sugo, chat_id, char_id, minutes_from_now=1, interval_hours=24)
    first_due = as_utc(_task(sugo, task_id).due_at)
    models.script("Daily stretch, Sam.")
    sugo.services.clock.advance(timedelta(days=3))  # three slots passed: fired once, then the next one
    assert _tick(sugo) == 1
    wait_for(lambda: _replies(sugo, chat_id, "Daily stretch"), what="the reminder's reply")
    task = wait_for(
        lambda: (t := _task(sugo, task_id)).status == "open" and t.fired_at and t, what="moved on"
    )
    assert as_utc(task.due_at) == first_due + timedelta(days=3) and task.interval_hours == 24
    assert _tick(sugo) == 0
    assert len(_replies(sugo, chat_id, "Daily stretch")) == 1


def test_times_are_read_in_the_users_zone_and_refused_in_the_past(sugo, models):
    chat_id, char_id = _setup(sugo, models)
    with sugo.session() as session:
        persona = Persona(name="Sam", time_zone="Asia/Tokyo", is_default=True)
        session.add(persona)
        session.commit()
        persona_id = persona.id
    sugo.services.clock.set(datetime(2026, 12, 2, 12, 0, tzinfo=UTC))
    ctx = _ctx(sugo, chat_id, char_id, persona_id)
    result = _run(sugo, "create_task", ctx, {"purpose": PURPOSE, "at": "2026-12-04 09:00"})
    assert result.notice == "Reminder set for Fri 4 Dec, 09:00 (Asia/Tokyo)"
    task = _task(sugo, 1)
    assert as_utc(task.due_at) == datetime(2026, 12, 4, 0, 0, tzinfo=UTC)
    with pytest.raises(ToolError, match="already passed"):
        _run(sugo, "create_task", ctx, {"purpose": PURPOSE, "at": "2026-12-02 20:00"})  # 11:00 UTC
    with pytest.raises(ToolError, match="YYYY-MM-DD HH:MM"):
        _run(sugo, "create_task", ctx, {"purpose": PURPOSE, "at": "next friday"})
    # No time at all: a minute from now.
    _run(sugo, "create_task", ctx, {"purpose": PURPOSE})
    due = as_utc(_task(sugo, 2).due_at)
    assert datetime(2026, 12, 2, 12, 1, tzinfo=UTC) <= due < datetime(2026, 12, 2, 12, 2, tzinfo=UTC)


def test_tools_see_only_their_own_chats_tasks_and_the_prompt_lists_the_open_ones(sugo, models):
    chat_id, char_id = _setup(sugo, models)
    with sugo.client() as api:
        other = new_chat(api, [char_id], name="Elsewhere")["id"]
    task_id = _set_reminder(sugo, chat_id, char_id, hours_from_now=3)
    elsewhere = _ctx(sugo, other, char_id)
    with pytest.raises(ToolError, match=f"no task {task_id} in this chat"):
        _run(sugo, "cancel_task", elsewhere, {"task_id": task_id})
    with pytest.raises(ToolError, match=f"no task {task_id} in this chat"):
        _run(sugo, "update_task", elsewhere, {"task_id": task_id, "purpose": "Hijacked."})
    here = _ctx(sugo, chat_id, char_id)
    changed = _run(
        sugo, "update_task", here, {"task_id": task_id, "hours_from_now": 5, "interval_hours": 168}
    )
    assert changed.notice.startswith("Reminder changed: ") and changed.notice.endswith(", then every week")
    with sugo.client() as api:
        prompt = api.get(f"/api/chats/{chat_id}/prompt").text
        assert f"Task {task_id}: due " in prompt and "every week" in prompt and PURPOSE in prompt
        assert f"Task {task_id}" not in api.get(f"/api/chats/{other}/prompt").text
    _run(sugo, "cancel_task", here, {"task_id": task_id})
    assert _task(sugo, task_id).status == "cancelled"
    with pytest.raises(ToolError, match="cancelled already"):
        _run(sugo, "cancel_task", here, {"task_id": task_id})
    with sugo.client() as api:
        assert f"Task {task_id}" not in api.get(f"/api/chats/{chat_id}/prompt").text


def test_a_claim_is_won_once_even_by_a_tick_that_read_the_task_as_open(sugo, models):
    chat_id, char_id = _setup(sugo, models)
    task_id = _set_reminder(sugo, chat_id, char_id, minutes_from_now=1)
    now = sugo.services.clock.now()
    with sugo.session() as first, sugo.session() as second:
        assert first.get(Task, task_id).status == second.get(Task, task_id).status == "open"  # both read it
        assert claim(sugo.services, first, task_id, now=now)
        assert not claim(sugo.services, second, task_id, now=now)
    assert _task(sugo, task_id).status == "firing"


def test_a_task_being_delivered_stays_firing_and_one_whose_delivery_died_opens_again(sugo, models):
    """What a starting server, or the live servers' look for a dead one's work, does with "firing"
    tasks (app/tools/tasks/firing.py `reopen_cut_short`): a delivery with a live claim is left alone (a
    second server starting once reopened it, and the reminder came twice); one without opens again."""
    chat_id, char_id = _setup(sugo, models)
    task_id = _set_reminder(sugo, chat_id, char_id, minutes_from_now=1)
    with sugo.session() as s:
        assert claim(sugo.services, s, task_id, now=sugo.services.clock.now())
    assert reopen_cut_short(sugo.services) == 0 and _task(sugo, task_id).status == "firing"
    sugo.services.claims.table.give_back(TASK_DELIVERIES, task_id)  # its server died: no live claim
    assert reopen_cut_short(sugo.services) == 1 and _task(sugo, task_id).status == "open"
    # A task cancelled since the tick read it is not claimed, and leaves no claim behind.
    with sugo.session() as s:
        task = s.get(Task, task_id)
        task.status = "cancelled"
        s.add(task)
        s.commit()
        assert not claim(sugo.services, s, task_id, now=sugo.services.clock.now())
    assert sugo.services.claims.table.token(TASK_DELIVERIES, task_id) is None


def test_a_reminder_waits_for_a_reply_being_written_in_its_chat(sugo, models):
    _ticks_by_hand(sugo)
    chat_id, char_id = _setup(sugo, models)
    task_id = _set_reminder(sugo, chat_id, char_id, minutes_from_now=1)
    gate = threading.Event()
    models.script(Reply("A long answer, held.", gate=gate), "Now, about that stretch.")

    def send() -> None:
        with sugo.client() as api:
            api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Tell me a story."})

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        wait_for(lambda: models.pending_replies == 1, what="the user's reply reaching the model")
        sugo.services.clock.advance(timedelta(seconds=61))
        assert _tick(sugo) == 0
        assert _task(sugo, task_id).status == "open"  # back to open, for the next tick
    finally:
        gate.set()
        sender.join(timeout=30)
    wait_for(lambda: sugo.services.generations.get(chat_id) is None, what="the user's reply to end")
    assert _tick(sugo) == 1
    assert _delivered(sugo, chat_id, task_id, "about that stretch").status == "done"


def test_a_new_version_of_a_reminders_reply_is_asked_with_the_same_reminder(tmp_path, models):
    with LiveSugo(tmp_path / "data") as sugo:
        _ticks_by_hand(sugo)
        chat_id, char_id = _setup(sugo, models)
        task_id = _set_reminder(sugo, chat_id, char_id, minutes_from_now=1)
        models.script("Sam! Up you get, time to stretch.", "Sam, stretching time!")
        sugo.services.clock.advance(timedelta(seconds=61))
        assert _tick(sugo) == 1
        _delivered(sugo, chat_id, task_id, "time to stretch")
        with sugo.client() as api:
            r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "regenerate"})
            assert r.status_code == 200, r.text
            r.read()
            last = api.get(f"/api/chats/{chat_id}/messages").json()[-1]
        assert [s["content"] for s in last["swipes"]] == [
            "Sam! Up you get, time to stretch.",
            "Sam, stretching time!",
        ]
        assert len(_reminder_prompts(models)) == 2  # both versions were asked with the reminder's line
        assert "tools" not in models.last_request.json or not {
            t["function"]["name"] for t in models.last_request.json["tools"]
        } & {"create_task", "update_task", "cancel_task"}

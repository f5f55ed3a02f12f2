"""Issue 12: Conversation chats' day and week summaries travel with the chat. The export writes Marinara's
`daySummaries`, `weekSummaries` (keyed "DD.MM.YYYY", a week by its Monday), `dayRolloverHour` and
`summaryTailMessages` into the header's chat_metadata; import reads them back from Sugo's and
Marinara-style files, leaving out a bad one with a note, never failing, and the background job does not
summarise them again; a branch copies the summaries of the days that end before its point."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta

from sqlmodel import Session

from app.chats.models import Chat, Message
from app.memory.days import runs as day_runs
from app.memory.days import service as conversation
from app.memory.days.core.days import chat_day, week_finished, week_start
from app.memory.days.models import DaySummary, WeekSummary
from app.platform.timeutil import utcnow
from tests.conftest import add_character, add_connection, new_chat

ST_HEADER = {"user_name": "Rowan", "character_name": "Aria", "create_date": "2024-10-18@20h52m17s"}


def _today(hour: int = 4) -> date:
    return chat_day(utcnow(), conversation.local_zone(), hour)


def _at(day: date, hour: int, minute: int = 0) -> datetime:
    """Local wall-clock time on `day`, as the UTC the database stores."""
    return datetime.combine(day, time(hour, minute)).astimezone().astimezone(UTC)


def _seed(engine, chat_id: int, days_back: int) -> dict[date, list[int]]:
    """Two messages at 10:00 of each of the `days_back` days before today and one at 05:30 the next
    morning (before a rollover hour of 6, so still that day); their ids by day."""
    ids: dict[date, list[int]] = {}
    with Session(engine) as session:
        for back in range(days_back, 0, -1):
            day = _today(6) - timedelta(days=back)
            for text, at, role in [
                (f"Morning of {day}", _at(day, 10), "user"),
                (f"Answer on {day}", _at(day, 10, 1), "assistant"),
                (f"Late note of {day}", _at(day + timedelta(days=1), 5, 30), "user"),
            ]:
                msg = Message(
                    chat_id=chat_id,
                    role=role,
                    name="Rowan" if role == "user" else "Aria",
                    content=text,
                    swipes=[{"content": text}],
                    created_at=at,
                    updated_at=at,
                )
                session.add(msg)
                session.flush()
                ids.setdefault(day, []).append(msg.id)
        session.commit()
    return ids


def _summarise(engine, chat_id: int, days: list[date], weeks: list[date]) -> None:
    with Session(engine) as session:
        for n, day in enumerate(days):
            session.add(
                DaySummary(
                    chat_id=chat_id,
                    day=day,
                    summary=f"Day {day}.",
                    key_details=[f"fact {n}", "tea"],
                    origin="user" if n == 0 else "model",
                )
            )
        for week in weeks:
            session.add(
                WeekSummary(
                    chat_id=chat_id, week=week, summary=f"Week of {week}.", key_details=[f"arc {week}"]
                )
            )
        session.commit()


def _rows(api, chat_id: int, kind: str) -> list[tuple]:
    r = api.get(f"/api/chats/{chat_id}/{kind}")
    assert r.status_code == 200, r.text
    return [(s["date"], s["summary"], s["key_details"], s["origin"]) for s in r.json()]


def _import(api, raw: bytes, character_id: int | None = None) -> dict:
    data = {"character_id": character_id} if character_id else {}
    r = api.post("/api/chats/import", files={"file": ("c.jsonl", raw)}, data=data)
    assert r.status_code == 201, r.text
    return r.json()


def _jsonl(lines) -> bytes:
    return ("\n".join(json.dumps(line) for line in lines) + "\n").encode()


def _conversation(api, sugo, days_back: int) -> tuple[dict, int, dict[date, list[int]]]:
    char = add_character(api, "Aria")
    chat_id = new_chat(api, [char["id"]], mode="conversation")["id"]
    r = api.put(
        f"/api/chats/{chat_id}/options",
        json={"settings": {"summary_rollover_hour": 6, "summary_recent_tail": 7}},
    )
    assert r.status_code == 200, r.text
    return char, chat_id, _seed(sugo.engine, chat_id, days_back)


def test_export_then_import_keeps_days_weeks_key_details_and_the_rollover_hour(
    api, sugo, models, background_held
):
    add_connection(api, models)
    char, chat_id, seeded = _conversation(api, sugo, 10)
    today = _today(6)
    weeks = sorted({week_start(d) for d in seeded if week_finished(week_start(d), today)})
    # The days of a consolidated week mostly have their own summaries; one does not (the week speaks for it).
    in_week = sorted(d for d in seeded if week_start(d) in weeks)
    days = [d for d in sorted(seeded) if d != (in_week[0] if in_week else None)]
    _summarise(sugo.engine, chat_id, days, weeks)

    exported = api.get(f"/api/chats/{chat_id}/export").content
    meta = json.loads(exported.splitlines()[0])["chat_metadata"]
    first = days[0]
    assert meta["daySummaries"][f"{first:%d.%m.%Y}"] == {
        "summary": f"Day {first}.",
        "keyDetails": ["fact 0", "tea"],
        "origin": "manual",
    }
    assert list(meta["daySummaries"]) == [f"{d:%d.%m.%Y}" for d in days]
    assert meta["weekSummaries"] == {
        f"{w:%d.%m.%Y}": {"summary": f"Week of {w}.", "keyDetails": [f"arc {w}"]} for w in weeks
    }
    assert meta["dayRolloverHour"] == 6 and meta["summaryTailMessages"] == 7

    again = _import(api, exported, char["id"])
    assert again["notes"] == [] and again["mode"] == "conversation"
    assert again["settings"]["summary_rollover_hour"] == 6 and again["settings"]["summary_recent_tail"] == 7
    assert _rows(api, again["id"], "days") == _rows(api, chat_id, "days") and len(days) == len(seeded) - bool(
        in_week
    )
    assert _rows(api, again["id"], "weeks") == _rows(api, chat_id, "weeks") and weeks
    # The re-exported file says the same.
    second = json.loads(api.get(f"/api/chats/{again['id']}/export").content.splitlines()[0])["chat_metadata"]
    assert {k: second[k] for k in ("daySummaries", "weekSummaries", "dayRolloverHour")} == {
        k: meta[k] for k in ("daySummaries", "weekSummaries", "dayRolloverHour")
    }

    # Nothing is missing (the week's day without a summary counts as summarised), so the job asks nothing.
    with Session(sugo.engine) as session:
        assert conversation.overview(session, session.get(Chat, again["id"])).missing == 0
    day_runs.summarize_chat(sugo.services, again["id"])
    assert models.requests == []
    # Once the week's summary is deleted, its day without a summary is missing and is summarised, once.
    models.script(
        '{"summary": "Written anew.", "keyDetails": []}', '{"summary": "The week anew.", "keyDetails": []}'
    )
    assert (
        api.delete(f"/api/chats/{again['id']}/weeks/{week_start(in_week[0]).isoformat()}").status_code == 204
    )
    day_runs.summarize_chat(sugo.services, again["id"])
    asked = [
        r.json["messages"][0]["content"] for r in models.requests if r.path.endswith("/chat/completions")
    ]
    assert sum(1 for prompt in asked if prompt.startswith("You summarize one day")) == 1
    assert (in_week[0].isoformat(), "Written anew.", [], "model") in _rows(api, again["id"], "days")


def test_a_marinara_style_file_with_bad_summaries_imports_the_good_ones_with_notes(api):
    add_character(api, "Aria")
    today = _today(2)
    old = today - timedelta(days=30)
    monday = week_start(old)
    day_summaries = {
        f"{old:%d.%m.%Y}": {
            "summary": "They met at the market.",
            "keyDetails": ["Aria sells figs", 42, "x" * 501],
        },
        f"{old + timedelta(days=1):%-d.%-m.%Y}": {"summary": "Rain all day."},
        "someday": {"summary": "No date."},
        f"{today:%d.%m.%Y}": {"summary": "Today is not over."},
        "31.02.2025": {"summary": "No such day."},
        f"{old - timedelta(days=1):%d.%m.%Y}": {"summary": ""},
        f"{old - timedelta(days=2):%d.%m.%Y}": ["not", "a", "summary"],
        f"{old - timedelta(days=3):%d.%m.%Y}": {"summary": "x" * 20_001},
    }
    week_summaries = {
        f"{monday:%d.%m.%Y}": {"summary": "A quiet week.", "keyDetails": ["figs"]},
        f"{monday + timedelta(days=2):%d.%m.%Y}": {"summary": "Not a Monday."},
    }
    header = {
        **ST_HEADER,
        "chat_metadata": {
            "sugo": {"version": 1, "mode": "conversation"},
            "daySummaries": day_summaries,
            "weekSummaries": week_summaries,
            "dayRolloverHour": 2,
            "summaryTailMessages": 3,
        },
    }
    line = {
        "name": "Rowan",
        "is_user": True,
        "is_system": False,
        "send_date": "2024-10-18T20:53:20.000Z",
        "mes": "Hi.",
    }
    chat = _import(api, _jsonl([header, line]))
    assert chat["mode"] == "conversation"
    assert chat["settings"]["summary_rollover_hour"] == 2 and chat["settings"]["summary_recent_tail"] == 3
    assert _rows(api, chat["id"], "days") == [
        (old.isoformat(), "They met at the market.", ["Aria sells figs"], "model"),
        ((old + timedelta(days=1)).isoformat(), "Rain all day.", [], "model"),
    ]
    assert _rows(api, chat["id"], "weeks") == [(monday.isoformat(), "A quiet week.", ["figs"], "model")]
    notes = chat["notes"]
    assert (
        f"Day summary “{old:%d.%m.%Y}” in the file: 2 key details left out (a summary keeps at most 30, each of at most 500 characters of text)."
        in notes
    )
    assert "Day summary “someday” in the file is not keyed by a date (DD.MM.YYYY) and was left out." in notes
    assert (
        f"Day summary “{today:%d.%m.%Y}” in the file is for a day not finished yet and was left out." in notes
    )
    assert (
        "Day summary “31.02.2025” in the file is not keyed by a date (DD.MM.YYYY) and was left out." in notes
    )
    assert (
        f"Day summary “{old - timedelta(days=1):%d.%m.%Y}” in the file has no text and was left out." in notes
    )
    assert (
        f"Day summary “{old - timedelta(days=2):%d.%m.%Y}” in the file is not a summary and was left out."
        in notes
    )
    assert (
        f"Day summary “{old - timedelta(days=3):%d.%m.%Y}” in the file is longer than 20,000 characters and was left out."
        in notes
    )
    assert (
        f"Week summary “{monday + timedelta(days=2):%d.%m.%Y}” in the file does not start on a Monday and was left out."
        in notes
    )
    assert len(notes) == 8

    # Keys that are not objects, and an hour and tail out of bounds: notes, the chat keeps its defaults.
    header = {
        **ST_HEADER,
        "chat_metadata": {
            "sugo": {"version": 1, "mode": "conversation"},
            "daySummaries": ["x"],
            "weekSummaries": "y",
            "dayRolloverHour": 12,
            "summaryTailMessages": 51,
        },
    }
    chat = _import(api, _jsonl([header, line]))
    assert chat["settings"]["summary_rollover_hour"] == 4 and chat["settings"]["summary_recent_tail"] == 10
    assert chat["notes"] == [
        "The file's Day Rollover Hour (12) is not a whole hour from 0 to 11; the chat keeps the default.",
        "The file's Recent Message Tail (51) is not a whole number from 0 to 50; the chat keeps the default.",
        "The file's day summaries are not keyed by date and were left out.",
        "The file's week summaries are not keyed by date and were left out.",
    ]
    # Sugo's own settings block wins over Marinara's tail key.
    header = {
        **ST_HEADER,
        "chat_metadata": {
            "sugo": {"version": 1, "mode": "conversation", "summaries": {"recent_tail": 4}},
            "summaryTailMessages": 3,
        },
    }
    assert _import(api, _jsonl([header, line]))["settings"]["summary_recent_tail"] == 4
    # Roleplay chats have no day summaries: they are left out, said so.
    header = {
        **ST_HEADER,
        "chat_metadata": {"daySummaries": day_summaries, "weekSummaries": {}, "dayRolloverHour": 4},
    }
    chat = _import(api, _jsonl([header, line]))
    assert chat["mode"] == "roleplay"
    assert chat["notes"] == [
        "The file's day and week summaries were left out: they are for Conversation chats."
    ]


def test_a_roleplay_chats_export_writes_empty_day_keys(api):
    chat = new_chat(api, [add_character(api, "Aria")["id"]])
    meta = json.loads(api.get(f"/api/chats/{chat['id']}/export").content.splitlines()[0])["chat_metadata"]
    assert (meta["daySummaries"], meta["weekSummaries"], meta["dayRolloverHour"]) == ({}, {}, 4)
    assert "summaryTailMessages" not in meta


def test_a_branch_copies_the_days_that_end_before_its_point_and_the_weeks_whose_days_all_do(
    api, sugo, background_held
):
    _, chat_id, seeded = _conversation(api, sugo, 16)
    this_monday = week_start(_today(6))
    weeks = [this_monday - timedelta(days=14), this_monday - timedelta(days=7)]
    point = this_monday - timedelta(days=3)  # the Friday of last week
    _summarise(sugo.engine, chat_id, sorted(seeded), weeks)

    # Branched at the day's second message: its late note lies past the point, so the day is left out.
    branch = api.post(f"/api/chats/{chat_id}/messages/{seeded[point][1]}/branch")
    assert branch.status_code == 201, branch.text
    source_days = _rows(api, chat_id, "days")
    assert _rows(api, branch.json()["id"], "days") == [d for d in source_days if d[0] < point.isoformat()]
    assert _rows(api, branch.json()["id"], "weeks") == _rows(api, chat_id, "weeks")[:1]
    assert len(source_days) == len(seeded) and len(_rows(api, chat_id, "weeks")) == 2

    # Branched at its last message, the day is copied too (its week still goes on).
    branch = api.post(f"/api/chats/{chat_id}/messages/{seeded[point][-1]}/branch")
    assert _rows(api, branch.json()["id"], "days") == [d for d in source_days if d[0] <= point.isoformat()]
    assert _rows(api, branch.json()["id"], "weeks") == _rows(api, chat_id, "weeks")[:1]
    # At the last message of the week, the week is copied.
    sunday = this_monday - timedelta(days=1)
    branch = api.post(f"/api/chats/{chat_id}/messages/{seeded[sunday][-1]}/branch")
    assert _rows(api, branch.json()["id"], "weeks") == _rows(api, chat_id, "weeks")

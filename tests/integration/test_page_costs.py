"""Pages that cost what they show (issue 23): the chat page, Chat Settings, the memory viewer, the scene
viewer and the summaries panel run the same SQL statements and fetch the same number of rows for a
200-message and a 4,000-message chat. Each reads the messages it renders plus counts and positions from
indexes, never every message of the chat.

Counted with real parts: SQLAlchemy's before_cursor_execute on the live engine for statements, and a
row_factory on every raw sqlite3 connection for rows (sqlite3 calls it once per row fetched into Python)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from datetime import UTC, datetime, time, timedelta

import pytest
from sqlalchemy import event
from sqlmodel import select

from app.chats.models import Message
from app.chats.service import new_message
from app.memory.days.core.days import DEFAULT_ROLLOVER_HOUR, chat_day, week_start
from app.memory.days.models import DaySummary, WeekSummary
from app.memory.days.service import local_zone
from app.memory.scenes.models import Scene
from app.memory.summaries.models import SummaryEntry
from app.platform.timeutil import utcnow
from tests.support.live import LiveSugo

PAGES = (
    "/chats/{chat}",
    "/chats/{chat}/messages?before={middle}",
    "/chats/{chat}/settings",
    "/chats/{chat}/memories",
    "/chats/{chat}/scenes",
    "/chats/{chat}/summaries",
    "/",
)
SIZES = (200, 4000)


class SqlCounter:
    """Statements run and rows fetched on one engine while `counting` is on."""

    def __init__(self, engine) -> None:
        self.statements: list[list] = []  # [statement, rows fetched after it ran]
        self.counting = False
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine.pool, "connect", self._connected)
        engine.dispose()  # the connections opened before the listener get no row_factory: open new ones

    def _statement(self, conn, cursor, statement, params, context, executemany) -> None:
        if self.counting:
            self.statements.append([" ".join(statement.split()), 0])

    def _connected(self, dbapi_conn, record) -> None:
        def count_row(cursor: sqlite3.Cursor, row: tuple) -> tuple:
            if self.counting and self.statements:
                self.statements[-1][1] += 1
            return row

        dbapi_conn.row_factory = count_row

    def measure(self, api, path: str) -> tuple[int, int, list[list]]:
        self.statements, self.counting = [], True
        try:
            response = api.get(path)
        finally:
            self.counting = False
        assert response.status_code == 200, (path, response.status_code, response.text[:300])
        return len(self.statements), sum(rows for _, rows in self.statements), self.statements


def _roleplay_chat(live: LiveSugo, size: int) -> tuple[int, int]:
    """A roleplay chat of `size` messages with Chat Summary hiding an early summarised range and Advanced
    Memory on with two closed scenes; its id and the id of its 101st message (a page before it
    overlaps the summarised range at both sizes)."""
    with live.client() as api:
        char = api.post("/api/characters", json={"name": "Aria", "description": "A bard."}).json()
        chat = api.post("/api/chats", json={"character_ids": [char["id"]], "mode": "roleplay"}).json()
        settings = {"summary_hide_messages": True, "advanced_memory": True}
        api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings}).raise_for_status()
    chat_id = chat["id"]
    with live.session() as s:
        s.add_all(
            new_message(chat_id, *(("user", "You") if i % 2 else ("assistant", "Aria")), [f"line {i} " * 20])
            for i in range(size)
        )
        s.flush()
        ids = list(s.exec(select(Message.id).where(Message.chat_id == chat_id).order_by(Message.id)))
        s.add(
            SummaryEntry(
                chat_id=chat_id,
                content="Aria and the user met on the road.",
                first_message_id=ids[0],
                last_message_id=ids[49],
                first_position=1,
                last_position=50,
                active=True,
            )
        )
        s.add(Scene(chat_id=chat_id, first_message_id=ids[0], last_message_id=ids[19], summary="The road."))
        s.add(Scene(chat_id=chat_id, first_message_id=ids[20], last_message_id=ids[39], summary="The inn."))
        s.commit()
    return chat_id, ids[100]


@pytest.fixture(scope="module")
def costs(tmp_path_factory) -> dict[str, dict[int, tuple[int, int, list[list]]]]:
    out = {}
    for size in SIZES:
        with LiveSugo(tmp_path_factory.mktemp(f"costs{size}") / "data", start_scheduler=False) as live:
            chat_id, middle = _roleplay_chat(live, size)
            counter = SqlCounter(live.engine)
            with live.client() as api:
                for page in PAGES:
                    path = page.format(chat=chat_id, middle=middle)
                    api.get(path)  # warm: first-use caches (templates, settings) are not the page's cost
                    out.setdefault(page, {})[size] = counter.measure(api, path)
    return out


def _explain(costs_by_size: dict[int, tuple[int, int, list[list]]]) -> str:
    """The statements whose count or rows differ between the sizes: what reads the whole chat."""
    small, large = (_rows_by_statement(c[2]) for c in costs_by_size.values())
    changed = [
        f"  {small.get(s, (0, 0))} -> {large.get(s, (0, 0))} (runs, rows)  {s[:220]}"
        for s in small | large
        if small.get(s) != large.get(s)
    ]
    sizes = ", ".join(f"{size}: {c[0]} statements, {c[1]} rows" for size, c in costs_by_size.items())
    return sizes + "\n" + "\n".join(changed)


def _rows_by_statement(statements: list[list]) -> dict[str, tuple[int, int]]:
    runs, rows = Counter(), Counter()
    for statement, fetched in statements:
        runs[statement] += 1
        rows[statement] += fetched
    return {s: (runs[s], rows[s]) for s in runs}


@pytest.mark.parametrize("page", PAGES)
def test_a_page_costs_the_same_for_200_and_4000_messages(costs, page: str) -> None:
    by_size = costs[page]
    (small_statements, small_rows, _), (large_statements, large_rows, _) = (by_size[s] for s in SIZES)
    assert (small_statements, small_rows) == (large_statements, large_rows), _explain(by_size)


# Conversation chats: Chat Settings' day summaries section, the Edit Summaries window, the Missing
# Summaries panel and the prompt (Peek Prompt), with day and week summaries.
DAY_PAGES = (
    "/chats/{chat}",
    "/chats/{chat}/settings",
    "/chats/{chat}/days/edit",
    "/chats/{chat}/days/missing",
    "/chats/{chat}/prompt",
)
DAYS = 40  # both sizes spread over the same days: a page shows days, so its cost may follow them
# The prompt's window drops the oldest messages in whole batches (24 at the default limit of 80): sizes
# equal modulo 24 give it the same messages to read.
DAY_SIZES = (200, 4016)


def _conversation_chat(live: LiveSugo, size: int) -> int:
    """A conversation chat of `size` messages spread evenly over the last DAYS days (today's included),
    with day summaries for a few days of the last weeks and a week summary for an older week."""
    with live.client() as api:
        conn = {"name": "Local", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
        api.post("/api/connections", json=conn).raise_for_status()
        char = api.post("/api/characters", json={"name": "Aria", "description": "A bard."}).json()
        chat = api.post("/api/chats", json={"character_ids": [char["id"]], "mode": "conversation"}).json()
    chat_id = chat["id"]
    now = utcnow()
    zone = local_zone()
    today = chat_day(now, zone)
    # The first message an hour into the chat-day DAYS - 1 days ago, at any hour the test runs: from
    # DAYS days ago exactly, the 200-message chat's first message (4.8 hours in) fell on the next day
    # when the run was within 4.8 hours after the 4 AM rollover, and the 4016-message one's did not,
    # so the two chats had a different number of days (the test failed every night from 23:12 UTC).
    first_day = today - timedelta(days=DAYS - 1)
    start = datetime.combine(first_day, time(DEFAULT_ROLLOVER_HOUR + 1)).replace(tzinfo=zone).astimezone(UTC)
    step = (now - start) / size
    with live.session() as s:
        messages = []
        for i in range(size):
            m = new_message(
                chat_id,
                *(("user", "You") if i % 2 else ("assistant", "Aria")),
                ["a line of talk " * 20],  # one length: the window is cut by tokens
            )
            m.created_at = start + step * (i + 1)
            messages.append(m)
        s.add_all(messages)
        for n in (2, 3, 5, 9):
            s.add(
                DaySummary(
                    chat_id=chat_id, day=today - timedelta(days=n), summary=f"Day {n}.", key_details=["a"]
                )
            )
        s.add(WeekSummary(chat_id=chat_id, week=week_start(today) - timedelta(days=21), summary="A week."))
        s.commit()
    return chat_id


@pytest.fixture(scope="module")
def day_costs(tmp_path_factory) -> dict[str, dict[int, tuple[int, int, list[list]]]]:
    out = {}
    for size in DAY_SIZES:
        with LiveSugo(tmp_path_factory.mktemp(f"days{size}") / "data", start_scheduler=False) as live:
            chat_id = _conversation_chat(live, size)
            counter = SqlCounter(live.engine)
            with live.client() as api:
                for page in DAY_PAGES:
                    path = page.format(chat=chat_id)
                    api.get(path)
                    out.setdefault(page, {})[size] = counter.measure(api, path)
    return out


@pytest.mark.parametrize("page", DAY_PAGES)
def test_a_conversation_page_costs_the_same_for_200_and_4016_messages(day_costs, page: str) -> None:
    by_size = day_costs[page]
    (small_statements, small_rows, _), (large_statements, large_rows, _) = (by_size[s] for s in DAY_SIZES)
    assert (small_statements, small_rows) == (large_statements, large_rows), _explain(by_size)

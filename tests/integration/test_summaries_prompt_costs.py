"""Chat Summary's part of the prompt costs what it sends (issue 23): Peek Prompt of a Roleplay chat runs
the same SQL statements and fetches the same number of rows with 40 and with 400 summary entries. The
entries' block is read once per change of the chat's entries (a per-chat cache in Services, checked by one
aggregate over the entries' index), never as every entry's row on every turn.

Counted as tests/integration/test_page_costs.py counts pages: statements with before_cursor_execute, rows
with a row_factory on every raw sqlite3 connection."""

from __future__ import annotations

import pytest
from sqlmodel import select

from app.chats.models import Message
from app.chats.service import new_message
from app.memory.summaries import service
from app.memory.summaries.models import SummaryEntry
from app.memory.summaries.runs import run_automatic
from tests.integration.test_page_costs import SqlCounter, _explain
from tests.support.live import LiveSugo

MESSAGES = 1200
ENTRY_COUNTS = (40, 400)
TAIL = 10


def _chat_with_entries(live: LiveSugo, entries: int) -> int:
    """A Roleplay chat of MESSAGES messages hiding summarised ones, with `entries` entries covering it in
    equal parts (a few switched off, one held for review, one with a part for another character)."""
    with live.client() as api:
        conn = {"name": "Local", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
        api.post("/api/connections", json=conn).raise_for_status()
        char = api.post("/api/characters", json={"name": "Aria", "description": "A bard."}).json()
        chat = api.post("/api/chats", json={"character_ids": [char["id"]], "mode": "roleplay"}).json()
        settings = {"summary_hide_messages": True, "summary_recent_tail": TAIL}
        api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings}).raise_for_status()
    chat_id = chat["id"]
    with live.session() as s:
        s.add_all(
            new_message(chat_id, *(("user", "You") if i % 2 else ("assistant", "Aria")), [f"line {i} " * 20])
            for i in range(MESSAGES)
        )
        s.flush()
        ids = list(s.exec(select(Message.id).where(Message.chat_id == chat_id).order_by(Message.id)))
        for n in range(entries):
            first, last = n * MESSAGES // entries, (n + 1) * MESSAGES // entries - 1
            secret = ' {{#if char == "Kaito"}}Kaito hid the key.{{/if}}' if n == 1 else ""
            s.add(
                SummaryEntry(
                    chat_id=chat_id,
                    title=f"Part {n + 1}",
                    content=f"Aria and the user walked on, part {n + 1}.{secret}",
                    first_message_id=ids[first],
                    last_message_id=ids[last],
                    first_position=first + 1,
                    last_position=last + 1,
                    active=n % 7 != 3,
                    awaiting_review=n == 5,
                )
            )
        s.commit()
    return chat_id


@pytest.fixture(scope="module")
def prompt_costs(tmp_path_factory) -> dict[int, tuple[int, int, list[list]]]:
    out = {}
    for entries in ENTRY_COUNTS:
        with LiveSugo(tmp_path_factory.mktemp(f"summ{entries}") / "data", start_scheduler=False) as live:
            chat_id = _chat_with_entries(live, entries)
            counter = SqlCounter(live.engine)
            with live.client() as api:
                path = f"/chats/{chat_id}/prompt"
                first = api.get(path)  # the first build reads the entries; the next ones only their stamp
                assert "Chat Summary" in first.text
                out[entries] = counter.measure(api, path)
    return out


def test_peek_prompt_costs_the_same_for_40_and_400_summary_entries(prompt_costs) -> None:
    (small_statements, small_rows, _), (large_statements, large_rows, _) = (
        prompt_costs[n] for n in ENTRY_COUNTS
    )
    assert (small_statements, small_rows) == (large_statements, large_rows), _explain(prompt_costs)


# After a reply: whether an automatic summary is due reads the newest entry and the messages after it.
AUTO_SIZES = (200, 4000)


def _automatic_chat(live: LiveSugo, size: int) -> int:
    """A Roleplay chat of `size` messages with automatic summaries on, every 5 user messages, and one
    entry ending 4 messages before the end: the next reply is not due one."""
    with live.client() as api:
        char = api.post("/api/characters", json={"name": "Aria", "description": "A bard."}).json()
        chat = api.post("/api/chats", json={"character_ids": [char["id"]], "mode": "roleplay"}).json()
        settings = {"summary_auto": True, "summary_every": 5}
        api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings}).raise_for_status()
    with live.session() as s:
        s.add_all(
            new_message(chat["id"], *(("user", "You") if i % 2 else ("assistant", "Aria")), [f"line {i}"])
            for i in range(size)
        )
        s.flush()
        ids = list(s.exec(select(Message.id).where(Message.chat_id == chat["id"]).order_by(Message.id)))
        s.add(
            SummaryEntry(
                chat_id=chat["id"],
                content="They talked.",
                first_message_id=ids[0],
                last_message_id=ids[-5],
                first_position=1,
                last_position=size - 4,
            )
        )
        s.commit()
    return chat["id"]


def test_a_reply_not_due_an_automatic_summary_reads_the_same_for_200_and_4000_messages(tmp_path) -> None:
    costs = {}
    for size in AUTO_SIZES:
        with LiveSugo(tmp_path / f"auto{size}" / "data", start_scheduler=False) as live:
            chat_id = _automatic_chat(live, size)
            counter = SqlCounter(live.engine)
            counter.statements, counter.counting = [], True
            try:
                run_automatic(live.services, chat_id)
            finally:
                counter.counting = False
            with live.session() as s:
                assert service.entry_count(s, chat_id) == 1  # not due: nothing was written
            statements = counter.statements
            costs[size] = (len(statements), sum(rows for _, rows in statements), statements)
    (small_statements, small_rows, _), (large_statements, large_rows, _) = (costs[n] for n in AUTO_SIZES)
    assert (small_statements, small_rows) == (large_statements, large_rows), _explain(costs)

"""The Chat Summary panel reads its numbers as ranges and indexed counts (issue 23): for any chat, its
message numbers per entry and its uncovered stretch are what the message-by-message rules give
(rules.live_positions, coverage.uncovered_batches), on a real SQLite database and on PostgreSQL."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session

from app.chats.models import Chat, Message
from app.memory.summaries import service
from app.memory.summaries.core.coverage import ChatMessage, SummaryRange, uncovered_batches
from app.memory.summaries.core.rules import live_positions
from app.memory.summaries.models import SummaryEntry


@pytest.fixture
def engine(database):
    return database  # each test once on SQLite, once on PostgreSQL (tests/conftest.py)


def _expected(kinds, spans, tail):
    """The panel's numbers the way they were computed before: over every message of the chat."""
    messages = [ChatMessage(mid, hidden) for mid, kind, hidden in kinds if kind == "message"]
    ids = [m.id for m in messages]
    positions = [live_positions(ids, SummaryRange(first, last)) for first, last in spans]
    ranges = [SummaryRange(first, last) for first, last in spans]
    batches = uncovered_batches(messages, ranges, tail=tail, batch=service.UNCOVERED_BATCH)
    if not batches:
        return positions, service.Uncovered(0, None, 0)
    readable = {m.id for m in messages if not m.hidden}
    count = sum(1 for first, last in batches for i in readable if first <= i <= last)
    first, last = batches[0]
    in_first = sum(1 for i in readable if first <= i <= last)
    return positions, service.Uncovered(count, (ids.index(first) + 1, ids.index(last) + 1), in_first)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(st.tuples(st.sampled_from(["message"] * 6 + ["refresh"]), st.booleans()), max_size=130),
    spans=st.lists(st.tuples(st.integers(-2, 135), st.integers(-2, 135)), max_size=5),
    gaps=st.lists(st.integers(1, 3), min_size=130, max_size=130),
    tail=st.integers(0, 20),
)
def test_the_panel_numbers_are_the_whole_chat_ones(engine, rows, spans, gaps, tail):
    with Session(engine) as s:
        chat = Chat(name="c")
        s.add(chat)
        s.flush()
        # Ids with holes (messages deleted since), so ids and numbers differ.
        base = 1_000_000 * chat.id
        kinds, mid = [], base
        for (kind, hidden), step in zip(rows, gaps, strict=False):
            mid += step
            kinds.append((mid, kind, hidden))
            s.add(Message(id=mid, chat_id=chat.id, kind=kind, hidden=hidden, content="x"))
        entries = [(base + first, base + last) for first, last in spans if first <= last]
        for first, last in entries:
            s.add(
                SummaryEntry(
                    chat_id=chat.id,
                    content="s",
                    first_message_id=first,
                    last_message_id=last,
                    first_position=1,
                    last_position=1,
                )
            )
        s.flush()
        positions, gap = _expected(kinds, entries, tail)
        views = service.entry_views(s, chat.id)
        assert sorted(
            (v.entry.first_message_id, v.entry.last_message_id, v.positions) for v in views
        ) == sorted((first, last, p) for (first, last), p in zip(entries, positions, strict=True))
        listed = service.list_entries(s, chat.id)
        assert service.uncovered(s, chat.id, listed, tail=tail) == gap
        assert service.message_count(s, chat.id) == sum(1 for _, kind, _ in kinds if kind == "message")
        s.rollback()

"""Chat Summary's prompt part from SummaryBlocks (issue 23) is what the per-entry reading gave: for any
chat, its entries (switched off, held for review, with parts for some characters), a speaker, a window
and a tail, the block, the count, the "parts meant for others" flag and the messages left out are the
same, and stay the same after every kind of edit the app makes (the cache is never read stale). On a real
SQLite database and on PostgreSQL; the reference is the code the source ran before, over the entries' rows."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session

from app.chats.models import Chat, Message
from app.memory.summaries import service
from app.memory.summaries.core.coverage import ChatMessage, SummaryRange, select_messages
from app.memory.summaries.core.prompts import has_conditions, visible_to
from app.memory.summaries.core.rules import EntryText, summary_block
from app.memory.summaries.models import SummaryEntry
from app.memory.summaries.prompting import SummaryBlocks

READERS = ("Aria", "Kaito", "kaito ")
TEXTS = st.sampled_from(
    [
        "",
        "They met at the inn.",
        "They met.",  # another length
        'The key. {{#if char == "Kaito"}}Kaito hid it.{{/if}}',
        "{{#if narrator}}The narrator knows.{{/if}} Rain.",
        '{{#if char == "Aria" || char == "Kaito"}}Both saw.{{/if}}',
        "{{#if broken}}Nobody reads this.",
    ]
)
ENTRY = st.tuples(st.integers(0, 60), st.integers(0, 60), st.booleans(), st.booleans(), TEXTS, TEXTS)
EDIT = st.one_of(
    st.tuples(st.just("title"), st.integers(0, 20), TEXTS),
    st.tuples(st.just("content"), st.integers(0, 20), TEXTS.filter(bool)),
    st.tuples(st.just("active"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("approve"), st.integers(0, 20), st.none()),
    st.tuples(st.just("delete"), st.integers(0, 20), st.none()),
    st.tuples(st.just("all"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("add"), st.integers(0, 20), ENTRY),
)


@pytest.fixture
def engine(database):
    return database  # the test once on SQLite, once on PostgreSQL (tests/conftest.py)


@pytest.fixture
def blocks(engine) -> SummaryBlocks:
    return SummaryBlocks()  # one for every example: chats and edits follow each other as in an app


def _reference(s: Session, chat_id: int, reader: str, window, tail: int):
    """What SummarySource.contribute computed before issue 23, from every entry's row."""
    every = service.list_entries(s, chat_id)
    entries = [e for e in every if e.active and not e.awaiting_review]
    if not entries:
        return None
    block = summary_block(
        [EntryText(visible_to(e.title, reader), visible_to(e.content, reader)) for e in entries]
    )
    conditional = any(has_conditions(e.title) or has_conditions(e.content) for e in entries)
    ranges = [
        SummaryRange(e.first_message_id, e.last_message_id, e.active and not e.awaiting_review) for e in every
    ]
    return block, len(entries), conditional, select_messages(window, ranges, tail=tail, hide_summarised=True)


def _new(s: Session, blocks: SummaryBlocks, chat_id: int, reader: str, window, tail: int):
    part = blocks.part(s, chat_id, reader)
    if part is None:
        return None
    selection = select_messages(window, part.ranges, tail=tail, hide_summarised=True)
    return part.block, part.count, part.conditional, selection


def _add(s: Session, chat_id: int, base: int, entry) -> None:
    first, last, active, review, title, content = entry
    s.add(
        SummaryEntry(
            chat_id=chat_id,
            title=title,
            content=content or "s",
            first_message_id=base + first,
            last_message_id=base + last,
            first_position=1,
            last_position=1,
            active=active,
            awaiting_review=review,
        )
    )
    s.flush()


def _edit(s: Session, chat_id: int, base: int, edit) -> None:
    kind, pick, value = edit
    ids = [e.id for e in service.list_entries(s, chat_id)]
    if kind == "add":
        _add(s, chat_id, base, value)
        return
    if not ids:
        return
    entry_id = ids[pick % len(ids)]
    if kind == "title":
        service.update_entry(s, chat_id, entry_id, title=value)
    elif kind == "content":
        service.update_entry(s, chat_id, entry_id, content=value)
    elif kind == "active":
        service.update_entry(s, chat_id, entry_id, active=value)
    elif kind == "approve":
        if service.get_entry(s, chat_id, entry_id).awaiting_review:
            service.approve_entry(s, chat_id, entry_id)
    elif kind == "delete":
        service.delete_entry(s, chat_id, entry_id)
    else:
        service.set_active(s, chat_id, value)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.lists(ENTRY, max_size=8),
    hidden=st.lists(st.booleans(), min_size=60, max_size=60),
    window_from=st.integers(0, 60),
    pinned=st.booleans(),
    tail=st.integers(0, 12),
    reader=st.sampled_from(READERS),
    edits=st.lists(EDIT, max_size=6),
    commit=st.booleans(),
)
def test_the_part_is_what_every_entry_gave(
    engine, blocks, entries, hidden, window_from, pinned, tail, reader, edits, commit
):
    with Session(engine) as s:
        chat = Chat(name="c", mode="roleplay")
        s.add(chat)
        s.flush()
        base = 1_000_000 * chat.id
        s.add_all(Message(id=base + i, chat_id=chat.id, hidden=h, content="x") for i, h in enumerate(hidden))
        for entry in entries:
            _add(s, chat.id, base, entry)
        # The window: the pinned first message, then the newest ones from `window_from`, as History has it.
        window = [
            ChatMessage(base + i, h) for i, h in enumerate(hidden) if i >= window_from or (pinned and i == 0)
        ]
        assert _new(s, blocks, chat.id, reader, window, tail) == _reference(s, chat.id, reader, window, tail)
        for edit in edits:
            _edit(s, chat.id, base, edit)
            if commit:
                s.commit()
            assert _new(s, blocks, chat.id, reader, window, tail) == _reference(
                s, chat.id, reader, window, tail
            )
            other = READERS[(READERS.index(reader) + 1) % len(READERS)]
            assert _new(s, blocks, chat.id, other, window, tail) == _reference(
                s, chat.id, other, window, tail
            )
        s.rollback()

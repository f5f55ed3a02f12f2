"""Reading a chat's history the way the prompt sees it: the recent-message window, and counts.

The prompt, Memory Recall (which recalls only what has left the window) and lorebooks (whose
timed effects count messages) all read history through here, so they agree on what the AI sees.

A reply's reasoning is never sent back: new replies keep it apart from their text, and reasoning tags
still inside a stored reply (written before Sugo read them, imported, typed in an edit) are left out
here by the one reader of model answers. A reply that is only reasoning reads as empty, and the
builder skips empty messages. A reply's expression tag is left out too (app/characters/core/expressions.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.engine import Connection
from sqlmodel import Session

from app.characters.core.expressions import without_expression_tag
from app.chats.core.audience import Audience, Viewer, audience_of, sees
from app.chats.core.quoting import message_for_model
from app.chats.core.window import HistoryMessage, WindowPlan, plan_window
from app.connections.core.answers import without_reasoning


# The reply path's hot queries, in plain SQL through the driver: they run before every reply and
# the ORM's per-statement overhead was most of their cost. All use the (chat_id, id) index.
# Messages with empty text are counted but never sent (the builder skips them); leaving
# `content` out of the filter lets the count run on an index alone. Each database has its own
# spelling: the driver's placeholder, and `hidden` is an integer on SQLite, a boolean on PostgreSQL.
@dataclass(frozen=True)
class _Statements:
    last_refresh: str
    count: str
    first: str
    newest: str
    private: str
    first_seen: str
    newest_seen: str
    messages: str
    messages_before: str
    numbers: str


def _statements(p: str, not_hidden: str, hidden_count: str, asked: str, is_private: str) -> _Statements:
    sendable = f"chat_id = {p} AND kind = 'message' AND status != 'error' AND id > {p} AND id < {p}"
    columns = "id, role, name, content, tool_calls, quote, chat_refs"
    messages = f"SELECT count(*) FROM message WHERE chat_id = {p} AND kind = 'message'"
    # A group speaker's window leaves out the messages it cannot see (their ids, the last parameter).
    unseen = f"id NOT IN ({asked})"
    return _Statements(
        last_refresh=f"SELECT coalesce(max(id), 0) FROM message WHERE chat_id = {p} AND kind = 'refresh' AND id < {p}",
        count=f"SELECT count(*), {hidden_count} FROM message WHERE {sendable}",
        first=f"SELECT {columns} FROM message WHERE {sendable} AND {not_hidden} ORDER BY id LIMIT 1",
        newest=f"SELECT {columns} FROM message WHERE {sendable} AND {not_hidden} ORDER BY id DESC LIMIT {p}",
        private=(
            f"SELECT id, hidden_for, whisper_to, role, character_id FROM message"
            f" WHERE {sendable} AND {not_hidden} AND {is_private}"
        ),
        first_seen=f"SELECT {columns} FROM message WHERE {sendable} AND {not_hidden} AND {unseen} ORDER BY id LIMIT 1",
        newest_seen=(
            f"SELECT {columns} FROM message WHERE {sendable} AND {not_hidden} AND {unseen}"
            f" ORDER BY id DESC LIMIT {p}"
        ),
        messages=messages,
        messages_before=f"{messages} AND id < {p}",
        # Message numbers of a few ids at once: messages are counted span by span between consecutive
        # ids (on the (chat_id, kind, id, ...) index) and summed, so the index is walked once however
        # many ids are asked for, and one row comes back per id. A number is the position among the
        # chat's messages (refresh marks aside), counted when asked: a stored number would shift with
        # every deletion.
        numbers=(
            f"WITH asked(id) AS ({asked}),"
            " steps AS (SELECT id, lag(id, 1, -1) OVER (ORDER BY id) AS prev FROM asked)"
            f" SELECT id, (SELECT count(*) FROM message WHERE chat_id = {p} AND kind = 'message'"
            " AND id > steps.prev AND id <= steps.id) FROM steps ORDER BY id"
        ),
    )


_STATEMENTS = {
    "sqlite": _statements(
        "?",
        "hidden = 0",
        "coalesce(sum(hidden), 0)",
        "SELECT DISTINCT value FROM json_each(?)",
        "private = 1",
    ),
    "postgresql": _statements(
        "%s",
        "NOT hidden",
        "count(*) FILTER (WHERE hidden)",
        "SELECT DISTINCT unnest(%s::bigint[])",
        "private",
    ),
}


def _ids_param(conn: Connection, ids: list[int]) -> str | list[int]:
    """A list of ids as one parameter: a JSON array on SQLite, an array on PostgreSQL."""
    return json.dumps(ids) if conn.dialect.name == "sqlite" else ids


def _sql(conn: Connection) -> _Statements:
    return _STATEMENTS[conn.dialect.name]


_NO_UPPER_BOUND = 2**62


@dataclass(frozen=True)
class History:
    messages: list[HistoryMessage]  # the window: the pinned first message, then the newest ones
    plan: WindowPlan
    hidden: int  # hidden messages since the refresh mark (counted for Peek Prompt, never sent)
    refreshed: bool = False  # a refresh mark cut the history

    @property
    def recent(self) -> list[HistoryMessage]:
        """The window past the pinned first message."""
        return self.messages[self.plan.pinned :]


def history_window(
    session: Session, chat_id: int, *, before_id: int | None, limit: int, viewer: Viewer | None = None
) -> History:
    """The recent-message window of a chat, read without touching the messages it leaves out: a
    5,000-message chat costs what an 80-message one does. With a `viewer` (a group's speaker) the
    messages it cannot see (app/chats/core/audience.py) are left out as hidden ones are: they are
    counted among the hidden, and the window fills with the ones it can see."""
    conn = session.connection()
    upper = before_id if before_id is not None else _NO_UPPER_BOUND
    # After a refresh mark the AI reads only what follows it, and the chat's first message is not
    # pinned any more: the refresh is a fresh start.
    sql = _sql(conn)
    refresh = conn.exec_driver_sql(sql.last_refresh, (chat_id, upper)).scalar_one()
    lower = refresh
    if viewer is not None and viewer.start_id is not None:
        # The speaker's own new start cuts its history as a refresh mark would (nothing pinned before).
        lower = max(lower, viewer.start_id - 1)
    span = (chat_id, lower, upper)
    total, hidden_total = conn.exec_driver_sql(sql.count, span).one()
    unseen = _unseen(conn, sql, span, viewer) if viewer is not None else []
    hidden_total = int(hidden_total) + len(unseen)
    plan = plan_window(total - hidden_total, limit, keep_first=not lower)
    first, newest, extra = sql.first, sql.newest, ()
    if unseen:
        first, newest, extra = sql.first_seen, sql.newest_seen, (_ids_param(conn, unseen),)
    rows = []
    if plan.pinned:
        rows.extend(conn.exec_driver_sql(first, (*span, *extra)).all())
    if plan.recent:
        rows.extend(reversed(conn.exec_driver_sql(newest, (*span, *extra, plan.recent)).all()))
    messages = [
        HistoryMessage(
            i,
            role,
            name,
            # A reply's [expression: name] tag picks a picture; the model never reads it back.
            without_expression_tag(without_reasoning(text))
            if role == "assistant"
            else _with_extras(text, quote, refs),
            tool_calls=_tool_calls(calls),
        )
        for i, role, name, text, calls, quote, refs in rows
    ]
    # Every hidden message, the window's or not: Peek Prompt's counts then cover each message once
    # (hidden, dropped by the window, taken out by a source, or sent).
    return History(messages, plan, hidden_total, refreshed=bool(refresh))


def unseen_message_ids(session: Session, chat_id: int, viewer: Viewer) -> frozenset[int]:
    """Every message of the chat the viewer cannot see (hidden from it, or another's whisper): what a
    source bringing back old messages (recalled memories) leaves out of its prompt."""
    conn = session.connection()
    return frozenset(_unseen(conn, _sql(conn), (chat_id, 0, _NO_UPPER_BOUND), viewer))


def private_messages(session: Session, chat_id: int) -> list[tuple[int, Audience]]:
    """The chat's messages the AI may read whose audience is limited (hidden from some characters,
    whispered), oldest first, with their audiences: what a group's memory reads to decide who may
    recall what. Read on the index of private messages: a chat has few."""
    conn = session.connection()
    rows = conn.exec_driver_sql(_sql(conn).private, (chat_id, 0, _NO_UPPER_BOUND))
    out = [
        (
            message_id,
            audience_of(_json(hidden_for), whisper_to, character_id if role == "assistant" else None),
        )
        for message_id, hidden_for, whisper_to, role, character_id in rows
    ]
    return sorted(out, key=lambda row: row[0])


def _unseen(conn: Connection, sql: _Statements, span: tuple, viewer: Viewer) -> list[int]:
    """The ids of the span's messages hidden from the viewer or whispered to someone else."""
    return [
        message_id
        for message_id, hidden_for, whisper_to, role, character_id in conn.exec_driver_sql(sql.private, span)
        if not sees(
            viewer, audience_of(_json(hidden_for), whisper_to, character_id if role == "assistant" else None)
        )
    ]


def _json(raw: str | list | None) -> object:
    """A JSON column as read through the driver: text on SQLite, already parsed on PostgreSQL."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _with_extras(text: str, quote: str | None, refs: str | list | None) -> str:
    """The user's words with the excerpt they answer and the chats' memories attached with @ (both
    NULL for nearly every message: the text as stored)."""
    if quote is None and refs is None:
        return text
    references = _json(refs) if refs else None
    pairs = [
        (str(r.get("title", "")), str(r.get("text", "")))
        for r in (references if isinstance(references, list) else ())
        if isinstance(r, dict)
    ]
    return message_for_model(text, quote, pairs)


def _tool_calls(raw: str | list | None) -> tuple[dict, ...]:
    if not raw:
        return ()
    calls = _json(raw)
    return tuple(c for c in calls if isinstance(c, dict)) if isinstance(calls, list) else ()


def message_count(session: Session, chat_id: int, before_id: int | None) -> int:
    """Messages of the chat before the reply: the clock of lorebook sticky, cooldown and delay."""
    conn = session.connection()
    if before_id is None:
        return int(conn.exec_driver_sql(_sql(conn).messages, (chat_id,)).scalar_one())
    return int(conn.exec_driver_sql(_sql(conn).messages_before, (chat_id, before_id)).scalar_one())


def message_numbers(session: Session, chat_id: int, ids: Iterable[int]) -> dict[int, int]:
    """For each id, how many of the chat's messages have an id up to it: the message's number as the
    chat view shows it when the id is a message of the chat (the count before it, plus one, when not)."""
    asked = sorted(set(ids))
    if not asked:
        return {}
    conn = session.connection()
    rows = conn.exec_driver_sql(_sql(conn).numbers, (_ids_param(conn, asked), chat_id)).all()
    numbers, total = {}, 0
    for message_id, count in rows:
        total += count
        numbers[message_id] = total
    return numbers

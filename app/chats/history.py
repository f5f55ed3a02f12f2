"""Reading a chat's history the way the prompt sees it: the recent-message window, and counts.

The prompt, Memory Recall (which recalls only what has left the window) and lorebooks (whose
timed effects count messages) all read history through here, so they agree on what the AI sees.

A reply's reasoning is never sent back: new replies keep it apart from their text, and reasoning tags
still inside a stored reply (written before Sugo read them, imported, typed in an edit) are left out
here by the one reader of model answers. A reply that is only reasoning reads as empty, and the
builder skips empty messages."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from sqlmodel import Session

from app.chats.core.quoting import message_for_model
from app.chats.core.window import HistoryMessage, WindowPlan, plan_window
from app.connections.core.answers import without_reasoning

# The reply path's hot queries, in plain SQL through the driver: they run before every reply and
# the ORM's per-statement overhead was most of their cost. All use the (chat_id, id) index.
# Messages with empty text are counted but never sent (the builder skips them); leaving
# `content` out of the filter lets the count run on an index alone.
_SENDABLE = "chat_id = ? AND kind = 'message' AND status != 'error' AND id > ? AND id < ?"
_LAST_REFRESH_SQL = (
    "SELECT coalesce(max(id), 0) FROM message WHERE chat_id = ? AND kind = 'refresh' AND id < ?"
)
_COUNT_SQL = f"SELECT count(*), coalesce(sum(hidden), 0) FROM message WHERE {_SENDABLE}"
_COLUMNS = "id, role, name, content, tool_calls, quote, chat_refs"
_FIRST_SQL = f"SELECT {_COLUMNS} FROM message WHERE {_SENDABLE} AND hidden = 0 ORDER BY id LIMIT 1"
_NEWEST_SQL = f"SELECT {_COLUMNS} FROM message WHERE {_SENDABLE} AND hidden = 0 ORDER BY id DESC LIMIT ?"
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


def history_window(session: Session, chat_id: int, *, before_id: int | None, limit: int) -> History:
    """The recent-message window of a chat, read without touching the messages it leaves out: a
    5,000-message chat costs what an 80-message one does."""
    conn = session.connection()
    upper = before_id if before_id is not None else _NO_UPPER_BOUND
    # After a refresh mark the AI reads only what follows it, and the chat's first message is not
    # pinned any more: the refresh is a fresh start.
    lower = conn.exec_driver_sql(_LAST_REFRESH_SQL, (chat_id, upper)).scalar_one()
    span = (chat_id, lower, upper)
    total, hidden_total = conn.exec_driver_sql(_COUNT_SQL, span).one()
    plan = plan_window(total - hidden_total, limit, keep_first=not lower)
    rows = []
    if plan.pinned:
        rows.extend(conn.exec_driver_sql(_FIRST_SQL, span).all())
    if plan.recent:
        rows.extend(reversed(conn.exec_driver_sql(_NEWEST_SQL, (*span, plan.recent)).all()))
    messages = [
        HistoryMessage(
            i,
            role,
            name,
            without_reasoning(text) if role == "assistant" else _with_extras(text, quote, refs),
            tool_calls=_tool_calls(calls),
        )
        for i, role, name, text, calls, quote, refs in rows
    ]
    # Every hidden message, the window's or not: Peek Prompt's counts then cover each message once
    # (hidden, dropped by the window, taken out by a source, or sent).
    return History(messages, plan, int(hidden_total), refreshed=bool(lower))


def _with_extras(text: str, quote: str | None, refs: str | None) -> str:
    """The user's words with the excerpt they answer and the chats' memories attached with @ (both
    NULL for nearly every message: the text as stored)."""
    if quote is None and refs is None:
        return text
    try:
        references = json.loads(refs) if refs else None
    except ValueError:
        references = None
    pairs = [
        (str(r.get("title", "")), str(r.get("text", "")))
        for r in (references if isinstance(references, list) else ())
        if isinstance(r, dict)
    ]
    return message_for_model(text, quote, pairs)


def _tool_calls(raw: str | None) -> tuple[dict, ...]:
    if not raw:
        return ()
    try:
        calls = json.loads(raw)
    except ValueError:
        return ()
    return tuple(c for c in calls if isinstance(c, dict)) if isinstance(calls, list) else ()


def message_count(session: Session, chat_id: int, before_id: int | None) -> int:
    """Messages of the chat before the reply: the clock of lorebook sticky, cooldown and delay."""
    sql = "SELECT count(*) FROM message WHERE chat_id = ? AND kind = 'message'"
    params: tuple = (chat_id,)
    if before_id is not None:
        sql, params = sql + " AND id < ?", (chat_id, before_id)
    return int(session.connection().exec_driver_sql(sql, params).scalar_one())


# Message numbers of a few ids at once: messages are counted span by span between consecutive ids
# (on the (chat_id, kind, id, ...) index) and summed, so the index is walked once however many ids
# are asked for, and one row comes back per id. A number is the position among the chat's messages
# (refresh marks aside), counted when asked: a stored number would shift with every deletion.
_NUMBERS_SQL = (
    "WITH asked(id) AS (SELECT DISTINCT value FROM json_each(?)),"
    " steps AS (SELECT id, lag(id, 1, -1) OVER (ORDER BY id) AS prev FROM asked)"
    " SELECT id, (SELECT count(*) FROM message WHERE chat_id = ? AND kind = 'message'"
    " AND id > steps.prev AND id <= steps.id) FROM steps ORDER BY id"
)


def message_numbers(session: Session, chat_id: int, ids: Iterable[int]) -> dict[int, int]:
    """For each id, how many of the chat's messages have an id up to it: the message's number as the
    chat view shows it when the id is a message of the chat (the count before it, plus one, when not)."""
    asked = sorted(set(ids))
    if not asked:
        return {}
    rows = session.connection().exec_driver_sql(_NUMBERS_SQL, (json.dumps(asked), chat_id)).all()
    numbers, total = {}, 0
    for message_id, count in rows:
        total += count
        numbers[message_id] = total
    return numbers

"""A chat's memory (issue 25): built by rules from its messages, the user's notes beside it, kept in
the `chat_memory` row and mirrored to a Markdown file (mirror.py).

Every write to a chat's memory (a rebuild after a reply or a change, a note saved or forgotten) takes
the database's write lock first (`lock_for_write`) and only then reads what it writes from: two runs
for one chat follow each other, and the later one always writes from the later state. The mirror file
is written inside that transaction too, so files follow the same order."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import text
from sqlmodel import Session

from app.chats.core.quoting import REFERENCE_CHARS
from app.chats.models import Chat
from app.connections.core.answers import without_reasoning
from app.memory.chat_notes import mirror
from app.memory.chat_notes.core.commands import parse_memory_command
from app.memory.chat_notes.core.notes import add_note, forget_note
from app.memory.chat_notes.core.rules import (
    LAST_KEPT,
    LONG_CHAT_REQUESTS,
    MAX_COMMANDS,
    MAX_NOTES,
    ChatSummary,
    FileEvent,
    build_summary,
    render_markdown,
)
from app.memory.chat_notes.models import ChatMemory
from app.platform.core.errors import UserError
from app.platform.db import chat_scope, lock_for_write
from app.platform.timeutil import utcnow

log = logging.getLogger(__name__)

# The user's requests: their messages the AI can read (hidden ones and failed sends left out).
# Plain SQL that both databases read alike (booleans compared with TRUE and FALSE, named binds).
_REQUESTS = (
    "FROM message WHERE chat_id = :chat_id AND role = 'user' AND kind = 'message' AND hidden = FALSE "
    "AND status != 'error' AND trim(content) != ''"
)
_REQUEST_COUNT = text(f"SELECT count(*) {_REQUESTS}")
_FIRST_REQUESTS = text(f"SELECT content {_REQUESTS} ORDER BY id LIMIT :n")
_LAST_REQUESTS = text(f"SELECT content {_REQUESTS} ORDER BY id DESC LIMIT :n")
# A few of the newest replies: one may be only thinking (empty once its reasoning is taken out).
_LAST_REPLIES = text(
    "SELECT content FROM message WHERE chat_id = :chat_id AND role = 'assistant' AND kind = 'message' "
    "AND hidden = FALSE AND status IN ('ok', 'partial') ORDER BY id DESC LIMIT 5"
)
_ATTACHED = text(
    "SELECT message_id, id, name, sha256 FROM attachment WHERE chat_id = :chat_id AND message_id IS NOT NULL "
    "ORDER BY message_id, id"
)
# tool_calls is a JSON column (text on SQLite, json on PostgreSQL): matched as its text.
_READS = text(
    "SELECT id, tool_calls FROM message WHERE chat_id = :chat_id AND tool_calls IS NOT NULL "
    "AND CAST(tool_calls AS TEXT) LIKE '%read_document%' ORDER BY id"
)
_COMMANDS = text(
    "SELECT created_at FROM message WHERE chat_id = :chat_id AND kind = 'refresh' ORDER BY id DESC LIMIT :n"
)
_LAST_ENTRY = text(
    "SELECT last_message_id, title, content FROM summary_entry WHERE chat_id = :chat_id AND active = TRUE "
    "AND awaiting_review = FALSE ORDER BY last_message_id DESC, id DESC LIMIT 1"
)
_LAST_RECAP = text(
    "SELECT last_message_id, summary FROM scene WHERE chat_id = :chat_id AND state = 'written' "
    "AND enabled = TRUE AND summary != '' ORDER BY last_message_id DESC LIMIT 1"
)
# Chats older than this feature: no row yet.
_WITHOUT_MEMORY = text(
    "SELECT chat.id FROM chat LEFT JOIN chat_memory ON chat_memory.chat_id = chat.id "
    "WHERE chat_memory.chat_id IS NULL ORDER BY chat.id"
)
_WITH_CONTENT = text("SELECT chat_id FROM chat_memory WHERE has_content = TRUE ORDER BY chat_id")
_OTHERS = text(
    "SELECT chat.id, chat.name, chat_memory.first_request, chat.last_message_at FROM chat_memory "
    "JOIN chat ON chat.id = chat_memory.chat_id WHERE chat_memory.has_content = TRUE AND chat.id != :chat_id "
    "ORDER BY chat.last_message_at DESC, chat.id DESC LIMIT :n"
)
# The @ list filters at most this many of the most recent chats with memory.
OTHERS_SCANNED = 500
OTHERS_SHOWN = 20
QUERY_CHARS = 200


@dataclass(frozen=True)
class ChatMemoryView:
    """What the panel, /memory and @ read."""

    chat_id: int
    title: str
    summary: ChatSummary
    notes: tuple[str, ...]

    @property
    def text(self) -> str:
        """The Markdown the mirror file holds and @ attaches ("" when there is nothing)."""
        if self.summary.is_empty() and not self.notes:
            return ""
        return render_markdown(self.title, self.summary, self.notes)


@dataclass(frozen=True)
class OtherChat:
    id: int
    title: str
    first_request: str
    last_message_at: str


def _row(session: Session, chat_id: int) -> ChatMemory | None:
    return session.get(ChatMemory, chat_id, populate_existing=True)


def view(session: Session, chat: Chat) -> ChatMemoryView:
    row = _row(session, chat.id)
    if row is None:
        return ChatMemoryView(chat.id, chat.name, ChatSummary(), ())
    return ChatMemoryView(
        chat.id, chat.name, ChatSummary.from_json(row.summary), tuple(str(n) for n in row.notes or ())
    )


def _gather(session: Session, chat_id: int) -> ChatSummary:
    conn = session.connection()
    chat = {"chat_id": chat_id}
    total = conn.execute(_REQUEST_COUNT, chat).scalar_one()
    first = [r[0] for r in conn.execute(_FIRST_REQUESTS, {**chat, "n": LONG_CHAT_REQUESTS})]
    last = [r[0] for r in conn.execute(_LAST_REQUESTS, {**chat, "n": LAST_KEPT})][::-1]
    reply = ""
    # A greeting alone is no result: the memory starts with the user's first request and its reply.
    for (content,) in conn.execute(_LAST_REPLIES, chat) if total else ():
        reply = without_reasoning(content or "").strip()
        if reply:
            break
    return build_summary(
        first=first,
        last=last,
        total=total,
        reply=reply,
        files=_file_events(session, chat_id),
        commands=[
            f"/refresh ({str(at)[:10]})"
            for (at,) in reversed(conn.execute(_COMMANDS, {**chat, "n": MAX_COMMANDS}).all())
        ],
        previous=_previous_summary(session, chat_id),
    )


def _file_events(session: Session, chat_id: int) -> list[FileEvent]:
    """Files attached to the chat's messages and files its characters read (read_document), in the
    order they happened (by message, then within it)."""
    conn = session.connection()
    names: dict[int, str] = {}
    events: list[tuple[int, int, FileEvent]] = []
    for message_id, attachment_id, name, digest in conn.execute(_ATTACHED, {"chat_id": chat_id}):
        names[attachment_id] = name
        events.append((message_id, 0, FileEvent(name, "attached", digest)))
    for message_id, raw in conn.execute(_READS, {"chat_id": chat_id}):
        try:
            calls = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            continue
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, dict) or call.get("name") != "read_document" or call.get("error"):
                continue
            try:
                args = json.loads(call.get("arguments") or "{}")
                name = names.get(int(args.get("attachment_id")))
            except (ValueError, TypeError, AttributeError):
                continue
            if name is not None:
                events.append((message_id, 1, FileEvent(name, "read")))
    return [event for _, _, event in sorted(events, key=lambda e: (e[0], e[1]))]


def _previous_summary(session: Session, chat_id: int) -> str:
    """The newest Chat Summary entry or scene recap standing in for older history, whichever reaches
    further into the chat."""
    conn = session.connection()
    entry = conn.execute(_LAST_ENTRY, {"chat_id": chat_id}).first()
    recap = conn.execute(_LAST_RECAP, {"chat_id": chat_id}).first()
    if entry is not None and (recap is None or entry[0] >= recap[0]):
        return f"{entry[1]}: {entry[2]}" if entry[1] else entry[2]
    return recap[1] if recap is not None else ""


def _locked_row(session: Session, chat_id: int) -> ChatMemory:
    """The chat's row, after taking the write lock (created when missing)."""
    lock_for_write(session, chat_scope(chat_id))
    row = _row(session, chat_id)
    if row is None:
        row = ChatMemory(chat_id=chat_id)
        session.add(row)
    return row


def _save(
    session: Session,
    data_dir: Path | None,
    chat: Chat,
    row: ChatMemory,
    summary: ChatSummary,
    notes: Sequence[str],
) -> bool:
    """Store the memory and bring the file in step (none given: the file follows with the next
    rebuild); True when the row changed."""
    summary_json = summary.to_json()
    changed = row.summary != summary_json or list(row.notes or ()) != list(notes) or row.version == 0
    if changed:
        row.summary = summary_json
        row.notes = list(notes)
        row.has_content = not summary.is_empty() or bool(notes)
        row.first_request = summary.requests[0] if summary.requests else ""
        row.version = (row.version or 0) + 1
        row.updated_at = utcnow()
        session.add(row)
        session.flush()
    if data_dir is not None:
        mirror.sync(data_dir, chat.id, ChatMemoryView(chat.id, chat.name, summary, tuple(notes)).text)
    return changed


def rebuild(session: Session, data_dir: Path, chat_id: int) -> bool:
    """Build the chat's summary again from its messages and store it (the caller commits); True when
    it changed. A chat deleted meanwhile is left alone."""
    lock_for_write(session, chat_scope(chat_id))
    chat = session.get(Chat, chat_id, populate_existing=True)
    if chat is None:
        return False
    row = _locked_row(session, chat_id)
    return _save(session, data_dir, chat, row, _gather(session, chat_id), tuple(row.notes or ()))


def save_note(session: Session, data_dir: Path, chat: Chat, text: str) -> tuple[str, ...]:
    """Add a note (refused past the limits with a sentence naming them: NoteRefused)."""
    row = _locked_row(session, chat.id)
    notes = add_note(tuple(row.notes or ()), text)
    summary = ChatSummary.from_json(row.summary) if row.version else _gather(session, chat.id)
    _save(session, data_dir, chat, row, summary, notes)
    return notes


def forget(session: Session, data_dir: Path, chat: Chat, number: int) -> tuple[str, str]:
    """Forget note `number` (1-based); returns the note forgotten and the notes left."""
    row = _locked_row(session, chat.id)
    before = tuple(row.notes or ())
    notes = forget_note(before, number)
    summary = ChatSummary.from_json(row.summary) if row.version else _gather(session, chat.id)
    _save(session, data_dir, chat, row, summary, notes)
    return before[number - 1], notes


def set_notes(session: Session, data_dir: Path | None, chat: Chat, notes: Sequence[str]) -> list[str]:
    """Notes read from an imported file or copied to a branch, each checked like one typed; returns
    what was left out and why."""
    row = _locked_row(session, chat.id)
    kept: tuple[str, ...] = tuple(row.notes or ())
    problems = []
    for note in notes:
        try:
            kept = add_note(kept, str(note))
        except ValueError as err:
            problems.append(str(err))
    # A new chat's summary is left empty here: its rows may not be flushed yet, and the rebuild
    # that follows a chat's arrival builds it.
    _save(session, data_dir, chat, row, ChatSummary.from_json(row.summary), kept)
    return problems


def ensure_file(data_dir: Path, memory: ChatMemoryView) -> str:
    """The memory's text, with its file written again if it is missing or was edited by hand."""
    text = memory.text
    try:
        mirror.sync(data_dir, memory.chat_id, text)
    except OSError:  # the text is in the database: attaching it does not need the file
        log.exception("could not write the memory file of chat %s", memory.chat_id)
    return text


def others(session: Session, chat_id: int, query: str = "") -> list[OtherChat]:
    """The user's other chats that have a memory, most recent first, filtered by title or first request."""
    needle = " ".join(query[:QUERY_CHARS].split()).casefold()
    found = []
    for id_, name, first, last_at in session.connection().execute(
        _OTHERS, {"chat_id": chat_id, "n": OTHERS_SCANNED}
    ):
        if needle and needle not in name.casefold() and needle not in (first or "").casefold():
            continue
        found.append(OtherChat(id_, name, first or "", _stored_time(last_at)))
        if len(found) == OTHERS_SHOWN:
            break
    return found


def _stored_time(value: datetime | str) -> str:
    """A time as SQLite stores it (text, to the microsecond); PostgreSQL's driver gives a datetime."""
    return value.strftime("%Y-%m-%d %H:%M:%S.%f") if isinstance(value, datetime) else str(value)


def references(session: Session, data_dir: Path, chat_id: int, ids: Sequence[int]) -> list[dict]:
    """The memories of the chats chosen with @, as they are sent with the message: [{chat_id, title, text}]."""
    refs: list[dict] = []
    for ref_id in dict.fromkeys(ids):
        if ref_id == chat_id:
            raise UserError("A chat's own memory cannot be attached to it: choose another chat after @.")
        other = session.get(Chat, ref_id)
        if other is None:
            raise UserError("A chat you chose after @ was deleted: remove its chip and send again.")
        memory = view(session, other)
        text = ensure_file(data_dir, memory)
        if not text:
            raise UserError(f"“{other.name}” has no memory yet: it appears after its first reply.")
        refs.append({"chat_id": other.id, "title": other.name, "text": text[:REFERENCE_CHARS]})
    return refs


def chats_without_memory(session: Session) -> list[int]:
    return [r[0] for r in session.connection().execute(_WITHOUT_MEMORY)]


def chats_with_memory(session: Session) -> list[int]:
    return [r[0] for r in session.connection().execute(_WITH_CONTENT)]


def has_memory(session: Session, chat_id: int) -> bool:
    row = _row(session, chat_id)
    return row is not None and row.has_content


@dataclass(frozen=True)
class CommandOutcome:
    """What a memory command did, for the notice in the chat (never stored as a message)."""

    sentence: str
    memory: ChatMemoryView
    show_memory: bool = False


def run_command(session: Session, data_dir: Path, chat: Chat, text: str) -> CommandOutcome:
    """/remember (/lembrar), /memory (/memoria), /forget (/esquecer): refused ones raise NoteRefused."""
    command = parse_memory_command(text)
    if command is None:
        raise UserError("That is not a memory command: /remember TEXT, /memory or /forget N.")
    if command.kind == "remember":
        notes = save_note(session, data_dir, chat, command.argument)
        return CommandOutcome(f"Noted (note {len(notes)} of {MAX_NOTES}).", view(session, chat))
    if command.kind == "forget":
        number = command.number or 0
        gone, _left = forget(session, data_dir, chat, number)
        return CommandOutcome(f"Forgot note {number}: “{gone}”.", view(session, chat))
    memory = view(session, chat)
    return CommandOutcome("The memory of this chat:", memory, show_memory=True)

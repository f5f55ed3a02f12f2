"""SillyTavern chat files with the lorebooks attached to the chat: the chats domain writes and reads
the file, and cannot know lorebooks (it sits below lore), so the names pass through here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlmodel import Session, col, select

from app.chats import st_io
from app.chats.core import imported
from app.chats.models import Chat
from app.lore.models import Lorebook, LorebookLink
from app.prompt.sources import PromptSources


def chat_book_names(session: Session, chat_id: int) -> list[str]:
    """Names of the lorebooks attached to the chat itself, in the order they were attached."""
    rows = session.exec(
        select(Lorebook.name)
        .join(LorebookLink, col(LorebookLink.lorebook_id) == col(Lorebook.id))
        .where(LorebookLink.chat_id == chat_id)
        .order_by(col(LorebookLink.id))
    )
    return list(dict.fromkeys(rows))


def attach_books_by_name(session: Session, chat_id: int, names: Sequence[str]) -> list[str]:
    """Attach to the chat the lorebook of each name (the oldest when two share it); returns the
    names no lorebook has."""
    missing = []
    for name in names:
        book_id = session.exec(
            select(Lorebook.id).where(Lorebook.name == name).order_by(col(Lorebook.id))
        ).first()
        if book_id is None:
            missing.append(name)
            continue
        linked = session.exec(
            select(LorebookLink.id).where(
                LorebookLink.chat_id == chat_id, LorebookLink.lorebook_id == book_id
            )
        ).first()
        if linked is None:
            session.add(LorebookLink(lorebook_id=book_id, chat_id=chat_id))
    session.flush()
    return missing


def export_chat_file(session: Session, chat: Chat, sources: PromptSources) -> bytes:
    """The chat as SillyTavern .jsonl, its settings, lorebooks and the prompt sources' keys (summary
    entries) in chat_metadata."""
    return st_io.export_chat(
        session,
        chat,
        lorebooks=chat_book_names(session, chat.id),
        extra_metadata=sources.export_chat_metadata(session, chat),
    )


@dataclass(frozen=True)
class ChatImport:
    """An imported chat and what the user is told: what arrived, and what was left out."""

    chat: Chat
    notes: list[str]  # lorebooks not found, settings or entries left out
    messages: int
    summaries: int
    lorebooks: list[str]  # the names attached

    @property
    def result(self) -> str:
        return imported.import_sentence(self.messages, self.summaries, len(self.lorebooks))


def import_chat_file(
    session: Session,
    raw: bytes,
    sources: PromptSources,
    *,
    character_id: int | None = None,
    file_name: str | None = None,
) -> ChatImport:
    """Import a SillyTavern chat, named after its file, attach the lorebooks it names that exist, and
    let the prompt sources read their keys (summary entries). A missing book or a bad entry never fails
    it: it is said in the notes."""
    done = st_io.import_chat(session, raw, character_id=character_id, file_name=file_name)
    missing = attach_books_by_name(session, done.chat.id, done.lorebooks)
    notes = [
        *done.notes,
        *(f"Lorebook “{name}” was not found; import it and attach it in Chat Settings." for name in missing),
    ]
    notes += sources.import_chat_metadata(session, done.chat, done.metadata, done.line_ids)
    session.flush()
    attached = [name for name in dict.fromkeys(done.lorebooks) if name not in missing]
    return ChatImport(done.chat, notes, done.messages, sources.summary_count(session, done.chat), attached)

"""SillyTavern chat files with the lorebooks attached to the chat: the chats domain writes and reads
the file, and cannot know lorebooks (it sits below lore), so the names pass through here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlmodel import Session, col, select

from app.chats import st_io
from app.chats.core import imported, st_group
from app.chats.models import Chat
from app.lore.models import Lorebook, LorebookLink
from app.platform.core.errors import UserError
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
    group: st_io.GroupPlan | None = None,
) -> ChatImport:
    """Import a SillyTavern chat, named after its file, attach the lorebooks it names that exist, and
    let the prompt sources read their keys (summary entries). A missing book or a bad entry never fails
    it: it is said in the notes."""
    done = st_io.import_chat(session, raw, character_id=character_id, file_name=file_name, group=group)
    missing = attach_books_by_name(session, done.chat.id, done.lorebooks)
    notes = [
        *done.notes,
        *(f"Lorebook “{name}” was not found; import it and attach it in Chat Settings." for name in missing),
    ]
    notes += sources.import_chat_metadata(session, done.chat, done.metadata, done.line_ids)
    session.flush()
    attached = [name for name in dict.fromkeys(done.lorebooks) if name not in missing]
    return ChatImport(done.chat, notes, done.messages, sources.summary_count(session, done.chat), attached)


# A group import takes its chats in one request: more is not one group's history.
MAX_GROUP_CHATS = 50


def import_group_files(
    session: Session, group_raw: bytes, chat_files: Sequence[tuple[str | None, bytes]], sources: PromptSources
) -> list[ChatImport]:
    """A SillyTavern group file and its chats (.jsonl, with or without the header line SillyTavern
    writes since PR #4805): one Sugo group chat per file, its members found by avatar key. One
    transaction: a refused file or a member not found creates nothing."""
    try:
        group = st_group.parse_group(group_raw)
    except st_group.GroupImportError as err:
        raise UserError(str(err)) from err
    if not chat_files:
        raise UserError(
            "Add the group's chats with its file: the .jsonl files from data/<user>/group chats/ "
            "(their names are listed in the group file's `chats`)."
        )
    if len(chat_files) > MAX_GROUP_CHATS:
        raise UserError(f"At most {MAX_GROUP_CHATS} chats are imported with a group at a time.")
    done = []
    for name, raw in chat_files:
        # The old layout's metadata is by chat id: the file's name without `.jsonl`.
        file_id = (name or "").replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".jsonl")
        plan = st_io.group_plan(session, group, file_id=file_id)
        done.append(import_chat_file(session, raw, sources, file_name=name, group=plan))
    return done

"""The files attached in a chat, as a prompt source: the model must know a file is there to read it.

For a turn, the attachments of the messages in the window are listed in the "retrieved_documents"
slot (just above the newest turns), each with the id read_document takes. A chat without any costs
one indexed query. The list names the tool by its function name: the file names in it are the user's
text, so the block is never read as a template.

The source also keeps the files in step: after messages change (a message deleted, its rows gone by
cascade) and every hour, files no row uses are removed, and uploads never sent are removed after a
day (app/chats/attachments.py). A branch gets copies of the rows of the messages it copies (the
files are shared: they are stored by content)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import text
from sqlmodel import Session, col, select

from app.chats import attachments
from app.chats.attachments import Attachment
from app.chats.core.attachments import human_size, type_label
from app.chats.models import Chat, Message
from app.platform.jobs import Job
from app.platform.services import Services
from app.platform.timeutil import utcnow
from app.prompt.core.builder import DynamicBlock
from app.prompt.sources import Contribution, PromptSource, Turn
from app.tools.settings import load_tool_settings

log = logging.getLogger(__name__)

TOOL_NAME = "read_document"
EXCERPT_CHARS = 60  # of the message a file came with, to tell the model which one


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1].rstrip() + "…"


def describe(attachment: Attachment) -> str:
    """`[#3] report.pdf (PDF, 12 pages, 1.2 MB)`."""
    parts = [type_label(attachment.name, attachment.kind)]
    if attachment.pages is not None:
        parts.append(f"{attachment.pages} page{'s' if attachment.pages != 1 else ''}")
    parts.append(human_size(attachment.size))
    return f"[#{attachment.id}] {attachment.name} ({', '.join(parts)})"


def files_text(lines: Sequence[str], *, tool_on: bool) -> str:
    how = (
        f"read them with {TOOL_NAME} (attachment_id is the number after #)."
        if tool_on
        else "reading documents is off in Settings → Tools & Permissions, so their contents cannot be read."
    )
    return "Files attached in this chat:\n" + "\n".join(lines) + f"\nThe user attached these files; {how}"


# Most chats have no files: one probe on the chat's index tells, before any row is built (a plain
# turn's price stays what it was before files existed).
_ANY_SENT_FILE = text("SELECT 1 FROM attachment WHERE chat_id = :chat_id AND message_id IS NOT NULL LIMIT 1")


def _has_sent_files(session, chat_id: int) -> bool:
    return session.connection().execute(_ANY_SENT_FILE, {"chat_id": chat_id}).first() is not None


class DocumentsSource(PromptSource):
    name = "documents"
    kinds = ("retrieved_documents",)
    label = "Attached files"

    def contribute(self, turn: Turn) -> Contribution | None:
        messages = {m.id: m for m in turn.history.messages}
        if not messages or not _has_sent_files(turn.session, turn.chat.id):
            return None
        stmt = (
            select(Attachment)
            .where(Attachment.chat_id == turn.chat.id, col(Attachment.message_id).in_(list(messages)))
            .order_by(col(Attachment.id))
        )
        found = list(turn.session.exec(stmt))
        if not found:
            return None
        lines = []
        for attachment in found:
            message = messages[attachment.message_id]
            sender = turn.user_name if message.role == "user" else message.name
            lines.append(f'- {describe(attachment)}, sent by {sender} with "{_excerpt(message.content)}"')
        tool_on = load_tool_settings(turn.session).allowed("documents")
        text = files_text(lines, tool_on=tool_on)
        count = len(found)
        return Contribution(
            dynamic=(DynamicBlock("retrieved_documents", "Attached files", text),),
            note=f"{count} attached file{'s' if count != 1 else ''} listed for {TOOL_NAME}.",
        )

    def messages_changed(self, services: Services, chat_id: int) -> None:
        # A deleted message's rows went by cascade: its files may be unused now. A glob of the
        # attachments folder and one query; nothing at all when no file was ever attached.
        try:
            with Session(services.engine) as session:
                attachments.remove_unused_files(session, services.settings.data_dir)
        except Exception:
            log.exception("removing unused attachment files failed")

    def jobs(self) -> Sequence[Job]:
        return (Job("documents.cleanup", cleanup, every_minutes=60, at_start=True),)

    def chat_branched(self, session: Session, source: Chat, branch: Chat) -> None:
        # The branch's messages are copies, in order, of the source's first ones.
        old_ids = list(
            session.exec(select(Message.id).where(Message.chat_id == source.id).order_by(col(Message.id)))
        )
        new_ids = list(
            session.exec(select(Message.id).where(Message.chat_id == branch.id).order_by(col(Message.id)))
        )
        mapping = dict(zip(old_ids, new_ids, strict=False))
        stmt = select(Attachment).where(
            Attachment.chat_id == source.id, col(Attachment.message_id).in_(list(mapping))
        )
        for attachment in session.exec(stmt):
            data = attachment.model_dump(exclude={"id", "chat_id", "message_id"})
            session.add(Attachment(**data, chat_id=branch.id, message_id=mapping[attachment.message_id]))
        session.flush()


def cleanup(services: Services) -> None:
    """Uploads never sent (older than a day) and files no attachment uses any more."""
    with Session(services.engine) as session:
        stale = attachments.remove_stale_uploads(session, now=utcnow())
        session.commit()
        removed = attachments.remove_unused_files(session, services.settings.data_dir)
    if stale or removed:
        log.info("attachments: %s unsent uploads and %s unused files removed", stale, removed)

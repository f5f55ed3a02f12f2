"""Files the user attaches to a message (PDFs and UTF-8 text), for the character to read with the
read_document tool (app/tools/builtin/documents.py).

Decisions:
- A file is uploaded alone first (POST /api/chats/{id}/attachments), before its message exists: the
  composer shows it as a chip, and sending the message links it (`link_attachments`, in the
  transaction that stores the message). Ids of another chat, or already linked, are refused.
- What a file is, is told by its bytes (`%PDF-`, or UTF-8 without NUL bytes), never by its name or
  the browser's type; anything else is refused. At most 20 MB a file, 10 files a message, and 10
  waiting (uploaded, not sent) per chat, so an abandoned composer cannot fill the disk.
- A message needs words besides its files: the prompt builder skips empty messages, and a turn made
  of files alone would leave the model without the user's turn (Anthropic would take the last reply
  as a prefill to continue). The composer says so before sending.
- Files are stored by content, `attachments/<2 hex>/<sha256>` under the data folder: the name on disk
  never comes from the user, and the same file sent twice is kept once. A row per attachment holds
  its name, type, size, hash and (a PDF's) page count.
- Deleting a message deletes its attachments' rows (the foreign key cascades, as deleting a chat
  does); a file no row uses any more is removed by `remove_unused_files`, run after messages change
  and every hour, which keeps files touched in the last UNUSED_GRACE so an upload whose row is not
  committed yet (or a re-upload of the same file) is never removed under it. Uploads never sent are
  removed after a day (`remove_stale_uploads`, same job).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import BinaryIO

from sqlalchemy import Index
from sqlmodel import Field, Session, SQLModel, col, delete, func, select

from app.chats.core import attachments as rules
from app.chats.core.attachments import MAX_FILES_PER_MESSAGE, NOT_READABLE
from app.chats.models import Chat
from app.platform.core.errors import NotFound, UserError
from app.platform.timeutil import utcnow

log = logging.getLogger(__name__)

FOLDER = "attachments"
# Read in pieces, so a 20 MB upload is hashed and checked without another whole copy in memory.
CHUNK = 1024 * 1024
# Uploads waiting for their message longer than this are removed.
STALE_UPLOAD = timedelta(days=1)
# A file no row uses is kept this long after it was last written or uploaded again (see above).
UNUSED_GRACE_S = 10 * 60
# Module constants read at each upload, so a test can lower them.
MAX_FILE_BYTES = rules.MAX_FILE_BYTES
MAX_WAITING_PER_CHAT = MAX_FILES_PER_MESSAGE


class Attachment(SQLModel, table=True):
    """One file attached to a message (or waiting in the composer: `message_id` None)."""

    __table_args__ = (Index("ix_attachment_message", "message_id"), Index("ix_attachment_sha256", "sha256"))

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE", index=True)
    message_id: int | None = Field(default=None, foreign_key="message.id", ondelete="CASCADE")
    name: str  # cleaned (app/chats/core/attachments.py clean_name), ≤ 200 characters
    media_type: str
    size: int
    sha256: str
    path: str  # relative to the data folder: attachments/ab/<sha256>
    pages: int | None = None  # a PDF's page count
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def kind(self) -> rules.Kind:
        return "pdf" if self.media_type == "application/pdf" else "text"

    @property
    def size_label(self) -> str:
        return rules.human_size(self.size)


def _relative_path(sha256: str) -> str:
    return f"{FOLDER}/{sha256[:2]}/{sha256}"


def file_path(data_dir: Path, attachment: Attachment) -> Path:
    # Rebuilt from the hash rather than trusted from the column: the row can never point elsewhere.
    return data_dir / _relative_path(attachment.sha256)


def pdf_page_count(path: Path) -> int:
    """The page count of a PDF, or UserError when pypdf cannot read it (damaged, encrypted)."""
    from pypdf import PdfReader  # imported when a PDF arrives: pypdf is not needed to start

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise UserError("This PDF is locked with a password; send an unlocked copy.")
        return len(reader.pages)
    except UserError:
        raise
    except Exception as err:  # pypdf raises many kinds on a damaged file
        log.info("an uploaded PDF could not be read: %s", err)
        raise UserError("This PDF could not be read (it may be damaged); try saving it again.") from None


def _receive(stream: BinaryIO, folder: Path) -> tuple[Path, int, str, bytes]:
    """Copy the upload to a temporary file in `folder`, refusing it once past the limit; returns the
    temporary path, the size, the SHA-256 and the first bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    head = b""
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=".upload-")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            while piece := stream.read(CHUNK):
                size += len(piece)
                if problem := rules.too_big(size, MAX_FILE_BYTES):
                    raise UserError(problem)
                if len(head) < CHUNK:
                    head += piece[: CHUNK - len(head)]
                digest.update(piece)
                out.write(piece)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp, size, digest.hexdigest(), head


def _is_text(path: Path) -> bool:
    """The whole file is UTF-8 without NUL bytes (read in pieces; a character split between two
    pieces is carried over)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with path.open("rb") as f:
            while piece := f.read(CHUNK):
                if b"\x00" in piece:
                    return False
                decoder.decode(piece)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def store_upload(
    session: Session, data_dir: Path, chat_id: int, *, name: str | None, stream: BinaryIO
) -> Attachment:
    """Check and store one uploaded file for `chat_id`; the row waits for its message."""
    if session.get(Chat, chat_id) is None:
        raise NotFound(f"Chat {chat_id} does not exist.")
    waiting = session.exec(
        select(func.count(col(Attachment.id))).where(
            Attachment.chat_id == chat_id, col(Attachment.message_id).is_(None)
        )
    ).one()
    if waiting >= MAX_WAITING_PER_CHAT:
        raise UserError(
            f"A message takes at most {MAX_FILES_PER_MESSAGE} files; send or remove one of those waiting first."
        )
    folder = data_dir / FOLDER
    tmp, size, sha256, head = _receive(stream, folder)
    try:
        if size == 0:
            raise UserError("This file is empty.")
        kind: rules.Kind | None = (
            "pdf" if head.startswith(rules.PDF_MAGIC) else "text" if _is_text(tmp) else None
        )
        if kind is None:
            raise UserError(NOT_READABLE)
        pages = pdf_page_count(tmp) if kind == "pdf" else None
        final = data_dir / _relative_path(sha256)
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            os.utime(final)  # in use again: the sweep's grace starts anew
        else:
            os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    clean = rules.clean_name(name, kind)
    attachment = Attachment(
        chat_id=chat_id,
        name=clean,
        media_type=rules.media_type(clean, kind),
        size=size,
        sha256=sha256,
        path=_relative_path(sha256),
        pages=pages,
    )
    session.add(attachment)
    session.flush()
    return attachment


def get_attachment(session: Session, chat_id: int, attachment_id: int) -> Attachment:
    attachment = session.get(Attachment, attachment_id)
    if attachment is None or attachment.chat_id != chat_id:
        raise NotFound(f"File {attachment_id} is not attached in chat {chat_id}.")
    return attachment


def link_attachments(session: Session, chat_id: int, message_id: int, ids: Sequence[int]) -> list[Attachment]:
    """Attach waiting uploads to the message just stored (in its transaction)."""
    wanted = list(dict.fromkeys(ids))
    if len(wanted) > MAX_FILES_PER_MESSAGE:
        raise UserError(f"A message takes at most {MAX_FILES_PER_MESSAGE} files.")
    rows = {a.id: a for a in session.exec(select(Attachment).where(col(Attachment.id).in_(wanted)))}
    for attachment_id in wanted:
        attachment = rows.get(attachment_id)
        if attachment is None or attachment.chat_id != chat_id:
            raise UserError(f"File {attachment_id} was not uploaded to this chat; upload it again.")
        if attachment.message_id is not None:
            raise UserError(f"File {attachment.name} is already attached to another message.")
    for attachment_id in wanted:
        rows[attachment_id].message_id = message_id
        session.add(rows[attachment_id])
    session.flush()
    return [rows[i] for i in wanted]


def remove_waiting(session: Session, chat_id: int, attachment_id: int) -> None:
    """Take an upload back out of the composer (a sent one stays with its message)."""
    attachment = get_attachment(session, chat_id, attachment_id)
    if attachment.message_id is not None:
        raise UserError("This file belongs to a sent message; delete the message to remove it.")
    session.delete(attachment)
    session.flush()


def message_attachments(session: Session, message_ids: Iterable[int]) -> dict[int, list[Attachment]]:
    """The attachments of these messages, by message id, in upload order (one query)."""
    ids = [i for i in message_ids if i is not None]
    if not ids:
        return {}
    found: dict[int, list[Attachment]] = {}
    stmt = select(Attachment).where(col(Attachment.message_id).in_(ids)).order_by(col(Attachment.id))
    for attachment in session.exec(stmt):
        found.setdefault(attachment.message_id, []).append(attachment)
    return found


def chat_attachments(session: Session, chat_id: int) -> list[Attachment]:
    stmt = select(Attachment).where(Attachment.chat_id == chat_id).order_by(col(Attachment.id))
    return list(session.exec(stmt))


def waiting_attachments(session: Session, chat_id: int) -> list[Attachment]:
    """Uploads of the chat not sent yet (the composer's chips)."""
    stmt = select(Attachment).where(Attachment.chat_id == chat_id, col(Attachment.message_id).is_(None))
    return list(session.exec(stmt.order_by(col(Attachment.id))))


def remove_stale_uploads(session: Session, *, now: datetime) -> int:
    """Delete uploads that waited for their message longer than STALE_UPLOAD; their files go with
    the next `remove_unused_files`."""
    result = session.exec(
        delete(Attachment).where(  # type: ignore[call-overload]
            col(Attachment.message_id).is_(None), col(Attachment.created_at) < now - STALE_UPLOAD
        )
    )
    session.flush()
    return result.rowcount or 0


def remove_unused_files(session: Session, data_dir: Path, *, grace_s: float = UNUSED_GRACE_S) -> int:
    """Remove stored files no attachment row uses, unless written or uploaded again within `grace_s`."""
    folder = data_dir / FOLDER
    if not folder.is_dir():
        return 0
    files = [p for p in folder.glob("*/*") if p.is_file() and not p.name.startswith(".")]
    if not files:
        return 0
    used = set(session.exec(select(Attachment.sha256).distinct()))
    cutoff = time.time() - grace_s
    removed = 0
    for path in files:
        if path.name in used:
            continue
        try:
            if path.stat().st_mtime > cutoff:
                continue
            path.unlink()
            removed += 1
        except FileNotFoundError:
            continue
    # Temporary files of uploads cut off by a crash.
    for tmp in folder.glob(".upload-*"):
        try:
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink()
        except FileNotFoundError:
            continue
    return removed

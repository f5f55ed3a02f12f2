"""read_document: the text of a file the user attached to a message in this chat.

PDFs are read page by page with pypdf (at most 50 pages a call, chosen with `pages`); text files are
decoded as UTF-8. At most 20,000 characters come back per call, with a line saying how to read on
(`offset`). Only files attached to a sent message of this chat are read: an upload still waiting in
the composer, or another chat's file, is refused by its id. A PDF pypdf cannot parse (damaged,
hostile, locked) is a calm error for the model, never a crash of the reply."""

from __future__ import annotations

import logging
from pathlib import Path

from pydantic import BaseModel, Field
from sqlmodel import Session

from app.chats.attachments import Attachment, file_path
from app.tools.core.documents import MAX_CHARS_PER_CALL, MAX_PAGES_PER_CALL, cut_text, page_span
from app.tools.registry import Tool, ToolContext, ToolError, ToolResult

log = logging.getLogger(__name__)


class ReadDocumentArgs(BaseModel):
    attachment_id: int = Field(
        ge=1, le=2**62, description="The file's number, as the list of attached files shows it after #."
    )
    pages: str | None = Field(
        default=None,
        max_length=20,
        description=f'PDF only: one page ("3") or a range ("3-5"), at most {MAX_PAGES_PER_CALL} pages; '
        f"leave out to start at page 1.",
    )
    offset: int = Field(
        default=0,
        ge=0,
        le=100_000_000,
        description=f"Characters to skip, to read on past the first {MAX_CHARS_PER_CALL:,} "
        "(the result says which offset to use).",
    )


def _pdf_text(path: Path, pages: str | None) -> tuple[str, str]:
    """The text of the chosen pages, each under a "[Page n]" line, and a header naming them."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ToolError("This PDF is locked with a password; Sugo cannot read it.")
        count = len(reader.pages)
        try:
            first, last = page_span(pages, count)
        except ValueError as err:
            raise ToolError(str(err)) from None
        parts = []
        for number in range(first, last + 1):
            text = (reader.pages[number - 1].extract_text() or "").strip()
            parts.append(f"[Page {number}]\n{text}" if text else f"[Page {number}]\n(no text on this page)")
    except ToolError:
        raise
    except Exception as err:  # pypdf raises many kinds on a damaged or hostile file
        log.info("a PDF could not be read: %s", err)
        raise ToolError("This PDF could not be read (it may be damaged).") from None
    if all(p.endswith("(no text on this page)") for p in parts):
        raise ToolError(
            f"Pages {first}-{last} of this PDF have no text layer (scanned images?); Sugo reads text only."
        )
    more = f" of {count}" + (
        f'; read on with pages="{last + 1}-{min(count, last + MAX_PAGES_PER_CALL)}"' if last < count else ""
    )
    return "\n\n".join(parts), f"pages {first}-{last}{more}"


def read_document(ctx: ToolContext, args: ReadDocumentArgs) -> ToolResult:
    with Session(ctx.services.engine) as session:
        attachment = session.get(Attachment, args.attachment_id)
        if attachment is None or attachment.chat_id != ctx.chat_id or attachment.message_id is None:
            raise ToolError(f"There is no file #{args.attachment_id} attached to a message in this chat.")
        session.expunge(attachment)
    path = file_path(ctx.services.settings.data_dir, attachment)
    if not path.is_file():
        raise ToolError(f"The file {attachment.name} is no longer stored.")
    if attachment.kind == "pdf":
        text, span = _pdf_text(path, args.pages)
        header = f"{attachment.name} (PDF, {span})"
    else:
        if args.pages:
            raise ToolError(f"{attachment.name} is a text file: it has no pages; use offset to read on.")
        text = path.read_text(encoding="utf-8-sig", errors="replace")
        header = f"{attachment.name} ({len(text):,} characters)"
    try:
        cut = cut_text(text, args.offset)
    except ValueError as err:
        raise ToolError(str(err)) from None
    body = f"{header}\n\n{cut.text}" + (f"\n{cut.note}" if cut.note else "")
    return ToolResult(text=body, notice=f"Read {attachment.name}")


TOOLS = [
    Tool(
        name="read_document",
        description=(
            "Read the text of a file the user attached to a message in this chat (a PDF or a text file: "
            "code, JSON, YAML, Markdown). The prompt lists the attached files with their numbers."
        ),
        args=ReadDocumentArgs,
        run=read_document,
        permission="documents",
        macro="document_tool",
        family="document",
        label="Read an attached file",
        timeout_s=30.0,
    )
]

"""Files attached to messages, the pure rules: what a file is (by its bytes, never its name), what
its name becomes, and how its size reads. No I/O here; app/chats/attachments.py stores the files."""

from __future__ import annotations

import unicodedata
from typing import Literal

MAX_FILE_BYTES = 20 * 1024 * 1024  # per file
MAX_FILES_PER_MESSAGE = 10
MAX_NAME_CHARS = 200
PDF_MAGIC = b"%PDF-"
NOT_READABLE = "Sugo reads PDFs and text files; this file is neither."

Kind = Literal["pdf", "text"]

# Text files by ending, for the label the prompt shows and the type kept with the file; anything else
# that is UTF-8 text is text/plain. Downloads always send text as text/plain (never run as a page).
TEXT_TYPES = {
    "md": ("text/markdown", "Markdown"),
    "markdown": ("text/markdown", "Markdown"),
    "json": ("application/json", "JSON"),
    "yaml": ("application/yaml", "YAML"),
    "yml": ("application/yaml", "YAML"),
    "py": ("text/x-python", "Python"),
    "js": ("text/javascript", "JavaScript"),
    "ts": ("text/x-typescript", "TypeScript"),
    "csv": ("text/csv", "CSV"),
    "html": ("text/html", "HTML"),
    "xml": ("application/xml", "XML"),
    "toml": ("application/toml", "TOML"),
    "txt": ("text/plain", "text"),
}


def sniff_kind(data: bytes) -> Kind | None:
    """ "pdf" when the bytes start as a PDF, "text" when they are UTF-8 without NUL bytes, else None."""
    if data.startswith(PDF_MAGIC):
        return "pdf"
    if b"\x00" in data:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "text"


def clean_name(name: str | None, kind: Kind) -> str:
    """The name the user's browser sent, made safe to show and to offer as a download name: the last
    path part only, control characters and slashes dropped, at most MAX_NAME_CHARS (the ending kept)."""
    raw = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    kept = "".join(
        " " if ch.isspace() else ch for ch in raw if unicodedata.category(ch)[0] != "C" or ch.isspace()
    )
    kept = " ".join(kept.split()).strip(" .")
    if not kept:
        kept = "document.pdf" if kind == "pdf" else "file.txt"
    if len(kept) > MAX_NAME_CHARS:
        stem, dot, ext = kept.rpartition(".")
        if dot and 0 < len(ext) <= 10:
            kept = stem[: MAX_NAME_CHARS - len(ext) - 1].rstrip() + "." + ext
        else:
            kept = kept[:MAX_NAME_CHARS]
    return kept


def media_type(name: str, kind: Kind) -> str:
    if kind == "pdf":
        return "application/pdf"
    ext = name.rpartition(".")[2].lower() if "." in name else ""
    return TEXT_TYPES.get(ext, ("text/plain", "text"))[0]


def type_label(name: str, kind: Kind) -> str:
    """ "PDF", "Python", "JSON", "text": for the prompt's list of files."""
    if kind == "pdf":
        return "PDF"
    ext = name.rpartition(".")[2].lower() if "." in name else ""
    return TEXT_TYPES.get(ext, ("text/plain", "text"))[1]


def human_size(size: int) -> str:
    """1.2 MB, 340 KB, 12 bytes."""
    if size < 1024:
        return f"{size} byte{'s' if size != 1 else ''}"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def too_big(size: int, limit: int = MAX_FILE_BYTES) -> str | None:
    if size > limit:
        return f"This file is larger than {human_size(limit)}; Sugo takes files up to {human_size(limit)}."
    return None

"""File names for downloads: one cleaner for the names users give things, and the
Content-Disposition header that carries any of them (RFC 6266, with RFC 5987's `filename*`)."""

from __future__ import annotations

import unicodedata
from urllib.parse import quote

MAX_STEM = 100  # characters; a browser or a file system refuses much longer names


def safe_stem(name: str, fallback: str = "download") -> str:
    """A display name made fit for a file name: letters and digits of any script, spaces, `-` and
    `_` kept (so "小明" stays "小明"), tabs and line breaks made spaces, everything else (slashes,
    quotes, dots, control characters) dropped, runs of spaces collapsed, at most MAX_STEM characters; `fallback` when nothing is left."""
    kept = "".join(ch if ch.isalnum() or ch in "-_" else " " if ch.isspace() else "" for ch in name)
    stem = " ".join(kept.split())[:MAX_STEM].strip()
    return stem or fallback


def _ascii(filename: str, fallback: str) -> str:
    # Accents come off (é → e); any other character outside printable ASCII becomes "_". A name
    # with no ASCII letter or digit left ("小明.json" → "__.json") gives way to the fallback.
    chars = []
    for ch in unicodedata.normalize("NFKD", filename):
        if unicodedata.combining(ch):
            continue
        chars.append(ch if " " <= ch <= "~" and ch not in '"\\' else "_")
    stem, dot, ext = "".join(chars).rpartition(".")
    if not dot:
        stem, ext = ext, ""
    if not any(ch.isalnum() for ch in stem):
        stem = fallback
    return f"{stem}.{ext}" if ext else stem


def content_disposition(filename: str, *, fallback: str = "download") -> str:
    """`attachment; filename="<ASCII>"`, plus `filename*=UTF-8''<percent-encoded>` when the name
    is not plain ASCII, so "小明.json" downloads as 小明.json (and old clients get an ASCII name)."""
    clean = "".join(ch for ch in filename if ch.isprintable() and ch not in '"\\/').strip() or fallback
    ascii_name = _ascii(clean, fallback)
    value = f'attachment; filename="{ascii_name}"'
    if ascii_name != clean:
        value += f"; filename*=UTF-8''{quote(clean, safe='')}"
    return value


def attachment(name: str, ext: str, *, fallback: str = "download") -> str:
    """The Content-Disposition value for downloading `name` (a display name, e.g. a character's)
    as a `.ext` file."""
    return content_disposition(f"{safe_stem(name, fallback)}.{ext}", fallback=fallback)

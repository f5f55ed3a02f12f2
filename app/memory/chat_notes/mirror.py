"""The Markdown mirror of a chat's memory: `DATA_DIR/chats/<chat id>.md`, the text @ attaches.

Decisions:
- Written only when its bytes would change (same bytes, same file: its mtime stays), through a
  temporary file in the same folder and a rename, so a reader never sees half a file.
- The database is the truth: a missing or hand-edited file is written again from it (at start, and
  whenever the memory is read to be attached); a chat without memory has no file.
- The name is the chat's id and nothing the user typed."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

FOLDER = "chats"
_NAME = re.compile(r"^([1-9][0-9]{0,18})\.md$")


def mirror_path(data_dir: Path, chat_id: int) -> Path:
    return data_dir / FOLDER / f"{int(chat_id)}.md"


def sync(data_dir: Path, chat_id: int, text: str) -> bool:
    """Make the file hold `text` (remove it when `text` is empty); True when the disk changed."""
    path = mirror_path(data_dir, chat_id)
    if not text:
        return remove(data_dir, chat_id)
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".chat-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return True


def remove(data_dir: Path, chat_id: int) -> bool:
    try:
        mirror_path(data_dir, chat_id).unlink()
    except FileNotFoundError:
        return False
    return True


def mirrored_ids(data_dir: Path) -> Iterable[int]:
    """The chat ids that have a file (names Sugo did not write are left alone)."""
    folder = data_dir / FOLDER
    if not folder.is_dir():
        return []
    return [int(m.group(1)) for p in folder.iterdir() if (m := _NAME.match(p.name))]

"""A chat's memory made by rules, no model call: the summary's sections and its Markdown file.

The service gathers what happened in the chat (the requests, the last reply, the files attached or
read, the slash commands, any older history folded into a summary), calls `build_summary`, stores
`summary.to_json()` with the chat and mirrors `render_markdown(...)` to the chat's file. Everything
kept is redacted (`text.redact`) before it is cut, so no secret reaches the database or the file.

Decisions (where the issue is silent):
- Requests are one line each (whitespace collapsed); a request that is blank after that is left out
  (it asked for nothing). The result and the previous summary keep their paragraphs: runs of spaces
  and tabs become one space, lines are stripped, and more than one blank line becomes one.
- Files: the first "attached" of a name marks it written; attached again with a different digest,
  edited; with the same non-empty digest, unchanged (an empty digest is unknown, so it counts as
  edited); "read" marks it read. The latest action wins, and every event (an unchanged attach too)
  counts as touching the file for "the 14 most recently touched". They are listed in the order first
  seen. A name is stripped, whitespace collapsed, redacted and cut to FILE_NAME_CHARS; a blank name is
  skipped. Two names equal after that are one file.
- Commands are redacted too (a "/connect sk-…" must not be stored) and made one line.
- The Markdown has no escaping: it is read by the user and quoted whole with « » for another chat.
  Only the title, requests, file names, commands and notes are forced to one line, so none of them
  can start a section of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.memory.chat_notes.core.commands import is_memory_command
from app.memory.chat_notes.core.limits import (
    COMMAND_CHARS,
    FILE_NAME_CHARS,
    FIRST_KEPT,
    LAST_KEPT,
    LONG_CHAT_REQUESTS,
    MAX_COMMANDS,
    MAX_FILES,
    MAX_NOTES,
    NOTE_CHARS,
    PREVIOUS_SUMMARY_CHARS,
    REQUEST_CHARS,
    RESULT_CHARS,
)
from app.memory.chat_notes.core.text import cut, redact

__all__ = [
    "COMMAND_CHARS",
    "FILE_NAME_CHARS",
    "FIRST_KEPT",
    "LAST_KEPT",
    "LONG_CHAT_REQUESTS",
    "MAX_COMMANDS",
    "MAX_FILES",
    "MAX_NOTES",
    "NOTE_CHARS",
    "PREVIOUS_SUMMARY_CHARS",
    "REQUEST_CHARS",
    "RESULT_CHARS",
    "ChatSummary",
    "FileEvent",
    "FileMark",
    "build_summary",
    "file_marks",
    "pick_requests",
    "previous_summary_text",
    "recent_commands",
    "render_markdown",
    "result_text",
]

_MARKS = ("written", "edited", "read")
TITLE_CHARS = 200


@dataclass(frozen=True)
class FileMark:
    name: str
    mark: Literal["written", "edited", "read"]


@dataclass(frozen=True)
class FileEvent:
    """One thing that happened to a file, given in the order it happened."""

    name: str
    action: Literal["attached", "read"]
    digest: str = ""


@dataclass(frozen=True)
class ChatSummary:
    requests: tuple[str, ...] = ()
    result: str = ""
    files: tuple[FileMark, ...] = ()
    commands: tuple[str, ...] = ()
    previous_summary: str = ""

    def is_empty(self) -> bool:
        return not (self.requests or self.result or self.files or self.commands or self.previous_summary)

    def to_json(self) -> dict:
        return {
            "requests": list(self.requests),
            "result": self.result,
            "files": [{"name": f.name, "mark": f.mark} for f in self.files],
            "commands": list(self.commands),
            "previous_summary": self.previous_summary,
        }

    @classmethod
    def from_json(cls, data: dict | None) -> ChatSummary:
        """The summary stored as `to_json()`; a field of the wrong shape reads as empty, never raises."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            requests=_strings(data.get("requests")),
            result=_string(data.get("result")),
            files=tuple(
                FileMark(item["name"], item["mark"])
                for item in _list(data.get("files"))
                if isinstance(item, dict)
                and isinstance(item.get("name"), str)
                and item["name"]
                and item.get("mark") in _MARKS
            ),
            commands=_strings(data.get("commands")),
            previous_summary=_string(data.get("previous_summary")),
        )


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(item for item in _list(value) if isinstance(item, str) and item)


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


_SPACES = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n{3,}")


def _paragraphs(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = (line.strip() for line in _SPACES.sub(" ", text).split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def _request(text: str) -> str:
    return cut(_one_line(redact(text)), REQUEST_CHARS)


def pick_requests(first: Sequence[str], last: Sequence[str], total: int) -> tuple[str, ...]:
    """The requests kept: all of up to 7, else the first 2 and the last 4; each one line, redacted, cut.

    `first` holds up to the first 7 requests in order, `last` up to the last 4 in order, `total` how
    many the chat has (the service reads only these, never the whole chat).
    """
    if total <= LONG_CHAT_REQUESTS:
        chosen = list(first[:total])
    else:
        chosen = [*first[:FIRST_KEPT], *last[-LAST_KEPT:]]
    return tuple(request for request in map(_request, chosen) if request)


def result_text(reply: str) -> str:
    """The last reply as kept: redacted, paragraphs kept, cut to RESULT_CHARS."""
    return cut(_paragraphs(redact(reply)), RESULT_CHARS)


def file_marks(events: Sequence[FileEvent]) -> tuple[FileMark, ...]:
    """Up to 14 files, the most recently touched, in the order first seen, each written, edited or read."""
    marks: dict[str, Literal["written", "edited", "read"]] = {}
    digests: dict[str, str] = {}
    touched: dict[str, int] = {}
    for order, event in enumerate(events):
        name = cut(_one_line(redact(event.name)), FILE_NAME_CHARS)
        if not name:
            continue
        if event.action == "read":
            marks[name] = "read"
        elif name not in digests:
            marks[name] = "written"
            digests[name] = event.digest
        else:
            if not event.digest or event.digest != digests[name]:
                marks[name] = "edited"
            digests[name] = event.digest
        touched[name] = order
    recent = set(sorted(touched, key=touched.__getitem__)[-MAX_FILES:])
    return tuple(FileMark(name, marks[name]) for name in marks if name in recent)


def recent_commands(commands: Sequence[str]) -> tuple[str, ...]:
    """The last 8 slash commands, one line each, redacted and cut; memory commands left out."""
    kept = [cut(_one_line(redact(c)), COMMAND_CHARS) for c in commands if not is_memory_command(c)]
    return tuple(c for c in kept if c)[-MAX_COMMANDS:]


def previous_summary_text(text: str) -> str:
    """Older history folded into a summary or recap, as kept: redacted, paragraphs kept, cut."""
    return cut(_paragraphs(redact(text)), PREVIOUS_SUMMARY_CHARS)


def build_summary(
    *,
    first: Sequence[str],
    last: Sequence[str],
    total: int,
    reply: str,
    files: Sequence[FileEvent],
    commands: Sequence[str],
    previous: str,
) -> ChatSummary:
    """The chat's summary from what the service gathered."""
    return ChatSummary(
        requests=pick_requests(first, last, total),
        result=result_text(reply),
        files=file_marks(files),
        commands=recent_commands(commands),
        previous_summary=previous_summary_text(previous),
    )


def render_markdown(title: str, summary: ChatSummary, notes: Sequence[str]) -> str:
    """The chat's memory file: the same input always gives the same text, ending in one newline."""
    sections = [f"# Memory of the chat “{cut(_one_line(title), TITLE_CHARS)}”"]
    if summary.requests:
        sections.append("## Requests\n" + "\n".join(f"- {_one_line(r)}" for r in summary.requests))
    if summary.result:
        sections.append("## Result\n" + summary.result.strip())
    if summary.files:
        sections.append("## Files\n" + "\n".join(f"- {_one_line(f.name)} ({f.mark})" for f in summary.files))
    if summary.commands:
        sections.append("## Commands\n" + "\n".join(f"- {_one_line(c)}" for c in summary.commands))
    if summary.previous_summary:
        sections.append("## Previous summary\n" + summary.previous_summary.strip())
    kept_notes = [_one_line(note) for note in notes if note.strip()]
    if kept_notes:
        sections.append("## Notes\n" + "\n".join(f"{n}. {note}" for n, note in enumerate(kept_notes, 1)))
    return "\n\n".join(sections) + "\n"

"""Chat Settings → Lorebooks: one row per lorebook, saying where it comes from in this chat. A book
applies through this chat's own link, through one of its characters or its persona, or in every
chat (global); only the chat's own link is changed from Chat Settings. Pure: plain data in, rows out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Via:
    """A way a book applies in the chat other than the chat's own link, and where to change it."""

    kind: str  # "character", "persona" or "global"
    name: str  # the character's or persona's name; "" for global
    href: str

    @property
    def label(self) -> str:
        return "global" if self.kind == "global" else f"the {self.kind} {self.name}"

    @property
    def change(self) -> str:
        return "change on the lorebook page" if self.kind == "global" else f"change on the {self.kind} page"


@dataclass(frozen=True)
class BookRow:
    id: int
    name: str
    enabled: bool
    in_chat: bool  # attached to this chat itself
    via: tuple[Via, ...] = ()

    @property
    def locked(self) -> bool:
        """It applies whatever this chat's box says: shown checked, and not changed here."""
        return self.enabled and bool(self.via)

    @property
    def applies(self) -> bool:
        return self.enabled and (self.in_chat or bool(self.via))


@dataclass(frozen=True)
class BookInfo:
    id: int
    name: str
    enabled: bool
    is_global: bool


def chat_book_rows(
    books: Sequence[BookInfo],
    *,
    in_chat: set[int],
    characters: Mapping[int, Sequence[tuple[int, str]]],
    personas: Mapping[int, Sequence[tuple[int, str]]],
) -> list[BookRow]:
    """A row per book, in the order given. `characters` and `personas` map a book id to the
    (id, name) of this chat's characters and persona it is attached to."""
    rows = []
    for book in books:
        via = [Via("character", name, f"/characters/{cid}") for cid, name in characters.get(book.id, ())]
        via += [Via("persona", name, "/personas") for _, name in personas.get(book.id, ())]
        if book.is_global:
            via.append(Via("global", "", f"/lorebooks/{book.id}"))
        rows.append(BookRow(book.id, book.name, book.enabled, book.id in in_chat, tuple(via)))
    return rows

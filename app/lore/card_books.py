"""A card's embedded lorebook (`character_book`): imported as a lorebook attached to the character,
editable like any other, and written back into the card when it is exported. Lorebooks sit above
characters, so the card's import and export go through here when a book is involved."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from app.characters import service as characters
from app.characters.models import Character
from app.lore.service import character_book_for, import_character_book


@dataclass
class ImportedCard:
    character: Character
    notes: list[str]  # what the import changed, for the user (lorebook entries turned off, and why)
    reused_book: int | None = None  # the stored lorebook linked because the card's book had its entries


def import_card(session: Session, raw: bytes, filename: str | None = None) -> ImportedCard:
    """Import a card; its embedded book becomes a lorebook attached to the character (or, when an
    identical book is already stored, that one is attached). One transaction: a refused card or
    book creates nothing."""
    char = characters.import_card(session, raw, filename)
    notes: list[str] = []
    reused = None
    if char.character_book is not None:
        book = import_character_book(
            session, char.character_book, character_id=char.id, name=f"{char.name}'s lorebook"
        )
        notes = [f"In {book.book.name}: {note}" for note in book.notes]
        if book.reused:
            reused = book.book.id
            notes.append(
                f"Its lorebook “{book.book.name}” was already in your lorebooks with the same entries: "
                f"{char.name} uses that one, no copy was made."
            )
    return ImportedCard(char, notes, reused)


def export_card(session: Session, char: Character, *, fmt: str, spec: str | None = None) -> bytes:
    """The card as PNG or JSON, carrying its lorebook as it is now (the original, byte for byte,
    until the attached lorebook is edited)."""
    book = character_book_for(session, char.id, original=char.character_book)
    if fmt == "png":
        return characters.export_card_png(session, char, character_book=book)
    return characters.export_card_json(char, spec=spec, character_book=book)

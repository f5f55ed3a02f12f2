"""The compiled-lorebook cache (app/lore/prompting.py::CompiledBooks) never holds a book's old
entries under a newer stamp, on SQLite and on PostgreSQL (issue 26): another server's save landing
between a turn's reads, and a new book given a deleted book's id."""

from __future__ import annotations

import json

from sqlmodel import Session

from app.lore import service
from app.lore.prompting import CompiledBooks

NO_CHAT = 0  # global books only: no links to read


def _contents(cache: CompiledBooks, session: Session) -> list[str]:
    stamps = service.book_versions_for_chat(session, NO_CHAT, [], None)
    _, entries, _ = cache.load(session, stamps, char="Aria", user="Rowan")
    return [e.content for e in entries]


def test_a_save_landing_between_a_turns_reads_is_read_again_next_turn(database, monkeypatch):
    with Session(database) as session:
        book_id = service.create_book(session, "Vellmar", is_global=True).id
        entry_id = service.save_entry(session, book_id, {"keys": ["dragon"], "content": "Old text."}).id
        session.commit()
    cache = CompiledBooks()
    read_rows = service.books_by_id

    def another_server_saves_first(session, book_ids):
        # The other server's save commits after this turn read the entries, before it reads the book.
        with Session(database) as other:
            service.save_entry(other, book_id, {"keys": ["dragon"], "content": "New text."}, entry_id)
            other.commit()
        monkeypatch.setattr(service, "books_by_id", read_rows)
        return read_rows(session, book_ids)

    monkeypatch.setattr(service, "books_by_id", another_server_saves_first)
    with Session(database) as turn:
        assert _contents(cache, turn) == ["Old text."]  # this turn read before the save
    with Session(database) as turn:
        assert _contents(cache, turn) == ["New text."]  # the next one reads it


def _import_global(session: Session, content: str) -> int:
    """A World Info file imported, used in every chat: at version 0, as imports stay until edited."""
    raw = json.dumps({"entries": {"0": {"uid": 0, "key": ["gate"], "content": content}}}).encode()
    book = service.import_file(session, raw, filename="gate.json").book
    book.is_global = True  # set on the row, as the import left it: still version 0
    session.add(book)
    session.commit()
    assert book.version == 0
    return book.id


def test_a_new_book_with_a_deleted_book_s_id_is_not_served_the_old_entries(database):
    cache = CompiledBooks()
    with Session(database) as session:
        old_id = _import_global(session, "The old gate.")
        assert _contents(cache, session) == ["The old gate."]
        service.delete_book(session, old_id)
        session.commit()
        new_id = _import_global(session, "The new gate.")
        if database.dialect.name == "sqlite":
            assert new_id == old_id  # SQLite gave the deleted last row's id again
        assert _contents(cache, session) == ["The new gate."]

"""Lorebooks: stored books and entries, files in and out, and which books a chat uses."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from sqlalchemy import String, cast
from sqlmodel import Session, col, or_, select

from app.lore.core.activation import LoreBook, LoreEntry, turn_off_unrunnable
from app.lore.core.chat_books import BookInfo, BookRow, chat_book_rows
from app.lore.core.twins import book_fingerprint, free_name
from app.lore.core.worldinfo import (
    LoreFileError,
    encode_file,
    export_character_book,
    export_marinara_lorebook,
    export_world_info,
    parse_character_book,
    parse_lore_file,
)
from app.lore.models import Lorebook, LorebookEntry, LorebookLink
from app.platform.core.downloads import safe_stem
from app.platform.core.errors import NotFound, UserError
from app.platform.timeutil import utcnow

BOOK_FIELDS = tuple(f.name for f in dataclasses.fields(LoreBook) if f.name != "id")
ENTRY_FIELDS = tuple(f.name for f in dataclasses.fields(LoreEntry) if f.name not in ("id", "book_id"))
EXPORT_FORMATS = ("world_info", "marinara", "character_book")


# --- between rows and the scan's plain data ----------------------------------------------------


def book_data(book: Lorebook) -> LoreBook:
    return LoreBook(id=book.id, **{f: getattr(book, f) for f in BOOK_FIELDS})  # type: ignore[arg-type]


def entry_data(entry: LorebookEntry) -> LoreEntry:
    values = {f: getattr(entry, f) for f in ENTRY_FIELDS}
    values["keys"], values["secondary_keys"] = tuple(entry.keys), tuple(entry.secondary_keys)
    return LoreEntry(id=entry.id, book_id=entry.lorebook_id, **values)  # type: ignore[arg-type]


def _entry_row(book_id: int, entry: LoreEntry) -> LorebookEntry:
    values = {f: getattr(entry, f) for f in ENTRY_FIELDS}
    values["keys"], values["secondary_keys"] = list(entry.keys), list(entry.secondary_keys)
    return LorebookEntry(lorebook_id=book_id, file_id=entry.id, **values)


def _file_entry(entry: LorebookEntry) -> LoreEntry:
    """The entry as export functions want it: with the id it had in its file, when it had one."""
    data = entry_data(entry)
    return dataclasses.replace(data, id=entry.file_id if entry.file_id is not None else entry.id)


# --- books -------------------------------------------------------------------------------------


def list_books(session: Session) -> list[Lorebook]:
    return list(session.exec(select(Lorebook).order_by(Lorebook.name, Lorebook.id)))


def get_book(session: Session, book_id: int) -> Lorebook:
    book = session.get(Lorebook, book_id)
    if book is None:
        raise NotFound(f"Lorebook {book_id} does not exist.")
    return book


def touch(session: Session, book: Lorebook) -> None:
    """Mark the book changed: its version goes up by one in SQL (`version = version + 1`), so two
    servers saving the same book at once give it two versions, never one version twice (each
    server's compiled-book cache holds a book per version: a version written twice would keep one
    server on the first save's entries). The attribute reads back from the row after the flush."""
    book.version = Lorebook.version + 1  # type: ignore[assignment]
    book.updated_at = utcnow()
    session.add(book)


def create_book(session: Session, name: str, **fields) -> Lorebook:
    name = name.strip()
    if not name:
        raise UserError("A lorebook needs a name.")
    book = Lorebook(name=name, **fields)
    session.add(book)
    session.flush()
    return book


def update_book(session: Session, book_id: int, **fields) -> Lorebook:
    book = get_book(session, book_id)
    for key, value in fields.items():
        if key == "name":
            value = str(value).strip()
            if not value:
                raise UserError("A lorebook needs a name.")
        setattr(book, key, value)
    touch(session, book)
    session.flush()
    return book


def delete_book(session: Session, book_id: int) -> None:
    session.delete(get_book(session, book_id))
    session.flush()


def entry_counts(session: Session) -> dict[int, int]:
    from sqlalchemy import func

    rows = session.exec(select(LorebookEntry.lorebook_id, func.count()).group_by(LorebookEntry.lorebook_id))
    return dict(rows.all())


# --- entries -----------------------------------------------------------------------------------


def list_entries(session: Session, book_id: int, *, query: str = "") -> list[LorebookEntry]:
    stmt = select(LorebookEntry).where(LorebookEntry.lorebook_id == book_id)
    if query.strip():
        like = f"%{query.strip()}%"
        stmt = stmt.where(
            or_(
                col(LorebookEntry.title).ilike(like),
                col(LorebookEntry.content).ilike(like),
                cast(LorebookEntry.keys, String).ilike(like),
            )
        )  # type: ignore[arg-type]
    return list(session.exec(stmt.order_by(LorebookEntry.order, LorebookEntry.id)))


def get_entry(session: Session, book_id: int, entry_id: int) -> LorebookEntry:
    entry = session.get(LorebookEntry, entry_id)
    if entry is None or entry.lorebook_id != book_id:
        raise NotFound(f"Entry {entry_id} is not in lorebook {book_id}.")
    return entry


def save_entry(session: Session, book_id: int, values: dict, entry_id: int | None = None) -> LorebookEntry:
    """Create or update an entry from already validated values (see schemas.EntryIn)."""
    book = get_book(session, book_id)
    entry = get_entry(session, book_id, entry_id) if entry_id else LorebookEntry(lorebook_id=book_id)
    for key, value in values.items():
        setattr(entry, key, list(value) if key in ("keys", "secondary_keys") else value)
    entry.updated_at = utcnow()
    session.add(entry)
    touch(session, book)
    session.flush()
    return entry


def delete_entry(session: Session, book_id: int, entry_id: int) -> None:
    session.delete(get_entry(session, book_id, entry_id))
    touch(session, get_book(session, book_id))
    session.flush()


def set_entries_enabled(
    session: Session, book_id: int, entry_ids: Iterable[int] | None, enabled: bool
) -> int:
    """Bulk enable or disable: the given entries, or all of the book's when `entry_ids` is None."""
    book = get_book(session, book_id)
    stmt = select(LorebookEntry).where(LorebookEntry.lorebook_id == book_id)
    if entry_ids is not None:
        stmt = stmt.where(col(LorebookEntry.id).in_(list(entry_ids)))
    changed = 0
    for entry in session.exec(stmt):
        if entry.enabled != enabled:
            entry.enabled = enabled
            session.add(entry)
            changed += 1
    touch(session, book)
    session.flush()
    return changed


# --- links ---------------------------------------------------------------------------------------

LINK_TARGETS = ("chat", "character", "persona")


def links_of(session: Session, book_id: int) -> list[LorebookLink]:
    return list(session.exec(select(LorebookLink).where(LorebookLink.lorebook_id == book_id)))


def link_targets(session: Session, book_id: int) -> set[tuple[str, int]]:
    """Where a book is attached, as ("chat" | "character" | "persona", id) pairs."""
    targets = set()
    for link in links_of(session, book_id):
        for kind in LINK_TARGETS:
            if (target_id := getattr(link, f"{kind}_id")) is not None:
                targets.add((kind, target_id))
    return targets


def set_links(session: Session, book_id: int, wanted: set[tuple[str, int]]) -> None:
    """Attach the book to exactly these targets."""
    current = link_targets(session, book_id)
    for kind, target_id in sorted(wanted - current):
        attach(session, book_id, kind, target_id)
    for kind, target_id in sorted(current - wanted):
        detach(session, book_id, kind, target_id)


def attach(session: Session, book_id: int, target: str, target_id: int) -> None:
    if target not in LINK_TARGETS:
        raise UserError(f"A lorebook attaches to a {', '.join(LINK_TARGETS[:-1])} or {LINK_TARGETS[-1]}.")
    get_book(session, book_id)
    column = getattr(LorebookLink, f"{target}_id")
    exists = session.exec(
        select(LorebookLink).where(LorebookLink.lorebook_id == book_id, column == target_id)
    ).first()
    if exists is None:
        session.add(LorebookLink(lorebook_id=book_id, **{f"{target}_id": target_id}))
        session.flush()


def detach(session: Session, book_id: int, target: str, target_id: int) -> None:
    if target not in LINK_TARGETS:
        raise UserError(f"A lorebook attaches to a {', '.join(LINK_TARGETS[:-1])} or {LINK_TARGETS[-1]}.")
    column = getattr(LorebookLink, f"{target}_id")
    for link in session.exec(
        select(LorebookLink).where(LorebookLink.lorebook_id == book_id, column == target_id)
    ):
        session.delete(link)
    session.flush()


def set_chat_books(session: Session, chat_id: int, book_ids: Sequence[int]) -> None:
    """The lorebooks attached to the chat itself become exactly these."""
    wanted = set(book_ids)
    for book_id in wanted:
        get_book(session, book_id)
    for link in session.exec(select(LorebookLink).where(LorebookLink.chat_id == chat_id)):
        if link.lorebook_id not in wanted:
            session.delete(link)
        wanted.discard(link.lorebook_id)
    for book_id in sorted(wanted):
        session.add(LorebookLink(lorebook_id=book_id, chat_id=chat_id))
    session.flush()


def books_of_character(session: Session, character_id: int) -> list[Lorebook]:
    ids = select(LorebookLink.lorebook_id).where(LorebookLink.character_id == character_id)
    return list(session.exec(select(Lorebook).where(col(Lorebook.id).in_(ids)).order_by(Lorebook.name)))


def chat_book_ids(session: Session, chat_id: int) -> list[int]:
    return [
        link.lorebook_id for link in session.exec(select(LorebookLink).where(LorebookLink.chat_id == chat_id))
    ]


def chat_books(
    session: Session, chat_id: int, characters: Sequence[tuple[int, str]], persona: tuple[int, str] | None
) -> list[BookRow]:
    """Every lorebook with where it comes from in this chat (Chat Settings → Lorebooks):
    `characters` are the chat's (id, name), `persona` its persona's, if any."""
    char_names, persona_names = dict(characters), dict([persona] if persona else [])
    conditions = [LorebookLink.chat_id == chat_id]
    if char_names:
        conditions.append(col(LorebookLink.character_id).in_(list(char_names)))
    if persona_names:
        conditions.append(col(LorebookLink.persona_id).in_(list(persona_names)))
    in_chat: set[int] = set()
    by_char: dict[int, list[tuple[int, str]]] = {}
    by_persona: dict[int, list[tuple[int, str]]] = {}
    for link in session.exec(select(LorebookLink).where(or_(*conditions)).order_by(LorebookLink.id)):
        if link.chat_id == chat_id:
            in_chat.add(link.lorebook_id)
        elif link.character_id in char_names:
            by_char.setdefault(link.lorebook_id, []).append(
                (link.character_id, char_names[link.character_id])
            )
        elif link.persona_id in persona_names:
            by_persona.setdefault(link.lorebook_id, []).append(
                (link.persona_id, persona_names[link.persona_id])
            )
    books = [BookInfo(b.id, b.name, b.enabled, b.is_global) for b in list_books(session)]  # type: ignore[arg-type]
    return chat_book_rows(books, in_chat=in_chat, characters=by_char, personas=by_persona)


def books_for_chat(
    session: Session, chat_id: int, character_ids: Sequence[int], persona_id: int | None
) -> list[Lorebook]:
    """Enabled lorebooks in effect for a chat: global ones and those attached to the chat, to one
    of its characters or to its persona."""
    conditions = [LorebookLink.chat_id == chat_id]
    if character_ids:
        conditions.append(col(LorebookLink.character_id).in_(list(character_ids)))
    if persona_id is not None:
        conditions.append(LorebookLink.persona_id == persona_id)
    linked = set(session.exec(select(LorebookLink.lorebook_id).where(or_(*conditions))))
    books = session.exec(
        select(Lorebook)
        .where(
            Lorebook.enabled == True,  # noqa: E712
            or_(Lorebook.is_global == True, col(Lorebook.id).in_(linked)),  # noqa: E712
        )
        .order_by(Lorebook.id)
    )
    return list(books)


def book_versions_for_chat(
    session: Session, chat_id: int, character_ids: Sequence[int], persona_id: int | None
) -> list[tuple[int, tuple]]:
    """(id, stamp) of the lorebooks `books_for_chat` gives, in the same order, the stamp being the
    book's (version, created_at). It runs before every reply: one statement of columns (no row
    objects), in plain SQL (building the ORM statement cost more than running it), which the
    compiled-book cache checks its books against (app/lore/prompting.py), whichever server wrote
    them. The creation time tells a new book from a deleted one with its id: SQLite gives a deleted
    last row's id to the next book, which starts at version 0 again."""
    conn = session.connection()
    p = _PLACEHOLDER[conn.dialect.name]
    links = [f"chat_id = {p}"]
    params: list = [chat_id]
    if character_ids:
        links.append(f"character_id IN ({','.join([p] * len(character_ids))})")
        params.extend(character_ids)
    if persona_id is not None:
        links.append(f"persona_id = {p}")
        params.append(persona_id)
    sql = (
        "SELECT id, version, created_at FROM lorebook WHERE enabled = TRUE AND (is_global = TRUE OR id IN "
        f"(SELECT lorebook_id FROM lorebook_link WHERE {' OR '.join(links)})) ORDER BY id"
    )
    return [(int(i), (int(v), made)) for i, v, made in conn.exec_driver_sql(sql, tuple(params)).all()]


# The driver's placeholder on each database (SQLite's sqlite3 and PostgreSQL's psycopg).
_PLACEHOLDER = {"sqlite": "?", "postgresql": "%s"}


def books_by_id(session: Session, book_ids: Sequence[int]) -> list[Lorebook]:
    if not book_ids:
        return []
    return list(session.exec(select(Lorebook).where(col(Lorebook.id).in_(list(book_ids)))))


def entries_of(session: Session, book_ids: Sequence[int]) -> list[LorebookEntry]:
    if not book_ids:
        return []
    stmt = select(LorebookEntry).where(col(LorebookEntry.lorebook_id).in_(list(book_ids)))
    return list(session.exec(stmt.order_by(LorebookEntry.lorebook_id, LorebookEntry.id)))


# --- files -------------------------------------------------------------------------------------


@dataclasses.dataclass
class ImportedBook:
    book: Lorebook
    notes: list[str]  # what the import changed, for the user (entries turned off, and why)
    reused: bool = False  # an identical book was already stored: that one was linked, none was made


class SameBookExists(UserError):
    """The imported book's entries are those of a book already stored; nothing was written."""

    def __init__(self, name: str, existing: Lorebook):
        self.name, self.existing = name, existing
        if name.strip().casefold() == existing.name.strip().casefold():
            text = f"{existing.name} is already in your lorebooks with the same entries."
        else:
            text = f"{name} has the same entries as “{existing.name}”, already in your lorebooks."
        super().__init__(text)


def find_twin(session: Session, entries: Sequence[LoreEntry]) -> Lorebook | None:
    """The oldest stored book whose entries are these (see twins.book_fingerprint), if any. Only
    books with as many entries are read."""
    wanted = book_fingerprint(entries)
    if wanted is None:
        return None
    same_size = sorted(book_id for book_id, n in entry_counts(session).items() if n == len(entries))
    by_book: dict[int, list[LoreEntry]] = {book_id: [] for book_id in same_size}
    for row in entries_of(session, same_size):
        by_book[row.lorebook_id].append(entry_data(row))
    for book_id in same_size:
        if book_fingerprint(by_book[book_id]) == wanted:
            return session.get(Lorebook, book_id)
    return None


def import_file(
    session: Session, raw: bytes, *, filename: str = "", character_id: int | None = None, copy: bool = False
) -> ImportedBook:
    """A lorebook from a SillyTavern World Info file, a card's character_book or a Marinara
    `.marinara.json`; one transaction: a refused file writes nothing. Entries whose `/regex/` key
    cannot run are imported turned off, each named in `notes`. A book whose entries are already
    stored raises SameBookExists unless `copy` (then it is stored under a free name)."""
    stem = filename.rsplit("/", 1)[-1]
    for suffix in (".marinara.json", ".json", ".marinara"):
        stem = stem.removesuffix(suffix)
    try:
        parsed = parse_lore_file(raw, name=stem or "Imported lorebook")
    except LoreFileError as err:
        raise UserError(str(err)) from err
    entries, notes = turn_off_unrunnable(parsed.entries)
    if not copy and (twin := find_twin(session, entries)) is not None:
        raise SameBookExists(parsed.book.name or stem or "This lorebook", twin)
    return ImportedBook(store_parsed(session, parsed.book, entries, character_id=character_id), notes)


def store_parsed(
    session: Session, book: LoreBook, entries: Sequence[LoreEntry], *, character_id: int | None = None
) -> Lorebook:
    row = Lorebook(**{f: getattr(book, f) for f in BOOK_FIELDS})
    # Two rows never read the same: a name already taken becomes "Name (2)".
    row.name = free_name(row.name.strip() or "Imported lorebook", session.exec(select(Lorebook.name)))
    session.add(row)
    session.flush()
    session.add_all([_entry_row(row.id, e) for e in entries])
    if character_id is not None:
        session.add(LorebookLink(lorebook_id=row.id, character_id=character_id))
    session.flush()
    return row


def export_file(session: Session, book_id: int, fmt: str) -> tuple[str, bytes]:
    if fmt not in EXPORT_FORMATS:
        raise UserError(f"Export formats: {', '.join(EXPORT_FORMATS)}.")
    book = get_book(session, book_id)
    data = book_data(book)
    entries = [
        _file_entry(e)
        for e in session.exec(
            select(LorebookEntry).where(LorebookEntry.lorebook_id == book_id).order_by(LorebookEntry.id)
        )
    ]
    safe = safe_stem(book.name, "lorebook")
    if fmt == "world_info":
        return f"{safe}.json", encode_file(export_world_info(data, entries))
    if fmt == "character_book":
        return f"{safe}.character_book.json", encode_file(export_character_book(data, entries))
    return f"{safe}.marinara.json", encode_file(export_marinara_lorebook(data, entries, now=utcnow()))


def import_character_book(session: Session, raw: dict, *, character_id: int, name: str) -> ImportedBook:
    """A card's embedded `character_book` as a lorebook attached to the character; entries whose
    `/regex/` key cannot run come in turned off, each named in `notes`. When a stored book has the
    same entries (the book imported before as a World Info file, the same card imported again),
    that book is attached instead of a twin (`reused`)."""
    try:
        parsed = parse_character_book(raw, name=name)
    except LoreFileError as err:
        raise UserError(f"The card's embedded lorebook could not be read: {err}") from err
    book = parsed.book if parsed.book.name else dataclasses.replace(parsed.book, name=name)
    entries, notes = turn_off_unrunnable(parsed.entries)
    if (twin := find_twin(session, entries)) is not None:
        attach(session, twin.id, "character", character_id)
        return ImportedBook(twin, [], reused=True)
    return ImportedBook(store_parsed(session, book, entries, character_id=character_id), notes)


def character_book_for(session: Session, character_id: int, *, original: dict | None) -> dict | None:
    """The `character_book` for a card export: the first lorebook attached to the character once it
    was edited (or when the card had none); the card's own book, byte for byte, while untouched."""
    link = session.exec(
        select(LorebookLink).where(LorebookLink.character_id == character_id).order_by(LorebookLink.id)
    ).first()
    if link is None:
        return None
    book = get_book(session, link.lorebook_id)
    if original is not None and book.version == 0:
        return None
    entries = [
        _file_entry(e)
        for e in session.exec(
            select(LorebookEntry).where(LorebookEntry.lorebook_id == book.id).order_by(LorebookEntry.id)
        )
    ]
    return export_character_book(book_data(book), entries)

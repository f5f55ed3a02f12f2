from fastapi import APIRouter, File, Query, UploadFile
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from app.chats import service as chats
from app.lore import prompting, service
from app.lore.models import Lorebook, LorebookEntry
from app.lore.report import limit_notice, skipped_notice
from app.lore.schemas import BookIn, ChatBooksIn, EntryIn, KeywordTestIn, LinkIn
from app.platform.core.downloads import content_disposition
from app.platform.modelbase import RowId
from app.prompt.core.tokens import count_tokens
from app.web.deps import SessionDep

router = APIRouter(prefix="/api/lorebooks", tags=["lorebooks"])
chat_router = APIRouter(prefix="/api/chats", tags=["lorebooks"])


def _book_json(book: Lorebook, entries: int | None = None) -> dict:
    data = book.model_dump(exclude={"extra"})
    if entries is not None:
        data["entry_count"] = entries
    return data


def _entry_json(entry: LorebookEntry) -> dict:
    return entry.model_dump(exclude={"extra"})


@router.get("")
def list_lorebooks(session: SessionDep) -> list[dict]:
    """Every lorebook, with its number of entries."""
    counts = service.entry_counts(session)
    return [_book_json(b, counts.get(b.id, 0)) for b in service.list_books(session)]


@router.post("", status_code=201)
def create_lorebook(data: BookIn, session: SessionDep) -> dict:
    """A new, empty lorebook."""
    return _book_json(service.create_book(session, **data.model_dump()), 0)


@router.post(
    "/import", status_code=201, responses={409: {"description": "A book with the same entries exists"}}
)
def import_lorebook(session: SessionDep, file: UploadFile = File(...), copy: bool = Query(False)):
    """A SillyTavern World Info `.json`, a card's `character_book`, or a Marinara `.marinara.json`.
    A refused file creates nothing. Entries with a `/regex/` key Sugo cannot run come in turned
    off, each named in `notes`. A book whose entries are already stored answers 409 with the
    stored book's `existing_id`; `copy=true` imports it anyway, under a free name ("Name (2)")."""
    try:
        imported = service.import_file(session, file.file.read(), filename=file.filename or "", copy=copy)
    except service.SameBookExists as err:
        return JSONResponse({"detail": str(err), "existing_id": err.existing.id}, status_code=409)
    book = imported.book
    return {**_book_json(book, len(service.list_entries(session, book.id))), "notes": imported.notes}


@router.post("/test")
def test_keywords(data: KeywordTestIn, session: SessionDep) -> dict:
    """The keyword test panel: scan a pasted text as the newest message; which entries fire, which
    are skipped by a budget or lost a roll, and why. Changes nothing."""
    chat = chats.get_chat(session, data.chat_id) if data.chat_id else None
    if data.book_ids is not None:
        book_ids = data.book_ids
    elif chat is not None:
        chars = chats.chat_characters(session, chat.id)
        persona = chats.chat_persona(session, chat)
        book_ids = [
            b.id
            for b in service.books_for_chat(
                session, chat.id, [c.id for c in chars], persona.id if persona else None
            )
        ]
    else:
        book_ids = [b.id for b in service.list_books(session) if b.enabled]
    budget = chats.chat_settings(chat).lore_token_budget if chat else 8192
    snap = prompting.keyword_test(
        session,
        chat,
        book_ids,
        data.text,
        char="{{char}}",
        user="{{user}}",
        chat_budget=budget,
        count=count_tokens,
    )
    return {**snap, "notice": skipped_notice(snap), "limit_notice": limit_notice(snap)}


@router.get("/{book_id}")
def show_lorebook(book_id: int, session: SessionDep) -> dict:
    """One lorebook with its entries and where it is attached."""
    book = service.get_book(session, book_id)
    entries = service.list_entries(session, book_id)
    links = [
        link.model_dump(exclude={"id", "lorebook_id"}, exclude_none=True)
        for link in service.links_of(session, book_id)
    ]
    return {**_book_json(book, len(entries)), "entries": [_entry_json(e) for e in entries], "links": links}


@router.put("/{book_id}")
def update_lorebook(book_id: int, data: BookIn, session: SessionDep) -> dict:
    """Rename a lorebook, turn it on or off, set its budgets and recursion."""
    return _book_json(service.update_book(session, book_id, **data.model_dump()))


@router.delete("/{book_id}", status_code=204)
def delete_lorebook(book_id: int, session: SessionDep) -> None:
    """Delete a lorebook and its entries."""
    service.delete_book(session, book_id)


@router.get("/{book_id}/export")
def export_lorebook(
    book_id: int,
    session: SessionDep,
    format: str = Query(default="world_info", pattern="^(world_info|marinara|character_book)$"),
) -> Response:  # noqa: A002
    """Download as SillyTavern World Info, Marinara `.marinara.json`, or a card's `character_book`."""
    name, body = service.export_file(session, book_id, format)
    return Response(
        body,
        media_type="application/json",
        headers={"Content-Disposition": content_disposition(name, fallback="lorebook")},
    )


@router.get("/{book_id}/entries")
def list_lore_entries(book_id: int, session: SessionDep, q: str = "") -> list[dict]:
    """Entries by Order, optionally those whose title, keys or content contain `q`."""
    service.get_book(session, book_id)
    return [_entry_json(e) for e in service.list_entries(session, book_id, query=q)]


@router.post("/{book_id}/entries", status_code=201)
def create_lore_entry(book_id: int, data: EntryIn, session: SessionDep) -> dict:
    """Add an entry."""
    return _entry_json(service.save_entry(session, book_id, data.model_dump()))


@router.put("/{book_id}/entries/{entry_id}")
def update_lore_entry(book_id: int, entry_id: int, data: EntryIn, session: SessionDep) -> dict:
    """Change an entry."""
    return _entry_json(service.save_entry(session, book_id, data.model_dump(), entry_id))


@router.delete("/{book_id}/entries/{entry_id}", status_code=204)
def delete_lore_entry(book_id: int, entry_id: int, session: SessionDep) -> None:
    """Delete an entry."""
    service.delete_entry(session, book_id, entry_id)


class BulkEnable(BaseModel):
    enabled: bool
    entry_ids: list[RowId] | None = None  # None: every entry of the book


@router.post("/{book_id}/entries/enable")
def enable_lore_entries(book_id: int, data: BulkEnable, session: SessionDep) -> dict:
    """Turn many entries on or off at once."""
    return {"changed": service.set_entries_enabled(session, book_id, data.entry_ids, data.enabled)}


@router.post("/{book_id}/links", status_code=204)
def attach_lorebook(book_id: int, data: LinkIn, session: SessionDep) -> None:
    """Attach the lorebook to a chat, a character or a persona."""
    service.attach(session, book_id, data.target, data.target_id)


@router.delete("/{book_id}/links", status_code=204)
def detach_lorebook(book_id: int, data: LinkIn, session: SessionDep) -> None:
    """Detach the lorebook from a chat, a character or a persona."""
    service.detach(session, book_id, data.target, data.target_id)


@chat_router.get("/{chat_id}/lorebooks")
def show_chat_lorebooks(chat_id: int, session: SessionDep) -> dict:
    """The lorebooks attached to the chat, those in effect (global, character, persona), where
    each book applies from (`sources`: the chat itself and `via` character, persona or global), and
    Active Context: the last scan, with the skipped-by-budget notice."""
    chat = chats.get_chat(session, chat_id)
    chars = chats.chat_characters(session, chat_id)
    persona = chats.chat_persona(session, chat)
    in_effect = service.books_for_chat(
        session, chat_id, [c.id for c in chars], persona.id if persona else None
    )
    rows = service.chat_books(
        session, chat_id, [(c.id, c.name) for c in chars], (persona.id, persona.name) if persona else None
    )
    snap = chat.lore_last_scan or {}
    return {
        "attached": service.chat_book_ids(session, chat_id),
        "in_effect": [_book_json(b) for b in in_effect],
        "sources": [
            {
                "id": r.id,
                "name": r.name,
                "applies": r.applies,
                "in_chat": r.in_chat,
                "via": [{"kind": v.kind, "name": v.name} for v in r.via],
            }
            for r in rows
        ],
        "token_budget": chats.chat_settings(chat).lore_token_budget,
        "last_scan": snap or None,
        "notice": skipped_notice(snap) if snap else None,
        "limit_notice": limit_notice(snap) if snap else None,
    }


@chat_router.put("/{chat_id}/lorebooks")
def set_chat_lorebooks(chat_id: int, data: ChatBooksIn, session: SessionDep) -> dict:
    """Attach exactly these lorebooks to the chat (others stay attached to characters or personas)."""
    chats.get_chat(session, chat_id)
    service.set_chat_books(session, chat_id, data.book_ids)
    return {"attached": service.chat_book_ids(session, chat_id)}

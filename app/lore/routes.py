"""Lorebook pages: the list, a book (overview, attachments, entries, keyword test) and the entry
editor."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from app import forms
from app.characters.service import list_characters
from app.chats import service as chats
from app.deps import SessionDep
from app.errors import UserError
from app.lore import prompting, service
from app.lore.activation import ROLES
from app.lore.report import limit_notice, position_label, skipped_notice
from app.lore.schemas import BookIn, EntryIn
from app.personas.service import list_personas
from app.prompt.tokens import count_tokens
from app.web import render

router = APIRouter(include_in_schema=False)

LOGIC_LABELS = {"and_any": "AND ANY", "and_all": "AND ALL", "not_any": "NOT ANY", "not_all": "NOT ALL"}
POSITION_CHOICES = {"before_char": "Before the character", "after_char": "After the character",
                    "before_examples": "Before the example dialogue", "after_examples": "After the example dialogue",
                    "at_depth": "At a depth in the chat"}  # fmt: skip
_REGEX_LINE = re.compile(r"^/.+/[gimsuyd]*$")


def parse_keys(raw: str) -> list[str]:
    """Keys as typed: separated by commas or new lines; a key written /regex/flags stays whole even
    with commas inside."""
    keys: list[str] = []
    for line in raw.splitlines():
        line = line.strip()
        if _REGEX_LINE.match(line):
            keys.append(line)
        else:
            keys.extend(k.strip() for k in line.split(","))
    return [k for k in keys if k]


def _tri(form, name: str) -> bool | None:
    value = forms.text(form, name)
    return None if value == "" else value == "true"


def _book_input(form) -> BookIn:
    try:
        return BookIn(
            name=forms.text(form, "name"), description=forms.text(form, "description"),
            enabled=forms.checkbox(form, "enabled"), is_global=forms.checkbox(form, "is_global"),
            token_budget=forms.optional_number(form, "token_budget", int) or 0,
            entry_limit=forms.optional_number(form, "entry_limit", int) or 100,
            recursive=forms.checkbox(form, "recursive"), max_depth=forms.optional_number(form, "max_depth", int) or 3,
            scan_depth=_or(forms.optional_number(form, "scan_depth", int), 2),
            case_sensitive=forms.checkbox(form, "case_sensitive"),
            match_whole_words=forms.checkbox(form, "match_whole_words"),
            use_group_scoring=forms.checkbox(form, "use_group_scoring"),
        )  # fmt: skip
    except ValidationError as err:
        raise forms.invalid(err) from err


def _or(value, default):
    return default if value is None else value


def _entry_input(form) -> EntryIn:
    try:
        return EntryIn(
            title=forms.text(form, "title").strip(), content=forms.text(form, "content"),
            keys=parse_keys(forms.text(form, "keys")), secondary_keys=parse_keys(forms.text(form, "secondary_keys")),
            selective_logic=forms.text(form, "selective_logic") or "and_any",
            case_sensitive=_tri(form, "case_sensitive"), match_whole_words=_tri(form, "match_whole_words"),
            constant=forms.checkbox(form, "constant"), enabled=forms.checkbox(form, "enabled"),
            order=_or(forms.optional_number(form, "order", int), 100),
            position=forms.text(form, "position") or "before_char",
            depth=_or(forms.optional_number(form, "depth", int), 4), role=forms.text(form, "role") or "system",
            probability=_or(forms.optional_number(form, "probability", int), 100),
            use_probability=forms.checkbox(form, "use_probability"),
            scan_depth=forms.optional_number(form, "scan_depth", int),
            sticky=_or(forms.optional_number(form, "sticky", int), 0),
            cooldown=_or(forms.optional_number(form, "cooldown", int), 0),
            delay=_or(forms.optional_number(form, "delay", int), 0),
            group=forms.text(form, "group").strip(), group_weight=_or(forms.optional_number(form, "group_weight", int), 100),
            group_override=forms.checkbox(form, "group_override"), use_group_scoring=_tri(form, "use_group_scoring"),
            recursion=forms.checkbox(form, "recursion"), exclude_recursion=forms.checkbox(form, "exclude_recursion"),
            delay_until_recursion=_or(forms.optional_number(form, "delay_until_recursion", int), 0),
            selective=True,
        )  # fmt: skip
    except ValidationError as err:
        raise forms.invalid(err) from err


def _list(request: Request, session, **extra) -> HTMLResponse:
    counts = service.entry_counts(session)
    books = service.list_books(session)
    return render(request, "lore/list.html", {"books": books, "counts": counts, **extra})


@router.get("/lorebooks")
def list_lorebooks_page(request: Request, session: SessionDep) -> HTMLResponse:
    """Every lorebook: import, create, open."""
    return _list(request, session)


@router.post("/lorebooks")
async def create_lorebook_page(request: Request, session: SessionDep) -> HTMLResponse:
    """A new lorebook, then its page."""
    book = service.create_book(session, forms.text(await request.form(), "name"))
    return _book_page(request, session, book.id, headers={"HX-Push-Url": f"/lorebooks/{book.id}"})


@router.post("/lorebooks/import")
async def import_lorebook_page(request: Request, session: SessionDep) -> HTMLResponse:
    """Import a World Info / character_book / Marinara file, then show it."""
    form = await request.form()
    upload = form.get("file")
    raw = await forms.upload(form, "file")
    if not raw:
        raise UserError("Choose a lorebook file to import.")
    book = service.import_file(session, raw, filename=getattr(upload, "filename", "") or "")
    return _book_page(request, session, book.id, message=f"Imported {len(service.list_entries(session, book.id))} entries.",
                      headers={"HX-Push-Url": f"/lorebooks/{book.id}"})  # fmt: skip


def _book_page(request: Request, session, book_id: int, *, message: str | None = None, test: dict | None = None,
               q: str = "", headers: dict | None = None) -> HTMLResponse:  # fmt: skip
    book = service.get_book(session, book_id)
    return render(request, "lore/book.html", {
        "book": book, "entries": service.list_entries(session, book_id, query=q), "q": q, "message": message,
        "characters": list_characters(session), "personas": list_personas(session),
        "chats": chats.list_chats(session), "count_tokens": count_tokens,
        "linked": service.link_targets(session, book_id),
        "position_label": position_label, "test": test,
    }, headers=headers)  # fmt: skip


@router.get("/lorebooks/{book_id}")
def show_lorebook_page(book_id: int, request: Request, session: SessionDep, q: str = "") -> HTMLResponse:
    """A lorebook: overview, attachments, entries with search, the keyword test panel."""
    return _book_page(request, session, book_id, q=q)


@router.post("/lorebooks/{book_id}")
async def update_lorebook_page(book_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Save the Overview."""
    service.update_book(session, book_id, **_book_input(await request.form()).model_dump())
    return _book_page(request, session, book_id, message="Saved.")


@router.post("/lorebooks/{book_id}/delete")
def delete_lorebook_page(book_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Delete a lorebook, then show the list."""
    service.delete_book(session, book_id)
    return _list(request, session, message="Lorebook deleted.")


@router.post("/lorebooks/{book_id}/links")
async def save_links_page(book_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Attach the book to exactly the checked chats, characters and personas."""
    form = await request.form()
    pairs = (v.split(":", 1) for v in form.getlist("link") if isinstance(v, str) and ":" in v)
    service.set_links(session, book_id, {(kind, int(i)) for kind, i in pairs if i.isdigit()})
    return _book_page(request, session, book_id, message="Attachments saved.")


@router.post("/lorebooks/{book_id}/entries/enable")
async def bulk_enable_page(book_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Turn every entry (or those matching the search) on or off."""
    form = await request.form()
    q = forms.text(form, "q")
    enabled = forms.text(form, "enabled") == "true"
    ids = [e.id for e in service.list_entries(session, book_id, query=q)] if q.strip() else None
    changed = service.set_entries_enabled(session, book_id, ids, enabled)
    return _book_page(request, session, book_id, q=q,
                      message=f"{'Enabled' if enabled else 'Disabled'} {changed} entr{'y' if changed == 1 else 'ies'}.")  # fmt: skip


@router.post("/lorebooks/{book_id}/test")
async def test_keywords_page(book_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The keyword test panel: which entries fire on the pasted text, which are skipped and why."""
    form = await request.form()
    text = forms.text(form, "text")
    if not text.strip():
        raise UserError("Paste some text to test the keywords against.")
    snap = prompting.keyword_test(session, None, [book_id], text, char="{{char}}", user="{{user}}",
                                   chat_budget=8192, count=count_tokens)  # fmt: skip
    result = {**snap, "notice": skipped_notice(snap), "limit_notice": limit_notice(snap), "text": text}
    return render(request, "lore/_test_result.html", {"test": result})


def _entry_page(request: Request, session, book_id: int, entry, **extra) -> HTMLResponse:
    return render(request, "lore/entry.html", {
        "book": service.get_book(session, book_id), "entry": entry, "logics": LOGIC_LABELS,
        "positions": POSITION_CHOICES, "roles": ROLES, **extra,
    })  # fmt: skip


@router.get("/lorebooks/{book_id}/entries/new")
def new_entry_page(book_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """An empty entry editor."""
    return _entry_page(request, session, book_id, None)


@router.post("/lorebooks/{book_id}/entries")
async def create_entry_page(book_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Save a new entry, then show the book."""
    service.save_entry(session, book_id, _entry_input(await request.form()).model_dump())
    return _book_page(request, session, book_id, message="Entry added.", headers={"HX-Push-Url": f"/lorebooks/{book_id}"})


@router.get("/lorebooks/{book_id}/entries/{entry_id}")
def edit_entry_page(book_id: int, entry_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The entry editor."""
    return _entry_page(request, session, book_id, service.get_entry(session, book_id, entry_id))


@router.post("/lorebooks/{book_id}/entries/{entry_id}")
async def update_entry_page(book_id: int, entry_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Save an entry, then show the book."""
    service.save_entry(session, book_id, _entry_input(await request.form()).model_dump(), entry_id)
    return _book_page(request, session, book_id, message="Entry saved.", headers={"HX-Push-Url": f"/lorebooks/{book_id}"})


@router.post("/lorebooks/{book_id}/entries/{entry_id}/toggle")
def toggle_entry_page(book_id: int, entry_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Turn one entry on or off."""
    entry = service.get_entry(session, book_id, entry_id)
    service.set_entries_enabled(session, book_id, [entry_id], not entry.enabled)
    return _book_page(request, session, book_id)


@router.post("/lorebooks/{book_id}/entries/{entry_id}/delete")
def delete_entry_page(book_id: int, entry_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Delete an entry."""
    service.delete_entry(session, book_id, entry_id)
    return _book_page(request, session, book_id, message="Entry deleted.")


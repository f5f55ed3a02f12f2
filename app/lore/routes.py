"""Lorebook pages: the list, a book (overview, attachments, entries, keyword test) and the entry
editor. A page for a plain request; for HTMX, the blocks of the page that changed."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from app.characters.service import list_characters
from app.chats import service as chats
from app.chats.settings import ChatSettings
from app.lore import prompting, service
from app.lore.core.activation import ROLES
from app.lore.report import limit_notice, position_label, skipped_notice
from app.lore.schemas import BookIn, EntryIn
from app.personas.service import list_personas
from app.platform import forms
from app.platform.core.errors import UserError
from app.platform.core.names import refuse_control_characters
from app.platform.modelbase import parse_row_id
from app.prompt.core.tokens import count_tokens
from app.web.deps import FormDep, SessionDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)

LOGIC_LABELS = {"and_any": "AND ANY", "and_all": "AND ALL", "not_any": "NOT ANY", "not_all": "NOT ALL"}
POSITION_CHOICES = {
    "before_char": "Before the character",
    "after_char": "After the character",
    "before_examples": "Before the example dialogue",
    "after_examples": "After the example dialogue",
    "at_depth": "At a depth in the chat",
}
_REGEX_LINE = re.compile(r"^/.+/[gimsuyd]*$")
BOOK = "lore/book.html"


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


def _int(form, name: str) -> int | None:
    return forms.optional_number(form, name, int)


def _book_input(form) -> BookIn:
    # A number left blank takes BookIn's default (forms.parse leaves None out).
    return forms.parse(
        BookIn,
        name=forms.text(form, "name"),
        description=forms.text(form, "description"),
        enabled=forms.checkbox(form, "enabled"),
        is_global=forms.checkbox(form, "is_global"),
        token_budget=_int(form, "token_budget"),
        entry_limit=_int(form, "entry_limit"),
        recursive=forms.checkbox(form, "recursive"),
        max_depth=_int(form, "max_depth"),
        scan_depth=_int(form, "scan_depth"),
        case_sensitive=forms.checkbox(form, "case_sensitive"),
        match_whole_words=forms.checkbox(form, "match_whole_words"),
        use_group_scoring=forms.checkbox(form, "use_group_scoring"),
    )


def _entry_input(form) -> EntryIn:
    # Blank fields and unpicked choices take EntryIn's defaults (forms.parse leaves None out).
    return forms.parse(
        EntryIn,
        title=forms.text(form, "title").strip(),
        content=forms.text(form, "content"),
        keys=parse_keys(forms.text(form, "keys")),
        secondary_keys=parse_keys(forms.text(form, "secondary_keys")),
        selective_logic=forms.text(form, "selective_logic") or None,
        case_sensitive=_tri(form, "case_sensitive"),
        match_whole_words=_tri(form, "match_whole_words"),
        constant=forms.checkbox(form, "constant"),
        enabled=forms.checkbox(form, "enabled"),
        order=_int(form, "order"),
        position=forms.text(form, "position") or None,
        depth=_int(form, "depth"),
        role=forms.text(form, "role") or None,
        probability=_int(form, "probability"),
        use_probability=forms.checkbox(form, "use_probability"),
        scan_depth=_int(form, "scan_depth"),
        sticky=_int(form, "sticky"),
        cooldown=_int(form, "cooldown"),
        delay=_int(form, "delay"),
        group=forms.text(form, "group").strip(),
        group_weight=_int(form, "group_weight"),
        group_override=forms.checkbox(form, "group_override"),
        use_group_scoring=_tri(form, "use_group_scoring"),
        recursion=forms.checkbox(form, "recursion"),
        exclude_recursion=forms.checkbox(form, "exclude_recursion"),
        delay_until_recursion=_int(form, "delay_until_recursion"),
        selective=True,
    )


def _list(request: Request, session, *, hx: bool = False, **extra) -> HTMLResponse:
    ctx = {"books": service.list_books(session), "counts": service.entry_counts(session), **extra}
    if hx:  # another page's action landing here: the page's content, pushed as /lorebooks
        return render_blocks(
            request, "lore/list.html", ctx, ["content"], headers={"HX-Push-Url": "/lorebooks"}
        )
    return render(request, "lore/list.html", ctx)


@router.get("/lorebooks")
def list_lorebooks_page(request: Request, session: SessionDep) -> HTMLResponse:
    """Every lorebook: import, create, open."""
    return _list(request, session)


@router.post("/lorebooks")
def create_lorebook_page(request: Request, form: FormDep, session: SessionDep, hx: HxRequest) -> HTMLResponse:
    """A new lorebook, then its page."""
    book = service.create_book(
        session, refuse_control_characters(forms.text(form, "name"), "A lorebook's name")
    )
    return _book_page(request, session, book.id, hx=hx)


@router.post("/lorebooks/import")
async def import_lorebook_page(request: Request, session: SessionDep, hx: HxRequest) -> HTMLResponse:
    """Import a World Info / character_book / Marinara file, then show it; a book already stored
    with the same entries is named, with a button to import a copy anyway."""
    form = await request.form()
    upload = form.get("file")
    raw = await forms.upload(form, "file")
    if not raw:
        raise UserError("Choose a lorebook file to import.")
    # Parsing, compiling and writing a big book takes a while: on a thread, so other requests go on.
    return await run_in_threadpool(
        _imported_book_page,
        request,
        session,
        raw,
        getattr(upload, "filename", "") or "",
        hx,
        copy=forms.text(form, "copy") == "1",
    )


def _imported_book_page(
    request: Request, session, raw: bytes, filename: str, hx: bool, *, copy: bool
) -> HTMLResponse:
    try:
        imported = service.import_file(session, raw, filename=filename, copy=copy)
    except service.SameBookExists as twin:
        if hx:  # only the answer under the form: the chosen file stays for "Import a copy anyway"
            return render(
                request,
                "lore/list.html",
                {"twin": twin},
                block="import_result",
                headers={"HX-Retarget": "#import-result", "HX-Reswap": "outerHTML"},
            )
        return _list(request, session, twin=twin)
    book = imported.book
    message = " ".join([f"Imported {len(service.list_entries(session, book.id))} entries.", *imported.notes])
    return _book_page(request, session, book.id, hx=hx, message=message)


def _book_ctx(session, book_id: int, *, q: str = "", full: bool = True, **extra) -> dict:
    """What the book page's blocks read. `full=False` leaves out the attachment choices (every chat,
    character and persona), which only the whole page and the Attached to block show."""
    entries = service.list_entries(session, book_id, query=q)
    ctx = {
        "book": service.get_book(session, book_id),
        "entries": entries,
        "q": q,
        "total": len(service.list_entries(session, book_id)) if q.strip() else len(entries),
        "count_tokens": count_tokens,
        "position_label": position_label,
        **extra,
    }
    if full:
        ctx |= {
            "characters": list_characters(session),
            "personas": list_personas(session),
            "chats": chats.list_chats(session),
            "linked": service.link_targets(session, book_id),
        }
    return ctx


def _book_page(request: Request, session, book_id: int, *, hx: bool = False, **extra) -> HTMLResponse:
    """The whole book page; for HTMX, its content (an action elsewhere led here), pushed as its URL."""
    ctx = _book_ctx(session, book_id, **extra)
    if hx:
        return render_blocks(
            request, BOOK, ctx, ["content"], headers={"HX-Push-Url": f"/lorebooks/{book_id}"}
        )
    return render(request, BOOK, ctx)


def _book_blocks(
    request: Request, session, book_id: int, hx: bool, blocks: list[str], oob: list[str], **extra
) -> HTMLResponse:
    """For HTMX, `blocks` of the book page and `oob` for what else changed; else the whole page."""
    if not hx:
        return render(request, BOOK, _book_ctx(session, book_id, **extra))
    full = "attachments" in blocks or "content" in blocks
    return render_blocks(request, BOOK, _book_ctx(session, book_id, full=full, **extra), blocks, oob=oob)


@router.get("/lorebooks/{book_id}")
def show_lorebook_page(
    book_id: int, request: Request, session: SessionDep, hx: HxRequest, q: str = ""
) -> HTMLResponse:
    """A lorebook: overview, attachments, entries with search, the keyword test panel. The search
    box asks for the entry list only (with the count and the Enable/Disable labels)."""
    return _book_blocks(request, session, book_id, hx, ["entry_list"], ["entry_count", "bulk_enable"], q=q)


@router.post("/lorebooks/{book_id}")
def update_lorebook_page(
    book_id: int, request: Request, form: FormDep, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Save the Overview."""
    service.update_book(session, book_id, **_book_input(form).model_dump())
    return _book_blocks(
        request,
        session,
        book_id,
        hx,
        ["overview"],
        ["book_title", "book_message"],
        message="Saved.",
        overview_open=True,
    )


@router.post("/lorebooks/{book_id}/delete")
def delete_lorebook_page(book_id: int, request: Request, session: SessionDep, hx: HxRequest) -> HTMLResponse:
    """Delete a lorebook, then show the list."""
    service.delete_book(session, book_id)
    return _list(request, session, hx=hx, message="Lorebook deleted.")


@router.post("/lorebooks/{book_id}/links")
def save_links_page(
    book_id: int, request: Request, form: FormDep, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Attach the book to exactly the checked chats, characters and personas."""
    pairs = (v.split(":", 1) for v in form.getlist("link") if isinstance(v, str) and ":" in v)
    service.set_links(
        session, book_id, {(kind, i) for kind, raw in pairs if (i := parse_row_id(raw)) is not None}
    )
    return _book_blocks(
        request,
        session,
        book_id,
        hx,
        ["attachments"],
        ["book_message"],
        message="Attachments saved.",
        attachments_open=True,
    )


@router.post("/lorebooks/{book_id}/entries/enable")
def bulk_enable_page(
    book_id: int, request: Request, form: FormDep, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Turn every entry (or those matching the search) on or off."""
    q = forms.text(form, "q")
    enabled = forms.text(form, "enabled") == "true"
    ids = [e.id for e in service.list_entries(session, book_id, query=q)] if q.strip() else None
    changed = service.set_entries_enabled(session, book_id, ids, enabled)
    return _book_blocks(
        request,
        session,
        book_id,
        hx,
        ["entry_list"],
        ["entry_count", "book_message"],
        q=q,
        message=f"{'Enabled' if enabled else 'Disabled'} {changed} entr{'y' if changed == 1 else 'ies'}.",
    )


@router.post("/lorebooks/{book_id}/test")
async def test_keywords_page(book_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The keyword test panel: which entries fire on the pasted text, which are skipped and why."""
    form = await request.form()
    text = forms.text(form, "text")
    if not text.strip():
        raise UserError("Paste some text to test the keywords against.")
    # On a worker thread, as every scan: up to 200,000 characters against every key of the book.
    snap = await run_in_threadpool(
        prompting.keyword_test,
        session,
        None,
        [book_id],
        text,
        char="{{char}}",
        user="{{user}}",
        chat_budget=forms.default_of(ChatSettings, "lore_token_budget"),
        count=count_tokens,
    )
    result = {**snap, "notice": skipped_notice(snap), "limit_notice": limit_notice(snap), "text": text}
    return render(request, BOOK, {"test": result}, block="keyword_test_result")


def _entry_page(request: Request, session, book_id: int, entry, **extra) -> HTMLResponse:
    return render(
        request,
        "lore/entry.html",
        {
            "book": service.get_book(session, book_id),
            "entry": entry,
            "logics": LOGIC_LABELS,
            "positions": POSITION_CHOICES,
            "roles": ROLES,
            **extra,
        },
    )


@router.get("/lorebooks/{book_id}/entries/new")
def new_entry_page(book_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """An empty entry editor."""
    return _entry_page(request, session, book_id, None)


@router.post("/lorebooks/{book_id}/entries")
def create_entry_page(
    book_id: int, request: Request, form: FormDep, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Save a new entry, then show the book."""
    service.save_entry(session, book_id, _entry_input(form).model_dump())
    return _book_page(request, session, book_id, hx=hx, message="Entry added.")


@router.get("/lorebooks/{book_id}/entries/{entry_id}")
def edit_entry_page(book_id: int, entry_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The entry editor."""
    return _entry_page(request, session, book_id, service.get_entry(session, book_id, entry_id))


@router.post("/lorebooks/{book_id}/entries/{entry_id}")
def update_entry_page(
    book_id: int, entry_id: int, request: Request, form: FormDep, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Save an entry, then show the book."""
    service.save_entry(session, book_id, _entry_input(form).model_dump(), entry_id)
    return _book_page(request, session, book_id, hx=hx, message="Entry saved.")


@router.post("/lorebooks/{book_id}/entries/{entry_id}/toggle")
def toggle_entry_page(
    book_id: int, entry_id: int, request: Request, form: FormDep, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Turn one entry on or off: its row, and the count of entries that are off."""
    entry = service.get_entry(session, book_id, entry_id)
    service.set_entries_enabled(session, book_id, [entry_id], not entry.enabled)
    q = forms.text(form, "q")
    return _book_blocks(
        request, session, book_id, hx, ["entry"], ["entry_count", "book_message"], q=q, e=entry
    )


@router.post("/lorebooks/{book_id}/entries/{entry_id}/delete")
def delete_entry_page(
    book_id: int, entry_id: int, request: Request, form: FormDep, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Delete an entry: its row goes, the count and the message change (the emptied list says so)."""
    service.delete_entry(session, book_id, entry_id)
    q = forms.text(form, "q")
    if hx and not service.list_entries(session, book_id, query=q):
        return render_blocks(
            request,
            BOOK,
            _book_ctx(session, book_id, q=q, full=False, message="Entry deleted."),
            ["entry_list"],
            oob=["entry_count", "book_message"],
            headers={"HX-Retarget": "#entry-list"},
        )
    return _book_blocks(
        request, session, book_id, hx, [], ["entry_count", "book_message"], q=q, message="Entry deleted."
    )

"""The Memories page (/memories): long-term memories for all characters and per character, newest
first, filtered by character, added, edited in place and deleted with Undo; and the short-term
memory part of Chat Settings (delete one item, clear all). A page for a plain request; for HTMX,
the part that changed."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.chats import service as chats
from app.platform import forms
from app.platform.core.errors import UserError
from app.platform.modelbase import parse_row_id
from app.tools.memories import service
from app.tools.memories.core.rules import MAX_LONG_TERM_CHARS
from app.tools.memories.source import short_term_context
from app.web.deps import FormDep, SessionDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)
PAGE = "tools/memories.html"
CARD = "tools/memories_card.html"


def _owner(form) -> int | None:
    """The scope field: "global", or a character's id."""
    scope = forms.text(form, "scope")
    if scope == "global":
        return None
    character_id = parse_row_id(scope)
    if character_id is None:
        raise UserError("Choose who keeps the memory: all characters, or one character.")
    return character_id


def _moment(text: str) -> datetime | None:
    """The deleted memory's date sent back by Undo; a date that does not read leaves it new."""
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _page_ctx(session, show: str, offset: int, **extra) -> dict:
    return {
        "page": service.list_long_term(session, scope=show, offset=offset),
        "names": service.character_names(session),
        "show": show,
        "max_chars": MAX_LONG_TERM_CHARS,
        **extra,
    }


@router.get("/memories")
def list_memories_page(
    request: Request, session: SessionDep, hx: HxRequest, show: str = "all", offset: int = 0
) -> HTMLResponse:
    """Long-term memories, newest first; for HTMX (the filter, the pager), only the list."""
    return render(request, PAGE, _page_ctx(session, show, offset), block="memory_list" if hx else None)


@router.post("/memories")
def add_memory_page(request: Request, form: FormDep, session: SessionDep, hx: HxRequest) -> HTMLResponse:
    """Add a memory; the list shows it first and the form says so."""
    memory = service.add_long_term(session, content=forms.text(form, "content"), character_id=_owner(form))
    ctx = _page_ctx(session, forms.text(form, "show") or "all", 0, added=memory.id)
    if hx:
        return render_blocks(request, PAGE, ctx, ["memory_list"], oob=["add_memory_form"])
    return render(request, PAGE, ctx)


@router.post("/memories/restore")
def restore_memory_page(request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Undo a delete: the memory back in its place."""
    memory = service.restore_long_term(
        session,
        content=forms.text(form, "content"),
        character_id=_owner(form),
        created_at=_moment(forms.text(form, "created_at")),
    )
    return _card(request, session, form, memory, recount=True, status="Restored.")


@router.post("/memories/{memory_id}")
def update_memory_page(memory_id: int, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Save a memory's text; the card says Saved."""
    memory = service.update_long_term(session, memory_id, forms.text(form, "content"))
    return _card(request, session, form, memory, status="Saved.")


@router.post("/memories/{memory_id}/delete")
def delete_memory_page(memory_id: int, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Delete a memory; its card becomes a line with Undo."""
    return _card(
        request, session, form, service.delete_long_term(session, memory_id), recount=True, deleted=True
    )


def _card(request: Request, session, form, memory, *, recount: bool = False, **extra) -> HTMLResponse:
    """One memory's card; when the count changed (a delete, an Undo), the page's count line too, out
    of band, for the filter and page the card was shown in."""
    show = forms.text(form, "show") or "all"
    offset = forms.optional_number(form, "offset", int) or 0
    ctx = {"m": memory, "names": service.character_names(session), "show": show, "offset": offset, **extra}
    if recount:
        ctx["recount"] = service.list_long_term(session, scope=show, offset=offset)
    return render(request, CARD, ctx)


def _short_term_section(request: Request, session, chat_id: int, status: str) -> HTMLResponse:
    chat = chats.get_chat(session, chat_id)
    return render(
        request,
        "tools/_short_term_settings.html",
        {"chat": chat, "c": short_term_context(session, chat_id), "status": status},
    )


@router.post("/chats/{chat_id}/short-term-memory/{item_id}/delete")
def delete_short_term_page(chat_id: int, item_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Chat Settings: forget one short-term item."""
    service.delete_short_term(session, chat_id, item_id)
    return _short_term_section(request, session, chat_id, "Removed.")


@router.post("/chats/{chat_id}/short-term-memory/clear")
def clear_short_term_page(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Chat Settings: forget the chat's whole short-term memory."""
    chats.get_chat(session, chat_id)
    removed = service.clear_short_term(session, chat_id)
    return _short_term_section(
        request, session, chat_id, f"Cleared {removed} item{'s' if removed != 1 else ''}."
    )

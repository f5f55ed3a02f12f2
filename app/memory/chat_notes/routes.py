"""The "Memory of this chat" panel and the memory commands typed in the message box (HTML for HTMX).
A refused note answers with the sentence naming the limit (the app's error toast); the panel stays."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.chats import service as chats
from app.memory.chat_notes import service
from app.memory.chat_notes.core.rules import MAX_NOTES, NOTE_CHARS
from app.platform import forms
from app.web.deps import FormDep, ServicesDep, SessionDep
from app.web.templates import render

router = APIRouter(include_in_schema=False)


def _panel(request: Request, session, chat) -> HTMLResponse:  # type: ignore[no-untyped-def]
    return render(
        request,
        "memory/chat_notes_panel.html",
        {
            "chat": chat,
            "memory": service.view(session, chat),
            "settings": chats.chat_settings(chat),
            "max_notes": MAX_NOTES,
            "note_chars": NOTE_CHARS,
        },
    )


@router.get("/chats/{chat_id}/memory")
def chat_memory_panel(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The panel: the summary's sections and the notes."""
    return _panel(request, session, chats.get_chat(session, chat_id))


@router.post("/chats/{chat_id}/memory/notes")
def save_note_page(
    chat_id: int, request: Request, form: FormDep, session: SessionDep, services: ServicesDep
) -> HTMLResponse:
    """Save a note from the panel's field."""
    chat = chats.get_chat(session, chat_id)
    service.save_note(session, services.settings.data_dir, chat, forms.text(form, "text"))
    return _panel(request, session, chat)


@router.post("/chats/{chat_id}/memory/notes/{number}/delete")
def delete_note_page(
    chat_id: int, number: int, request: Request, session: SessionDep, services: ServicesDep
) -> HTMLResponse:
    """Delete note `number` (counted from 1, as the panel and /memory show them)."""
    chat = chats.get_chat(session, chat_id)
    service.forget(session, services.settings.data_dir, chat, number)
    return _panel(request, session, chat)


@router.post("/chats/{chat_id}/memory/command")
def memory_command_page(
    chat_id: int, request: Request, form: FormDep, session: SessionDep, services: ServicesDep
) -> HTMLResponse:
    """/remember, /memory, /forget from the message box: a notice in the chat, never a message."""
    chat = chats.get_chat(session, chat_id)
    outcome = service.run_command(session, services.settings.data_dir, chat, forms.text(form, "text"))
    return render(
        request,
        "memory/_chat_memory_notice.html",
        {
            "sentence": outcome.sentence,
            "memory": outcome.memory,
            "show_memory": outcome.show_memory,
            "notice_id": uuid.uuid4().hex[:12],
        },
    )

"""The memory of a chat in the JSON API: read it, keep notes, run the memory commands, list the other
chats @ can bring in. The same service calls as the panel and the message box."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.chats import service as chats
from app.memory.chat_notes import service
from app.memory.chat_notes.core.rules import NOTE_CHARS
from app.web.deps import ServicesDep, SessionDep

router = APIRouter(prefix="/api/chats", tags=["chat memory"])


class FileMarkRead(BaseModel):
    name: str
    mark: str


class ChatMemoryRead(BaseModel):
    """The memory of a chat: the sections made by rules, the user's notes, and the Markdown text its
    file holds and @ attaches ("" when empty)."""

    chat_id: int
    requests: list[str]
    result: str
    files: list[FileMarkRead]
    commands: list[str]
    previous_summary: str
    notes: list[str]
    text: str


class NoteIn(BaseModel):
    # The limit is checked by the rules, with the sentence naming it; this only bounds the body.
    text: str = Field(max_length=NOTE_CHARS * 8)


class CommandIn(BaseModel):
    text: str = Field(max_length=NOTE_CHARS * 8)


class CommandRead(BaseModel):
    """What the command did; `memory` is the memory after it."""

    notice: str
    memory: ChatMemoryRead


class OtherChatRead(BaseModel):
    id: int
    title: str
    first_request: str
    last_message_at: str


def _read(memory: service.ChatMemoryView) -> ChatMemoryRead:
    s = memory.summary
    return ChatMemoryRead(
        chat_id=memory.chat_id,
        requests=list(s.requests),
        result=s.result,
        files=[FileMarkRead(name=f.name, mark=f.mark) for f in s.files],
        commands=list(s.commands),
        previous_summary=s.previous_summary,
        notes=list(memory.notes),
        text=memory.text,
    )


@router.get("/{chat_id}/memory", response_model=ChatMemoryRead)
def get_chat_memory(chat_id: int, session: SessionDep) -> ChatMemoryRead:
    """The memory of this chat."""
    return _read(service.view(session, chats.get_chat(session, chat_id)))


@router.post("/{chat_id}/memory/notes", response_model=ChatMemoryRead, status_code=201)
def add_chat_note(chat_id: int, data: NoteIn, session: SessionDep, services: ServicesDep) -> ChatMemoryRead:
    """Keep a note (at most 30, of up to 500 characters)."""
    chat = chats.get_chat(session, chat_id)
    service.save_note(session, services.settings.data_dir, chat, data.text)
    return _read(service.view(session, chat))


@router.delete("/{chat_id}/memory/notes/{number}", response_model=ChatMemoryRead)
def delete_chat_note(chat_id: int, number: int, session: SessionDep, services: ServicesDep) -> ChatMemoryRead:
    """Forget note `number`, counted from 1."""
    chat = chats.get_chat(session, chat_id)
    service.forget(session, services.settings.data_dir, chat, number)
    return _read(service.view(session, chat))


@router.post("/{chat_id}/memory/commands", response_model=CommandRead)
def run_memory_command(
    chat_id: int, data: CommandIn, session: SessionDep, services: ServicesDep
) -> CommandRead:
    """Run /remember TEXT, /memory or /forget N (and /lembrar, /memoria, /esquecer) as the message
    box does: never a message, never sent to the model."""
    chat = chats.get_chat(session, chat_id)
    outcome = service.run_command(session, services.settings.data_dir, chat, data.text)
    return CommandRead(notice=outcome.sentence, memory=_read(outcome.memory))


@router.get("/{chat_id}/memory/others", response_model=list[OtherChatRead])
def list_other_chats(chat_id: int, session: SessionDep, q: str = "") -> list[OtherChatRead]:
    """The user's other chats with a memory, most recent first, filtered by `q` (title or first
    request): what @ lists. At most 20."""
    chats.get_chat(session, chat_id)
    return [
        OtherChatRead(
            id=o.id, title=o.title, first_request=o.first_request, last_message_at=o.last_message_at
        )
        for o in service.others(session, chat_id, q)
    ]

import json
from typing import Literal

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import Response, StreamingResponse
from sqlalchemy import text
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from app.chats import attachments, service, turn_taking, views
from app.chats.changes import chat_added, chat_deleted, messages_changed, settings_saved
from app.chats.models import ChatCharacter
from app.chats.narrator import add_standalone_narrator
from app.chats.schemas import (
    AttachmentRead,
    ChatCreate,
    ChatImported,
    ChatOptionsIn,
    ChatPatch,
    ChatRead,
    GenerateIn,
    MemberPatch,
    MessageIn,
    MessagePatch,
    MessageRead,
    SwipeIn,
)
from app.chats.st_io import export_group
from app.generation import following, reply
from app.lore.chat_files import ChatImport, export_chat_file, import_chat_file, import_group_files
from app.memory.chat_notes import service as chat_notes
from app.memory.chat_notes.core.commands import is_memory_command
from app.platform.core.downloads import attachment, content_disposition, safe_stem
from app.platform.core.errors import NotFound, UserError
from app.platform.modelbase import RowId
from app.platform.services import Services
from app.prompt.report import context_report, snapshot
from app.prompt.schemas import PromptRead, prompt_read
from app.prompt.service import build_chat_prompt
from app.web.deps import ServicesDep, SessionDep

router = APIRouter(prefix="/api/chats", tags=["chats"])


@router.get("", response_model=list[ChatRead])
def list_chats(session: SessionDep, q: str | None = None) -> list[ChatRead]:
    """Chats, most recent first; `q` filters by name."""
    return [views.chat_read(session, s.chat) for s in service.list_chats(session, query=q)]


@router.post("", response_model=ChatRead, status_code=201)
def create_chat(data: ChatCreate, session: SessionDep) -> ChatRead:
    """Start a chat with one or more characters; their greetings open it."""
    chat = service.create_chat(
        session,
        character_ids=data.character_ids,
        name=data.name,
        mode=data.mode,
        persona_id=data.persona_id,
        connection_id=data.connection_id,
    )
    return views.chat_read(session, chat)


@router.post("/import", response_model=ChatImported, status_code=201)
def import_chat(
    session: SessionDep,
    services: ServicesDep,
    file: UploadFile = File(...),
    character_id: RowId | None = Form(None),
) -> ChatImported:
    """Import a SillyTavern .jsonl chat with its settings, lorebooks and summaries, named after the file;
    `result` says what arrived, `notes` what was left out."""
    done = import_chat_file(
        session, file.file.read(), services.sources, character_id=character_id, file_name=file.filename
    )
    chat_added(session, services, done.chat.id)
    return _imported(session, done)


def _imported(session: Session, done: ChatImport) -> ChatImported:
    """An imported chat as the API answers it: the chat, what arrived and what was left out."""
    return ChatImported(
        **views.chat_read(session, done.chat).model_dump(),
        result=done.result,
        imported_messages=done.messages,
        imported_summaries=done.summaries,
        attached_lorebooks=done.lorebooks,
        notes=done.notes,
    )


@router.post("/import-group", response_model=list[ChatImported], status_code=201)
def import_group(
    session: SessionDep,
    services: ServicesDep,
    group: UploadFile = File(...),
    chats: list[UploadFile] | None = File(None),
) -> list[ChatImported]:
    """Import a SillyTavern group: its file (data/<user>/groups/<id>.json) and its chats (.jsonl, both
    layouts); one group chat per file, members found by their cards' avatar keys. Nothing is created
    when a file is refused or a member is missing."""
    done = import_group_files(
        session, group.file.read(), [(f.filename, f.file.read()) for f in chats or ()], services.sources
    )
    for one in done:
        chat_added(session, services, one.chat.id)
    return [_imported(session, one) for one in done]


@router.get("/{chat_id}", response_model=ChatRead)
def show_chat(chat_id: int, session: SessionDep) -> ChatRead:
    """One chat."""
    return views.chat_read(session, service.get_chat(session, chat_id))


@router.patch("/{chat_id}", response_model=ChatRead)
def rename_chat(chat_id: int, data: ChatPatch, session: SessionDep) -> ChatRead:
    """Rename a chat."""
    chat = service.rename_chat(session, chat_id, data.name or "")
    return views.chat_read(session, chat)


@router.put("/{chat_id}/options", response_model=ChatRead)
def update_chat_options(
    chat_id: int, data: ChatOptionsIn, session: SessionDep, services: ServicesDep
) -> ChatRead:
    """Chat Settings: connection override, generation parameters, recent-message limit, persona."""
    chat = service.update_chat_options(
        session,
        chat_id,
        settings=data.settings,
        connection_id=data.connection_id,
        persona_id=data.persona_id,
        mode=data.mode,
    )
    settings_saved(session, services, chat_id)
    return views.chat_read(session, chat)


@router.put("/{chat_id}/members/{character_id}", response_model=ChatRead)
def update_member(chat_id: int, character_id: int, data: MemberPatch, session: SessionDep) -> ChatRead:
    """Mute or unmute a member of the chat (a muted member answers only when asked for by name), or set
    its own new start (it reads the chat from that message on; null: from the beginning)."""
    chat = service.get_chat(session, chat_id)
    found = (
        turn_taking.set_muted(session, chat_id, character_id, data.muted) if data.muted is not None else True
    )
    if "start_message_id" in data.model_fields_set:
        found = turn_taking.set_start(session, chat_id, character_id, data.start_message_id) and found
    if not found or session.get(ChatCharacter, (chat_id, character_id)) is None:
        raise NotFound(f"Character {character_id} is not in this chat.")
    session.commit()
    return views.chat_read(session, chat)


@router.delete("/{chat_id}", status_code=204)
def delete_chat(chat_id: int, session: SessionDep, services: ServicesDep) -> None:
    """Delete a chat and its messages."""
    service.delete_chat(session, chat_id)
    chat_deleted(session, services, chat_id)


@router.get("/{chat_id}/messages", response_model=list[MessageRead])
def list_messages(chat_id: int, session: SessionDep) -> list[MessageRead]:
    """Every message, oldest first."""
    service.get_chat(session, chat_id)
    return [views.message_read(m) for m in service.list_messages(session, chat_id)]


@router.post("/{chat_id}/messages", response_model=MessageRead, status_code=201)
def post_message(chat_id: int, data: MessageIn, session: SessionDep) -> MessageRead:
    """Add the user's message without asking for a reply."""
    if is_memory_command(data.content):
        raise UserError(
            f"That is a memory command, not a message: send it to POST /api/chats/{chat_id}/memory/commands."
        )
    return views.message_read(
        service.add_user_message(
            session,
            service.get_chat(session, chat_id),
            data.content,
            attachment_ids=data.attachment_ids,
            whisper_to=data.whisper_to,
        )
    )


@router.post("/{chat_id}/refresh", response_model=MessageRead, status_code=201)
def add_refresh_mark(chat_id: int, session: SessionDep) -> MessageRead:
    """/refresh: the AI reads nothing above this mark; delete the mark to undo the cut."""
    return views.message_read(service.add_refresh_mark(session, service.get_chat(session, chat_id)))


@router.patch("/{chat_id}/messages/{message_id}", response_model=MessageRead)
def update_message(
    chat_id: int, message_id: int, data: MessagePatch, session: SessionDep, services: ServicesDep
) -> MessageRead:
    """Edit a message's text (its active version), hide/unhide it from the AI, or set who in a group
    cannot see it (`hidden_for`, `whisper_to`)."""
    msg = service.get_message(session, chat_id, message_id)
    if data.content is not None:
        msg = service.edit_message(session, chat_id, message_id, data.content)
    if data.hidden is not None:
        msg = service.set_hidden(session, chat_id, message_id, data.hidden)
    audience = {k: getattr(data, k) for k in ("hidden_for", "whisper_to") if k in data.model_fields_set}
    if audience:
        msg = service.set_audience(session, chat_id, message_id, **audience)
    messages_changed(session, services, chat_id)
    return views.message_read(msg)


@router.delete("/{chat_id}/messages/{message_id}", status_code=204)
def delete_message(chat_id: int, message_id: int, session: SessionDep, services: ServicesDep) -> None:
    """Delete a message."""
    service.delete_message(session, chat_id, message_id)
    messages_changed(session, services, chat_id)


@router.post("/{chat_id}/messages/{message_id}/swipe", response_model=MessageRead)
def select_swipe(
    chat_id: int, message_id: int, data: SwipeIn, session: SessionDep, services: ServicesDep
) -> MessageRead:
    """Show another version (swipe) of a message."""
    msg = service.select_swipe(session, chat_id, message_id, data.index)
    messages_changed(session, services, chat_id)
    return views.message_read(msg)


@router.delete("/{chat_id}/messages/{message_id}/swipes/{index}", response_model=MessageRead)
def delete_swipe(chat_id: int, message_id: int, index: int, session: SessionDep) -> MessageRead:
    """Delete one version (swipe) of a message, counted from 0; a reply being written goes on."""
    return views.message_read(service.delete_swipe(session, chat_id, message_id, index))


@router.post("/{chat_id}/messages/{message_id}/branch", response_model=ChatRead, status_code=201)
def branch_chat(chat_id: int, message_id: int, session: SessionDep, services: ServicesDep) -> ChatRead:
    """A new chat with the history up to this message (and the summary entries within it)."""
    branch = service.branch_chat(session, chat_id, message_id)
    services.sources.chat_branched(session, service.get_chat(session, chat_id), branch)
    chat_added(session, services, branch.id)
    return views.chat_read(session, branch)


@router.post("/{chat_id}/generate")
async def generate_reply(chat_id: int, data: GenerateIn, services: ServicesDep) -> StreamingResponse:
    """Store the user's message (if any) and stream the reply as server-sent events:
    `start`, `token` {text}... (the reply), `reasoning` {text}... (the model's thinking, kept apart),
    `rewrite` {text, reasoning} (what streamed as the reply was thinking), `thought` {ms, label} (the
    thinking ended), then `done`, `stopped` or `error` {kind, message} (kind `only_thinking` or
    `empty` when the model said nothing)."""
    refs: list[dict] = []
    if data.action == "send" and data.content:
        if is_memory_command(data.content):
            # The message box runs these itself; here too they must never become a message or reach
            # the model.
            raise UserError(
                "That is a memory command, not a message: send it to "
                f"POST /api/chats/{chat_id}/memory/commands (the message box does)."
            )
        if data.chat_ref_ids:
            refs = await run_in_threadpool(_references, services, chat_id, data.chat_ref_ids)
    gen = await reply.start(
        services,
        chat_id=chat_id,
        action=data.action,
        content=data.content,
        speaker_id=data.speaker_id,
        message_id=data.message_id,
        attachment_ids=data.attachment_ids,
        quote=data.quote if data.action == "send" else None,
        chat_refs=refs,
        whisper_to=data.whisper_to if data.action == "send" else None,
        start_with=data.start_with if data.action in ("send", "regenerate", "swipe") else None,
    )
    return StreamingResponse(
        reply.subscribe(gen),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "X-Message-Id": str(gen.message_id)},
    )


@router.post("/{chat_id}/attachments", response_model=AttachmentRead, status_code=201)
def upload_attachment(
    chat_id: int, session: SessionDep, services: ServicesDep, file: UploadFile = File(...)
) -> AttachmentRead:
    """Upload one file (a PDF or UTF-8 text, ≤ 20 MB) to send with the next message: pass its id in
    `attachment_ids` when sending. Unsent uploads are removed after a day."""
    attachment = attachments.store_upload(
        session, services.settings.data_dir, chat_id, name=file.filename, stream=file.file
    )
    return AttachmentRead.model_validate(attachment, from_attributes=True)


@router.get("/{chat_id}/attachments", response_model=list[AttachmentRead])
def list_attachments(chat_id: int, session: SessionDep) -> list[AttachmentRead]:
    """The chat's files: those sent with messages, and those waiting (`message_id` null). The file
    itself downloads from /chats/{chat_id}/attachments/{id}."""
    service.get_chat(session, chat_id)
    return [
        AttachmentRead.model_validate(a, from_attributes=True)
        for a in attachments.chat_attachments(session, chat_id)
    ]


@router.delete("/{chat_id}/attachments/{attachment_id}", status_code=204)
def remove_waiting_attachment(chat_id: int, attachment_id: int, session: SessionDep) -> None:
    """Take back an upload not sent yet (a sent file goes with its message)."""
    attachments.remove_waiting(session, chat_id, attachment_id)


@router.get("/{chat_id}/generate")
async def follow_generation(chat_id: int, request: Request, services: ServicesDep) -> Response:
    """Follow the reply being written now, by this server or by another sharing the database (the same
    events as POST's, from `start`; 204 when none is, saying in `X-Last-Message-Id` the chat's newest
    message: an open page that has not got it yet fetches it)."""
    gen = services.generations.get(chat_id)
    if gen is not None:
        return StreamingResponse(reply.subscribe(gen), media_type="text/event-stream")
    token = await run_in_threadpool(services.generations.written_elsewhere, chat_id)
    if token is not None:
        return StreamingResponse(
            following.follow_stored(
                services.generations, chat_id, token, disconnected=request.is_disconnected
            ),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    newest = await run_in_threadpool(_newest_message_id, services, chat_id)
    return Response(status_code=204, headers={"X-Last-Message-Id": str(newest)})


_NEWEST_SQL = text("SELECT coalesce(max(id), 0) FROM message WHERE chat_id = :chat_id")


def _newest_message_id(services, chat_id: int) -> int:
    with Session(services.engine) as session:
        return int(session.connection().execute(_NEWEST_SQL, {"chat_id": chat_id}).scalar_one())


@router.post("/{chat_id}/stop")
async def stop_generation(chat_id: int, services: ServicesDep) -> dict:
    """Stop the reply being written; what arrived so far is kept."""
    if services.generations.stop(chat_id):
        return {"stopped": True}
    # Being written on another server sharing the database: its claim row carries the Stop there.
    return {"stopped": await run_in_threadpool(services.generations.stop_anywhere, chat_id)}


@router.get("/{chat_id}/prompt", response_model=PromptRead)
def peek_prompt(
    chat_id: int, session: SessionDep, services: ServicesDep, speaker_id: RowId | None = None
) -> PromptRead:
    """Peek Prompt: the exact messages the next reply would be asked with, block by block; in a group,
    `speaker_id`'s (what that member sees: messages hidden from it and others' whispers left out)."""
    chat = service.get_chat(session, chat_id)
    prompt, _ = build_chat_prompt(
        session, chat, services=services, speaker=_speaker(session, chat, speaker_id)
    )
    return prompt_read(prompt, timings=services.settings.debug_timings)


@router.get("/{chat_id}/context")
def show_context(
    chat_id: int, session: SessionDep, services: ServicesDep, speaker_id: RowId | None = None
) -> dict:
    """The context grid as data: tokens per group, free space, cost estimate, cache hit rate."""
    chat = service.get_chat(session, chat_id)
    report = context_report(session, chat, services=services, speaker=_speaker(session, chat, speaker_id))
    return {
        "context_size": report.prompt.context_size,
        "reply_reserve": report.prompt.reply_reserve,
        "used_tokens": report.grid.used_tokens,
        "free_tokens": report.grid.free_tokens,
        "over_by": report.grid.over_by,
        "cell_tokens": report.grid.cell_tokens,
        "legend": [row.__dict__ for row in report.grid.legend],
        "sizes": [row.__dict__ for row in report.sizes],
        "cost": report.cost.__dict__,
        "prefix_tokens": report.prefix_tokens,
        "last_input_tokens": report.last_input_tokens,
        "last_cached_tokens": report.last_cached_tokens,
        "cache_hit_rate": report.cache_hit_rate,
        "replies_with_usage": report.replies_with_usage,
    }


@router.get("/{chat_id}/prompt/snapshot")
def download_prompt_snapshot(
    chat_id: int,
    session: SessionDep,
    services: ServicesDep,
    format: Literal["text", "json"] = "text",
    speaker_id: RowId | None = None,
) -> Response:
    """The exact package for the next reply: annotated text, or the provider's JSON body."""
    chat = service.get_chat(session, chat_id)
    name, content = snapshot(
        session, chat, services=services, fmt=format, speaker=_speaker(session, chat, speaker_id)
    )
    media = "application/json" if format == "json" else "text/plain; charset=utf-8"
    return Response(
        content,
        media_type=media,
        headers={"Content-Disposition": content_disposition(name, fallback="prompt")},
    )


@router.get("/{chat_id}/export")
def export_chat(chat_id: int, session: SessionDep, services: ServicesDep) -> Response:
    """Export as a SillyTavern .jsonl chat, its settings, lorebooks and summary entries (Marinara's
    `summaryEntries`) in the header's chat_metadata."""
    chat = service.get_chat(session, chat_id)
    return Response(
        export_chat_file(session, chat, services.sources),
        media_type="application/jsonl",
        headers={"Content-Disposition": attachment(chat.name, "jsonl", fallback="chat")},
    )


@router.get("/{chat_id}/export-group")
def export_group_file(chat_id: int, session: SessionDep) -> Response:
    """The chat's group as a SillyTavern group file (data/<user>/groups/); its chat is the .jsonl of
    GET /export, named as the file's `chat_id` says."""
    chat = service.get_chat(session, chat_id)
    chat_file_id = safe_stem(chat.name, "chat")
    body = export_group(session, chat, chat_file_id=chat_file_id)
    return Response(
        json.dumps(body, ensure_ascii=False, indent=2),
        media_type="application/json",
        headers={"Content-Disposition": attachment(chat.name, "json", fallback="group")},
    )


def _speaker(session: Session, chat, speaker_id: int | None):
    """The member a preview is built for; None (the chat's default) when none is asked."""
    if speaker_id is None:
        return None
    return service.next_speaker(session, chat, service.chat_characters(session, chat.id), speaker_id)


def _references(services: Services, chat_id: int, ids: list[int]) -> list[dict]:
    """The memories of the chats chosen with @, read as they are now (a copy goes with the message)."""
    with Session(services.engine) as session:
        return chat_notes.references(session, services.settings.data_dir, chat_id, ids)


@router.post("/{chat_id}/narrator", response_model=ChatRead)
def add_narrator(chat_id: int, session: SessionDep, services: ServicesDep) -> ChatRead:
    """Give the group a narrator of its own: Sugo's Narrator card joins muted and becomes its narrator
    (app/chats/narrator.py)."""
    chat = service.get_chat(session, chat_id)
    add_standalone_narrator(session, chat)
    settings_saved(session, services, chat_id)
    return views.chat_read(session, chat)

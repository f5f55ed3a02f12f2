"""Chat pages: the list, the chat itself, message actions, Chat Settings and Peek Prompt."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from sqlmodel import Session, col, select
from starlette.concurrency import run_in_threadpool

from app.characters.art import art_picker
from app.characters.models import Character
from app.characters.service import list_characters
from app.chats import attachments, backdrop, service, turn_taking
from app.chats.changes import chat_added, chat_deleted, messages_changed, settings_saved
from app.chats.history import message_count
from app.chats.models import Chat, Message
from app.chats.narrator import add_standalone_narrator, is_sugos_narrator
from app.chats.settings import ChatSettings
from app.connections.core.presets import LOCAL_PRESET_BY_PORT, PRESETS
from app.connections.discovery import find_local_servers
from app.connections.service import default_connection, list_connections
from app.lore.chat_files import ChatImport, import_chat_file, import_group_files
from app.memory.scenes.prompt import window_start
from app.memory.summaries.core.coverage import ChatMessage
from app.memory.summaries.service import summarised_ids
from app.personas.service import default_persona, list_personas
from app.platform import forms
from app.platform.core.downloads import content_disposition
from app.platform.core.errors import NotFound, UserError
from app.platform.core.names import refuse_control_characters
from app.platform.core.speech import css_version
from app.platform.modelbase import parse_row_id
from app.presets import service as presets
from app.prompt.core.blocks import GROUP_LABELS
from app.prompt.core.inspect import message_counts
from app.prompt.report import context_report
from app.prompt.service import build_chat_prompt
from app.web.commands import default_commands
from app.web.deps import FormDep, ServicesDep, SessionDep, SettingsDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)
PAGE_SIZE = 60


def _message_ctx(
    session: Session, request: Request, chat: Chat, shown: list[Message], *, newest: bool = False
) -> dict:
    """What rendering `shown` (consecutive messages of the chat, in order) needs besides them;
    `newest`: they end with the chat's last message (the chat page), which is then not asked again."""
    characters = service.chat_characters(session, chat.id)
    persona = service.chat_persona(session, chat)
    last = (shown[-1] if shown else None) if newest else service.last_message(session, chat.id)
    return {
        "chat": chat,
        "characters": characters,
        "avatars": {c.id: c.avatar_id for c in characters},
        # The picture beside the story after each reply (issue 29): its speaker's art or expression.
        "art_of": art_picker(characters, expressions_on=service.chat_settings(chat).expressions),
        # A group's members by id: who a message is hidden from or whispered to (app/chats/core/audience.py).
        "member_names": {c.id: c.name for c in characters},
        # Members' own new starts, by the message they start at: the message shows "new start for …".
        "starts_at": _starts_at(session, chat.id, characters),
        "persona_avatar": persona.avatar_id if persona else None,
        "user_name": persona.name if persona else service.FALLBACK_USER_NAME,
        # The address of the chat's speech colours changes with them (show_speakers_css).
        "speech_version": css_version(service.speech_stylesheet(characters, persona)),
        "chat_char_name": characters[0].name if characters else "",
        "last_id": last.id if last else None,
        "watch_ms": int(request.app.state.services.settings.chat_watch_s * 1000),
        "summarised": _summarised(session, chat, shown),
        "attachments": attachments.message_attachments(session, (m.id for m in shown)),
        # Collapse hidden messages off: summarised messages stay in view, dimmed and marked.
        "summary_collapse": service.chat_settings(chat).summary_collapse_hidden,
        # Advanced Memory's "new start": where the prompt's current window begins.
        "new_start": window_start(session, chat.id)
        if service.chat_settings(chat).advanced_memory_on(chat.mode)
        else None,
    }


def _starts_at(session: Session, chat_id: int, characters: list) -> dict[int, list[str]]:
    if len(characters) < 2:
        return {}
    names = {c.id: c.name for c in characters}
    out: dict[int, list[str]] = {}
    for character_id, message_id in turn_taking.member_starts(session, chat_id).items():
        if character_id in names:
            out.setdefault(message_id, []).append(names[character_id])
    return out


def _summarised(session: Session, chat: Chat, shown: list[Message]) -> frozenset[int]:
    """Chat Summary with "Hide summarised messages": which of the shown messages the chat view folds."""
    s = service.chat_settings(chat)
    if chat.mode != "roleplay":
        return frozenset()
    page = [ChatMessage(m.id, m.hidden) for m in shown if m.kind == "message" and m.id is not None]
    return summarised_ids(session, chat.id, page, hide=s.summary_hide_messages, tail=s.summary_recent_tail)


def _render_message(request: Request, session: Session, chat: Chat, msg: Message) -> HTMLResponse:
    return render(request, "chats/_message.html", {**_message_ctx(session, request, chat, [msg]), "m": msg})


@router.get("/")
async def home_page(
    request: Request, session: SessionDep, settings: SettingsDep, hx: HxRequest, q: str | None = None
) -> HTMLResponse:
    """Chats, most recent first; on first run, the way to a first connection. The search box asks
    for the chat list alone."""
    if hx:
        return render(
            request,
            "home.html",
            {
                "chats": service.list_chats(session, query=q),
                "q": q,
                "characters_exist": bool(list_characters(session)),
            },
            block="chat_list",
        )
    connections = list_connections(session)
    found = []
    if not connections:
        for f in await find_local_servers(settings.discovery_ports):
            found.append({**f.__dict__, "preset": LOCAL_PRESET_BY_PORT.get(f.port, "custom")})
    characters = list_characters(session)
    return render(
        request,
        "home.html",
        {
            "chats": service.list_chats(session, query=q),
            "q": q,
            "connections": connections,
            "found": found,
            "presets": PRESETS,
            "characters": characters,
            "characters_exist": bool(characters),
        },
    )


@router.get("/chats/new")
def new_chat_page(request: Request, session: SessionDep, character_id: int | None = None) -> HTMLResponse:
    """Pick characters, mode and persona for a new chat."""
    return render(
        request,
        "chats/new.html",
        {
            "characters": list_characters(session),
            "personas": list_personas(session),
            "preselect": character_id,
        },
    )


@router.post("/chats")
def create_chat_page(request: Request, form: FormDep, session: SessionDep) -> Response:
    """Create the chat and open it."""
    ids = [
        i for v in form.getlist("character_ids") if isinstance(v, str) and (i := parse_row_id(v)) is not None
    ]
    mode = forms.text(form, "mode", "roleplay")
    game_master = forms.optional_number(form, "game_master_id", int)
    if mode == "game" and game_master is not None:  # the Game Master first: it is the game's narrator
        ids = [game_master, *(i for i in ids if i != game_master)]
    chat = service.create_chat(
        session,
        character_ids=ids,
        name=refuse_control_characters(forms.text(form, "name"), "A chat name"),
        mode=mode,
        persona_id=forms.optional_number(form, "persona_id", int),
    )
    return Response(status_code=204, headers={"HX-Redirect": f"/chats/{chat.id}"})


@router.post("/chats/import")
async def import_chat_page(request: Request, session: SessionDep, services: ServicesDep) -> Response:
    """Import a SillyTavern .jsonl chat and open it, saying what arrived."""
    form = await request.form()
    raw = await forms.upload(form, "file")
    if not raw:
        raise UserError("Choose a .jsonl chat file to import.")
    upload = form.get("file")
    # Parsing and writing a long chat takes seconds: on a thread, so other requests go on meanwhile.
    done = await run_in_threadpool(
        _import_chat,
        session,
        services,
        raw,
        character_id=forms.optional_number(form, "character_id", int),
        file_name=getattr(upload, "filename", None),
    )
    return _open_imported(done.chat.id, done.result, done.notes)


def _open_imported(chat_id: int, said: str, notes: list[str]) -> Response:
    """Leave the page for the imported chat; app.js keeps what to say for it to show (ASCII JSON, a
    header)."""
    notices = {"done": said, "notices": notes}
    return Response(
        status_code=204,
        headers={
            "HX-Redirect": f"/chats/{chat_id}",
            "HX-Trigger": json.dumps({"sugo:notices-next-page": notices}),
        },
    )


@router.post("/chats/import-group")
async def import_group_page(request: Request, session: SessionDep, services: ServicesDep) -> Response:
    """Import a SillyTavern group and its chats, and open the last chat imported, saying what arrived."""
    form = await request.form()
    group = await forms.upload(form, "group")
    if not group:
        raise UserError("Choose the group's .json file to import.")
    chat_files = []
    for upload in form.getlist("chats"):
        if getattr(upload, "filename", None):
            chat_files.append((upload.filename, await upload.read()))
    done = await run_in_threadpool(_import_group, session, services, group, chat_files)
    said = f"Imported {len(done)} group chats." if len(done) > 1 else done[-1].result
    return _open_imported(done[-1].chat.id, said, [n for one in done for n in one.notes])


def _import_group(session: Session, services, group: bytes, chat_files: list) -> list[ChatImport]:
    done = import_group_files(session, group, chat_files, services.sources)
    for one in done:
        chat_added(session, services, one.chat.id)
    return done


def _import_chat(
    session: Session, services, raw: bytes, *, character_id: int | None, file_name: str | None
) -> ChatImport:
    done = import_chat_file(session, raw, services.sources, character_id=character_id, file_name=file_name)
    chat_added(session, services, done.chat.id)
    return done


def _page_of_messages(
    session: Session, chat_id: int, *, before: int | None
) -> tuple[list[Message], int | None]:
    stmt = select(Message).where(Message.chat_id == chat_id)
    if before:
        stmt = stmt.where(col(Message.id) < before)
    rows = list(session.exec(stmt.order_by(col(Message.id).desc()).limit(PAGE_SIZE + 1)))
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    rows.reverse()
    return rows, (rows[0].id if more and rows else None)


def _numbered_from(session: Session, chat_id: int, messages: list[Message], earlier: int | None) -> int:
    """Messages before this page: the page's numbering (Chat Summary's ranges) starts after them.
    None `earlier`: the page starts at the chat's first message, so nothing is counted."""
    return message_count(session, chat_id, messages[0].id) if messages and earlier is not None else 0


@router.get("/chats/{chat_id}")
def show_chat_page(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The chat: newest messages, the composer, Chat Settings and Peek Prompt."""
    chat = service.get_chat(session, chat_id)
    messages, earlier = _page_of_messages(session, chat_id, before=None)
    ctx = _message_ctx(session, request, chat, messages, newest=True)
    return render(
        request,
        "chats/detail.html",
        {
            **ctx,
            "messages": messages,
            "earlier_before": earlier,
            "settings": service.chat_settings(chat),
            "narrator": service.chat_settings(chat).narrator_in(chat.mode, [c.id for c in ctx["characters"]])
            is not None,
            "game_master": _game_master(chat, ctx["characters"]),
            "numbered_from": _numbered_from(session, chat_id, messages, earlier),
            "has_connection": service.chat_connection(session, chat) is not None,
            "waiting": attachments.waiting_attachments(session, chat_id),  # uploads not sent yet
            # Here or on another server sharing the database: the page follows it either way.
            "generating": request.app.state.services.generations.writing(chat_id),
            "commands": default_commands(),  # the `/` palette's list
            "character_art": _character_art(ctx["art_of"], ctx["characters"], messages),
            "backdrop": backdrop.chat_backdrop(session, chat),
        },
    )


@router.get("/chats/{chat_id}/speakers.css")
def show_speakers_css(chat_id: int, session: SessionDep, v: str = "") -> Response:
    """The chat's speech colours (app/platform/core/speech.py): kept for good under its current version."""
    chat = service.get_chat(session, chat_id)
    css = service.speech_stylesheet(
        service.chat_characters(session, chat_id), service.chat_persona(session, chat)
    )
    cache = "private, max-age=31536000, immutable" if v == css_version(css) else "no-cache"
    return Response(css, media_type="text/css", headers={"Cache-Control": cache})


def _character_art(art_of, characters: list[Character], messages: list[Message]) -> str:
    """The picture the page opens with: the last reply's speaker's, else a 1:1 chat's character's
    ("" for none). app.js follows the replies from there (their `data-art`)."""
    for m in reversed(messages):
        if m.role == "assistant" and (shown := art_of(m.character_id, m.content)) is not None:
            return shown
    if len(characters) == 1:
        return art_of(characters[0].id, "") or ""
    return ""


def _game_master(chat: Chat, characters: list[Character]) -> Character | None:
    """A Game chat's Game Master (the composer names it); None in other chats."""
    if chat.mode != "game":
        return None
    gm = service.chat_settings(chat).narrator_in(chat.mode, [c.id for c in characters])
    return next((c for c in characters if c.id == gm), None)


@router.get("/chats/{chat_id}/messages")
def list_messages_fragment(
    chat_id: int, request: Request, session: SessionDep, before: int | None = None, after: int | None = None
) -> HTMLResponse:
    """Earlier messages (`before`) or messages newer than `after`, as fragments; with `after`, the
    message that was last comes along out of band (it is no longer last)."""
    chat = service.get_chat(session, chat_id)
    previous = None
    if after is not None:
        messages = list(
            session.exec(
                select(Message)
                .where(Message.chat_id == chat_id, col(Message.id) > after)
                .order_by(Message.id)
            )
        )
        earlier = None
        if messages:
            previous = session.exec(
                select(Message)
                .where(Message.chat_id == chat_id, col(Message.id) <= after)
                .order_by(col(Message.id).desc())
                .limit(1)
            ).first()
    else:
        messages, earlier = _page_of_messages(session, chat_id, before=before)
    return render(
        request,
        "chats/_messages.html",
        {
            **_message_ctx(session, request, chat, ([previous] if previous else []) + messages),
            "messages": messages,
            "earlier_before": earlier,
            "previous": previous,
            "numbered_from": None
            if after is not None
            else _numbered_from(session, chat_id, messages, earlier),
            "drop_empty": bool(messages) and after is not None and previous is None,
        },
    )


@router.get("/chats/{chat_id}/messages/{message_id}")
def show_message_fragment(
    chat_id: int, message_id: int, request: Request, session: SessionDep
) -> HTMLResponse:
    """One message."""
    chat = service.get_chat(session, chat_id)
    return _render_message(request, session, chat, service.get_message(session, chat_id, message_id))


@router.get("/chats/{chat_id}/messages/{message_id}/edit")
def edit_message_fragment(
    chat_id: int, message_id: int, request: Request, session: SessionDep
) -> HTMLResponse:
    """The inline editor for a message."""
    chat = service.get_chat(session, chat_id)
    return render(
        request, "chats/_edit.html", {"chat": chat, "m": service.get_message(session, chat_id, message_id)}
    )


@router.post("/chats/{chat_id}/messages/{message_id}/edit")
def edit_message_page(
    chat_id: int, message_id: int, request: Request, form: FormDep, session: SessionDep, services: ServicesDep
) -> HTMLResponse:
    """Save an edited message."""
    msg = service.edit_message(session, chat_id, message_id, forms.text(form, "content"))
    messages_changed(session, services, chat_id)
    return _render_message(request, session, service.get_chat(session, chat_id), msg)


@router.post("/chats/{chat_id}/messages/{message_id}/swipe")
def swipe_message_page(
    chat_id: int, message_id: int, to: int, request: Request, session: SessionDep, services: ServicesDep
) -> Response:
    """Show another version of a message (the page asks for a new version through the API)."""
    chat = service.get_chat(session, chat_id)
    msg = service.select_swipe(session, chat_id, message_id, max(0, to))
    messages_changed(session, services, chat_id)
    return _render_message(request, session, chat, msg)


@router.get("/chats/{chat_id}/messages/{message_id}/audience")
def message_audience_form(
    chat_id: int, message_id: int, request: Request, session: SessionDep
) -> HTMLResponse:
    """Who sees this message: the form under the message, in a group chat."""
    chat = service.get_chat(session, chat_id)
    msg = service.get_message(session, chat_id, message_id)
    members = service.chat_characters(session, chat_id)
    starts = turn_taking.member_starts(session, chat_id)
    return render(
        request, "chats/_audience.html", {"chat": chat, "m": msg, "members": members, "starts": starts}
    )


@router.post("/chats/{chat_id}/messages/{message_id}/audience")
def save_message_audience(
    chat_id: int, message_id: int, request: Request, form: FormDep, session: SessionDep, services: ServicesDep
) -> HTMLResponse:
    """Save who sees the message (hidden from these characters, whispered to that one); the message
    is shown again with its marks."""
    chat = service.get_chat(session, chat_id)
    try:
        hidden_for = [int(v) for v in form.getlist("hidden_for")]
        whisper = forms.optional_number(form, "whisper_to", int)
        start_here = {int(v) for v in form.getlist("start_here")}
    except ValueError as err:
        raise UserError("Pick the characters from the list.") from err
    msg = service.set_audience(session, chat_id, message_id, hidden_for=hidden_for, whisper_to=whisper)
    # New starts: checked members begin here; one unchecked whose start was here begins at the start.
    # A Game chat's form has none (the manual: no knowledge starts in Game Mode).
    if forms.checkbox(form, "starts_shown"):
        starts = turn_taking.member_starts(session, chat_id)
        for member in service.chat_characters(session, chat_id):
            if member.id in start_here:
                turn_taking.set_start(session, chat_id, member.id, message_id)
            elif starts.get(member.id) == message_id:
                turn_taking.set_start(session, chat_id, member.id, None)
    messages_changed(session, services, chat_id)
    return _render_message(request, session, chat, msg)


@router.post("/chats/{chat_id}/messages/{message_id}/{action}")
def message_action_page(
    chat_id: int, message_id: int, action: str, request: Request, session: SessionDep, services: ServicesDep
) -> Response:
    """hide, unhide, delete, branch."""
    chat = service.get_chat(session, chat_id)
    if action in {"hide", "unhide"}:
        msg = service.set_hidden(session, chat_id, message_id, action == "hide")
        messages_changed(session, services, chat_id)
        return _render_message(request, session, chat, msg)
    if action == "delete":
        last = service.delete_message_from_page(session, chat_id, message_id)
        messages_changed(session, services, chat_id)
        if last is None:
            return HTMLResponse("")
        # The message now last gets its "new version" arrow and Regenerate: sent out of band, while
        # the deleted one's place gets the empty rest of the answer.
        return render(
            request,
            "chats/_message.html",
            {**_message_ctx(session, request, chat, [last]), "m": last, "oob": True},
        )
    if action == "branch":
        branch = service.branch_chat(session, chat_id, message_id)
        services.sources.chat_branched(session, chat, branch)
        chat_added(session, services, branch.id)
        return Response(status_code=204, headers={"HX-Redirect": f"/chats/{branch.id}"})
    raise UserError(f"Unknown message action “{action}”.")


@router.get("/chats/{chat_id}/attachments/{attachment_id}")
def download_attachment(
    chat_id: int, attachment_id: int, session: SessionDep, settings: SettingsDep
) -> Response:
    """A file attached in the chat, as a download (text always as text/plain: never shown as a page)."""
    attachment = attachments.get_attachment(session, chat_id, attachment_id)
    path = attachments.file_path(settings.data_dir, attachment)
    if not path.is_file():
        raise NotFound("This file is no longer on disk.")
    media = "application/pdf" if attachment.kind == "pdf" else "text/plain; charset=utf-8"
    return FileResponse(
        path,
        media_type=media,
        headers={
            "Content-Disposition": content_disposition(attachment.name, fallback="attachment"),
            "X-Content-Type-Options": "nosniff",
        },
    )


def _settings_ctx(session: Session, chat: Chat, services, **extra) -> dict:
    connections = list_connections(session)
    chosen = service.chat_connection(session, chat)
    return {
        "chat": chat,
        "s": service.chat_settings(chat),
        "connections": connections,
        "conn": chosen,
        "default_connection": default_connection(session),
        "personas": list_personas(session),
        "default_persona": default_persona(session),
        "characters": service.chat_characters(session, chat.id),
        "members": (members := turn_taking.group_members(session, chat.id)),
        "narrator_is_sugos": any(is_sugos_narrator(m.character) for m in members),
        # Each prompt source's part of the form (Memory Recall, Lorebooks, context note, time).
        "sections": services.sources.settings_sections(session, chat, services),
        "presets": presets.list_presets(session),
        "chat_preset": presets.chat_preset(session, service.chat_settings(chat)),
        "picks": service.chat_settings(chat).preset_picks,
        **backdrop.background_ctx(session, chat),
        **extra,
    }


@router.get("/chats/{chat_id}/settings")
def chat_settings_page(
    chat_id: int, request: Request, session: SessionDep, services: ServicesDep, hx: HxRequest
) -> HTMLResponse:
    """Chat Settings (a side panel in the chat; a page on its own)."""
    chat = service.get_chat(session, chat_id)
    block = "settings_panel" if hx else None
    return render(request, "chats/settings.html", _settings_ctx(session, chat, services), block=block)


def _chat_settings_form(form, session: Session, chat: Chat, services) -> ChatSettings:
    """ChatSettings from the submitted form: the chat's own fields here, each prompt source's from
    its section. A blank field is left out, so the model's default applies."""
    values = {
        "temperature": forms.optional_number(form, "temperature"),
        "top_p": forms.optional_number(form, "top_p"),
        "max_tokens": forms.optional_number(form, "max_tokens", int),
        "context_size": forms.optional_number(form, "context_size", int),
        "stop": forms.lines(form, "stop") or None,
        "recent_message_limit": forms.optional_number(form, "recent_message_limit", int),
        "reply_order": forms.text(form, "reply_order") or None,
        **_preset_form(form, session),
        # The group's section is shown to groups only: a chat of one keeps what it had.
        **_group_settings_form(form, service.chat_settings(chat)),
        **services.sources.read_settings_form(session, chat, form),
        # A form without the Background section (a script's, an older page's) keeps the chat's choice.
        "background": forms.text(form, "background", service.chat_settings(chat).background),
    }
    return forms.parse(ChatSettings, **values)


def _preset_form(form, session: Session) -> dict:
    """The chat's preset and its picks of that preset's choices (no pick: the first option)."""
    preset_id = forms.optional_number(form, "preset_id", int)
    chosen = presets.chat_preset(session, ChatSettings(preset_id=preset_id)) if preset_id else None
    picks = {
        c.variable: [str(v) for v in form.getlist(f"pick_{c.variable}")]
        for c in (chosen.choices if chosen else ())
    }
    return {"preset_id": preset_id, "preset_picks": {k: v for k, v in picks.items() if v}}


@router.get("/chats/{chat_id}/settings/preset-choices")
def preset_choices_fragment(
    chat_id: int, request: Request, session: SessionDep, preset_id: str = ""
) -> HTMLResponse:
    """The picks for the preset just chosen in Chat Settings (not saved until the form is)."""
    settings = service.chat_settings(service.get_chat(session, chat_id))
    chosen = (
        presets.chat_preset(session, ChatSettings(preset_id=int(preset_id))) if preset_id.isdigit() else None
    )
    picks = settings.preset_picks if chosen is not None and settings.preset_id == int(preset_id) else {}
    return render(request, "presets/_chat_choices.html", {"chat_preset": chosen, "picks": picks})


_GROUP_FIELDS = (
    "allow_self_responses",
    "narrator_id",
    "group_cards",
    "group_join_prefix",
    "group_join_suffix",
    "group_scenario",
    "auto_mode_seconds",
    "group_merged",
)


def standalone_asked(form) -> bool:
    """The group section's narrator choice is Sugo's own narrator, not one of the characters."""
    return forms.checkbox(form, "group_shown") and forms.text(form, "narrator_id") == "standalone"


def _group_settings_form(form, current: ChatSettings) -> dict:
    """The group section's fields; a chat of one (the section not shown) keeps what it had."""
    if not forms.checkbox(form, "group_shown"):
        return {name: getattr(current, name) for name in _GROUP_FIELDS}
    return {
        "allow_self_responses": forms.checkbox(form, "allow_self_responses"),
        # "standalone": Sugo's narrator card joins and takes the place once saved (app/chats/narrator.py).
        "narrator_id": None if standalone_asked(form) else forms.optional_number(form, "narrator_id", int),
        "group_cards": forms.text(form, "group_cards") or None,
        "group_join_prefix": forms.text(form, "group_join_prefix"),
        "group_join_suffix": forms.text(form, "group_join_suffix"),
        "group_scenario": forms.text(form, "group_scenario"),
        "auto_mode_seconds": forms.optional_number(form, "auto_mode_seconds", int) or 0,
        "group_merged": forms.checkbox(form, "group_merged"),
    }


@router.post("/chats/{chat_id}/settings")
def save_chat_settings_page(
    chat_id: int, request: Request, form: FormDep, session: SessionDep, services: ServicesDep
) -> HTMLResponse:
    """Save Chat Settings and show the panel again."""
    settings = _chat_settings_form(form, session, service.get_chat(session, chat_id), services)
    service.rename_chat(session, chat_id, forms.text(form, "name"))
    if forms.checkbox(form, "group_shown"):
        muted = set(form.getlist("muted"))
        for member in turn_taking.group_members(session, chat_id):
            turn_taking.set_muted(session, chat_id, member.character.id, str(member.character.id) in muted)
    chat = service.update_chat_options(
        session,
        chat_id,
        settings=settings,
        connection_id=forms.optional_number(form, "connection_id", int),
        persona_id=forms.optional_number(form, "persona_id", int),
        mode=forms.text(form, "mode") or None,
    )
    if standalone_asked(form):
        add_standalone_narrator(session, chat)
    settings_saved(session, services, chat_id)
    # The chat's backdrop comes along out of band: a new background shows without a reload.
    return render_blocks(
        request,
        "chats/settings.html",
        _settings_ctx(session, chat, services, saved=True),
        ["settings_panel"],
        oob=["chat_backdrop"],
        headers={"HX-Trigger": "sugo:settings-saved"},
    )


@router.get("/chats/{chat_id}/prompt")
def peek_prompt_page(
    chat_id: int,
    request: Request,
    session: SessionDep,
    services: ServicesDep,
    hx: HxRequest,
    speaker_id: str | None = None,
) -> HTMLResponse:
    """Peek Prompt: the blocks of the next prompt with token counts, and the messages as sent; in a
    group, as the member picked sees it (what is hidden from it or whispered to another left out)."""
    chat = service.get_chat(session, chat_id)
    members = service.chat_characters(session, chat_id)
    asked = parse_row_id(speaker_id) if speaker_id else None
    speaker = service.next_speaker(session, chat, members, asked) if asked is not None else None
    prompt, _ = build_chat_prompt(session, chat, services=services, speaker=speaker, characters=members)
    block = "prompt_body" if hx else None
    return render(
        request,
        "chats/prompt.html",
        {
            "chat": chat,
            "prompt": prompt,
            "group_labels": GROUP_LABELS,
            "counts": message_counts(prompt),
            "source_ms": prompt.source_ms if services.settings.debug_timings else (),
            "messages_json": json.dumps(list(prompt.messages), indent=2, ensure_ascii=False),
            "tools_json": json.dumps(list(prompt.tools), indent=2, ensure_ascii=False),
            "members": members,
            "speaker_id": speaker.id if speaker else None,
        },
        block=block,
    )


@router.post("/chats/{chat_id}/refresh")
def add_refresh_mark_page(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """/refresh: cut the recent messages here (the mark can be deleted to undo)."""
    chat = service.get_chat(session, chat_id)
    mark = service.add_refresh_mark(session, chat)
    return _render_message(request, session, chat, mark)


@router.get("/chats/{chat_id}/context")
def context_grid_page(
    chat_id: int, request: Request, session: SessionDep, services: ServicesDep, hx: HxRequest
) -> HTMLResponse:
    """The context grid: what fills the model's context, the size table, the cost of a reply."""
    chat = service.get_chat(session, chat_id)
    block = "context_body" if hx else None
    report = context_report(session, chat, services=services)
    return render(request, "chats/context.html", {"chat": chat, "report": report}, block=block)


@router.get("/help/forgetting")
def forgetting_help_page(request: Request) -> HTMLResponse:
    """Why does it forget? The usual causes and what to do."""
    return render(request, "help_forgetting.html")


@router.post("/chats/{chat_id}/delete")
def delete_chat_page(chat_id: int, session: SessionDep, services: ServicesDep) -> Response:
    """Delete a chat."""
    service.delete_chat(session, chat_id)
    chat_deleted(session, services, chat_id)
    return Response(status_code=204, headers={"HX-Redirect": "/"})

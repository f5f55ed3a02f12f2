"""Gather the plain snapshot the builder needs from the database and the prompt sources, then
build."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlmodel import Session

from app.characters.models import Character
from app.chats import service as chats
from app.chats.core.audience import Viewer
from app.chats.history import history_window
from app.chats.models import Chat
from app.chats.settings import ChatSettings
from app.chats.turn_taking import group_members, member_starts
from app.connections.core.chat_as_text import templates
from app.connections.core.presets import allows_prefill
from app.connections.core.template_files import TemplateError
from app.connections.models import Connection
from app.connections.providers.base import GenerationParams
from app.personas.models import Persona
from app.platform.core.errors import UserError
from app.platform.services import Services
from app.presets.core.model import Parameters, Preset, chosen_values
from app.presets.service import chat_preset
from app.prompt.core.blocks import Prompt
from app.prompt.core.builder import CardSnapshot, DepthNote, GroupCards, PromptContext, Purpose, build
from app.prompt.core.macros import MacroContext, generation_seed
from app.prompt.core.text_prompt import TextTemplates
from app.prompt.sources import Turn

# With no connection yet, Peek Prompt still works with these sizes.
FALLBACK_CONTEXT_SIZE = 8192
FALLBACK_MAX_TOKENS = 512


@dataclass(frozen=True)
class Effective:
    connection: Connection | None
    params: GenerationParams
    context_size: int


def effective_params(chat: Chat, connection: Connection | None, preset: Preset | None = None) -> Effective:
    """The reply's parameters: the chat's own settings, else the preset's, else the connection's."""
    s = chats.chat_settings(chat)
    p = preset.parameters if preset is not None else Parameters()

    def first(*values):
        return next((v for v in values if v is not None), None)

    max_tokens = first(
        s.max_tokens, p.max_tokens, connection.max_tokens if connection else FALLBACK_MAX_TOKENS
    )
    context_size = first(
        s.context_size, p.context_size, connection.context_size if connection else FALLBACK_CONTEXT_SIZE
    )
    stop = s.stop if s.stop is not None else list(connection.stop if connection else [])
    params = GenerationParams(
        temperature=first(s.temperature, p.temperature, connection.temperature if connection else None),
        top_p=first(s.top_p, p.top_p, connection.top_p if connection else None),
        max_tokens=max_tokens,
        stop=tuple(stop),
        top_k=first(p.top_k, connection.top_k if connection else None),
        min_p=first(p.min_p, connection.min_p if connection else None),
        repetition_penalty=first(p.repetition_penalty, connection.repetition_penalty if connection else None),
        frequency_penalty=p.frequency_penalty,
        presence_penalty=p.presence_penalty,
    )
    return Effective(connection, params, context_size)


def _text_templates(connection: Connection | None) -> TextTemplates | None:
    """A text-completion connection's templates, for the raw prompt (None for a chat connection)."""
    if connection is None or connection.kind != "text":
        return None
    try:
        context, instruct = templates(connection.instruct_template, connection.context_template)
    except TemplateError as err:
        raise UserError(f"The connection {connection.name}'s template cannot be used: {err}") from err
    return TextTemplates(context, instruct)


def card_snapshot(char: Character) -> CardSnapshot:
    return CardSnapshot(
        id=char.id,
        name=char.name,
        description=char.description,
        personality=char.personality,
        scenario=char.scenario,
        mes_example=char.mes_example,
        system_prompt=char.system_prompt,
        post_history_instructions=char.post_history_instructions,
    )


def group_viewer(
    characters: list[Character],
    speaker: Character,
    settings: ChatSettings,
    starts: dict[int, int] | None = None,
    mode: str = "roleplay",
) -> Viewer | None:
    """Whose eyes a group's prompt sees through: the speaker's, with the chat's narrator (when it is
    still a member; a Game chat's Game Master) seeing everything, from the speaker's own new start on (`starts`). None for a chat
    of one: every message is its."""
    if len(characters) < 2:
        return None
    narrator = settings.narrator_in(mode, [c.id for c in characters])
    if settings.group_merged:  # one reply speaks for everyone: what at least one member saw
        return Viewer(None, narrator, party=tuple(c.id for c in characters if c.id is not None))
    return Viewer(speaker.id, narrator, start_id=(starts or {}).get(speaker.id or 0))


def prompt_cards(
    session: Session, chat_id: int, characters: list[Character], speaker: Character, settings: ChatSettings
) -> list[Character]:
    """The cards a group's prompt holds: every member's (join), the unmuted members' and the speaker's
    (join_unmuted), or the speaker's alone (swap)."""
    if len(characters) < 2 or settings.group_cards == "join":
        return characters
    if settings.group_cards == "swap":
        return [speaker]
    muted = {m.character.id for m in group_members(session, chat_id) if m.muted}
    return [c for c in characters if c.id not in muted or c.id == speaker.id]


_UNSET = object()
PREFILL_REFUSED = "OpenAI's API does not go on from the start of a reply: the prefill was left out."
REFRESH_NOTE = "A refresh mark cuts the conversation: nothing above it is sent. Delete the mark to undo."


def build_chat_prompt(
    session: Session,
    chat: Chat,
    *,
    services: Services,
    speaker: Character | None = None,
    before_id: int | None = None,
    characters: list[Character] | None = None,
    persona: Persona | None | object = _UNSET,
    seed: int | None = None,
    for_reply: bool = False,
    purpose: Purpose = "reply",
    excluded_tools: frozenset[str] = frozenset(),
    system_line: str | None = None,
    start_with: str | None = None,
) -> tuple[Prompt, Effective]:
    """The prompt for the next reply in `chat` (or for regenerating the message `before_id`): the
    chat's card and history, plus what every registered prompt source contributes, in order.
    Callers that already loaded the chat's characters and persona pass them in (the reply path
    counts milliseconds). `for_reply` keeps what the turn leaves (macro variables, the lorebook
    scan) in the session, to be committed with the reply. `purpose` asks for Continue's or
    Impersonate's instruction at the end. `system_line` (a reminder come due) goes after the newest
    message."""
    characters = characters if characters is not None else chats.chat_characters(session, chat.id)
    if not characters:
        raise UserError("This chat has no characters.")
    settings = chats.chat_settings(chat)
    if speaker is None and chat.mode == "game":  # the Game Master answers in a Game chat
        gm = settings.narrator_in(chat.mode, [c.id for c in characters])
        speaker = next(c for c in characters if c.id == gm)
    speaker = speaker or characters[chat.next_speaker % len(characters)]
    if persona is _UNSET:
        persona = chats.chat_persona(session, chat)
    preset = chat_preset(session, settings)
    effective = effective_params(chat, chats.chat_connection(session, chat), preset)
    timings: dict[str, float] = {}
    limit = (
        services.sources.history_limit(session, chat, settings, timings=timings)
        or settings.recent_message_limit
    )
    viewer = group_viewer(
        characters,
        speaker,
        settings,
        # A Game has no knowledge starts (the manual): the Game Master and the party read it all.
        member_starts(session, chat.id) if len(characters) > 1 and chat.mode != "game" else None,
        chat.mode,
    )
    history = history_window(session, chat.id, before_id=before_id, limit=limit, viewer=viewer)
    user_name = persona.name if persona else chats.FALLBACK_USER_NAME
    seed = seed if seed is not None else generation_seed(chat.id, before_id, 0)
    # One set of variables for the sources and the prompt; kept only after a real reply.
    variables = dict(chat.variables or {})
    turn = Turn(
        session=session,
        services=services,
        chat=chat,
        settings=settings,
        characters=characters,
        speaker=speaker,
        persona=persona,
        user_name=user_name,
        history=history,
        before_id=before_id,
        context_size=effective.context_size,
        seed=seed,
        variables=variables,
        for_reply=for_reply,
        timings=timings,
        connection=effective.connection,
        purpose=purpose,
        excluded_tools=excluded_tools,
        viewer=viewer,
    )
    gathered = services.sources.gather(turn)
    prefill = start_with or (preset.prefill if preset else "")
    prefill_notes: tuple[str, ...] = ()
    if (
        prefill.strip()
        and effective.connection
        and not allows_prefill(effective.connection.kind, effective.connection.base_url)
    ):
        prefill, prefill_notes = "", (PREFILL_REFUSED,)
    ctx = PromptContext(
        mode=chat.mode,
        characters=tuple(
            card_snapshot(c) for c in prompt_cards(session, chat.id, characters, speaker, settings)
        ),
        speaker=card_snapshot(speaker),
        group=GroupCards(
            settings.group_join_prefix,
            settings.group_join_suffix,
            settings.group_scenario,
            tuple(c.name for c in characters) if settings.group_merged else (),
        )
        if len(characters) > 1
        else None,
        user_name=user_name,
        persona_description=persona.description if persona else "",
        messages=tuple(history.messages),
        hidden_elsewhere=history.hidden,
        window=history.plan,
        depth_notes=gathered.depth_notes
        + (
            (DepthNote(system_line, 0, "system", kind="tool_reminders", label="Reminder"),)
            if system_line
            else ()
        ),
        fixed=gathered.fixed,
        dynamic=gathered.dynamic,
        macros=MacroContext(
            variables=variables, pick_seed=f"chat:{chat.id}", random_seed=seed, tools=turn.tool_view
        ),
        extra_notes=((REFRESH_NOTE,) if history.refreshed else ()) + gathered.notes + prefill_notes,
        extra_warnings=gathered.warnings,
        receipt=gathered.receipt,
        left_out=gathered.left_out,
        context_size=effective.context_size,
        reply_reserve=effective.params.max_tokens or FALLBACK_MAX_TOKENS,
        recent_limit=settings.recent_message_limit,
        purpose=purpose,
        tools=turn.tool_declarations,
        preset=preset,
        prefill=prefill,
        text_templates=_text_templates(effective.connection),
        preset_values=chosen_values(preset.choices, settings.preset_picks) if preset else {},
        game_master=chat.mode == "game"
        and speaker.id == settings.narrator_in(chat.mode, [c.id for c in characters]),
    )
    prompt = replace(build(ctx), source_ms=gathered.timings, tools_missing=tuple(turn.tools_missing.items()))
    if for_reply and variables != (chat.variables or {}):
        chat.variables = variables
        session.add(chat)
    return prompt, effective

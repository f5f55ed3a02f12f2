"""Stream a reply end to end.

The user's message is committed before the provider is called. The reply is written by a task
that belongs to the server, not to the browser's connection: a phone that locks its screen
mid-reply finds the finished reply when it comes back. The browser subscribes to the task's
events over SSE; Stop sets the task's stop flag. What arrived before an error or a stop is kept,
and the message is marked with the cause. With several servers on one database, a page served by
another server follows the reply through the stored version (app/generation/following.py), and its
Stop reaches this one through the reply's claim.

A new reply in a Roleplay chat with Advanced Memory on is split at its scene breaks once it has ended
normally (app/memory/scenes/split.py); a stopped or broken one stays one message. The `done` event
lists the messages holding the reply (`message_ids`).

Continue appends to the reply shown (the same message and version); Impersonate streams the user's
next message to the page and stores nothing.

The model's reasoning (`<think>` blocks, the providers' reasoning fields) is split from the text as it
arrives and kept apart in the version; a reply that says nothing is stored as failed
(app/generation/reasoning.py).

Decision: Continue sends SillyTavern's nudge as a last system message for every provider, Anthropic
included (it arrives there as a "[System note]" user turn), rather than the reply as an assistant
prefill: newer Claude models and extended thinking refuse prefills, and Peek Prompt shows one
prompt for all connections."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from app.characters.models import Character
from app.chats import service as chats
from app.chats.core.limits import message_too_long
from app.chats.models import Chat, Message
from app.chats.turn_taking import choose_speakers
from app.connections.core.answers import Piece
from app.connections.core.chat_as_text import RAW_ROLE
from app.connections.providers.base import GenerationParams, ProviderConfig, ProviderError, Usage
from app.connections.service import provider_config
from app.generation.reasoning import REASONING_FIELDS, ReplyReading, thought_label
from app.generation.smart_order import pick_speaker
from app.generation.tool_loop import CAP_NOTE, RoundHooks, ToolRounds, stream_with_tools
from app.generation.writer import Draft, ReplyWriter
from app.memory.scenes.split import split_stored_reply, splits_replies
from app.personas.models import Persona
from app.platform.claims import REPLIES, ClaimTable
from app.platform.core.errors import UserError
from app.platform.services import Services
from app.platform.timeutil import utcnow
from app.prompt.core.blocks import Prompt
from app.prompt.core.builder import Purpose
from app.prompt.core.macros import generation_seed
from app.prompt.service import build_chat_prompt
from app.tools.builtin.tasks import TASK_TOOL_NAMES
from app.tools.registry import Tool, ToolContext
from app.tools.service import declared_runners
from app.tools.settings import DEFAULT_ROUND_CAP, load_tool_settings

log = logging.getLogger(__name__)

Action = Literal["send", "regenerate", "swipe", "continue", "impersonate"]
# What the user reads when something inside Sugo failed; the details (SQL, a stack) go to the log.
INTERNAL_PROMPT_ERROR = (
    "The prompt could not be built because of an internal error; the server log has the details."
)
INTERNAL_REPLY_ERROR = "The reply stopped because of an internal error; the server log has the details."
# A stopped reply's error: a page following it from another server reads it as `stopped`.
STOPPED = "Stopped before the reply was finished."


@dataclass
class Generation:
    chat_id: int
    message_id: int | None  # None for Impersonate: its text is never stored
    swipe_index: int
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    events: list[tuple[str, dict]] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    finished: bool = False
    task: asyncio.Task | None = None


class Generations:
    """The replies being written right now, one per chat: those of this server in memory (their
    streams), and for every server a claim of kind "replies" in the database, so two servers never
    write two replies in one chat and Stop reaches the server that writes it."""

    def __init__(self, claims: ClaimTable, engine: Engine | None = None) -> None:
        self._claims = claims
        # The app's engine, for the messages (the claims keep a pool of their own: app/main.py).
        self.engine = engine if engine is not None else claims.engine
        self._by_chat: dict[int, Generation] = {}
        # Chats whose turn is being stored (on a thread): a second send must not slip in meanwhile.
        self._starting: set[int] = set()

    @property
    def claims(self) -> ClaimTable:
        return self._claims

    def get(self, chat_id: int) -> Generation | None:
        return self._by_chat.get(chat_id)

    def reserve(self, chat_id: int) -> None:
        """This server's own check, on the event loop; `claim` (on a thread) then asks the database."""
        if chat_id in self._by_chat or chat_id in self._starting:
            raise UserError(ALREADY_WRITING)
        self._starting.add(chat_id)

    def claim(self, conn: Connection, chat_id: int) -> str:
        """The chat's reply claim across servers, in the transaction that stores the turn (a refused
        turn leaves no claim behind); its token. Called after `reserve`: no reply of this server is at
        work in the chat, so a claim of its own still in the table is a finished reply's whose
        give-back failed (the streams end after it: `start`)."""
        token = self._claims.take_in(conn, REPLIES, chat_id, over_own=True)
        if token is None:
            raise UserError(ALREADY_WRITING)
        return token

    def give_back(self, chat_id: int, token: str) -> None:
        self._claims.give_back(REPLIES, chat_id, token)

    def give_back_if_held(self, chat_id: int, token: str) -> None:
        """`give_back` when the claim is in the table (looked at first: a refused request writes nothing)."""
        if self._claims.holds(REPLIES, chat_id, token):
            self._claims.give_back(REPLIES, chat_id, token)

    def release(self, chat_id: int) -> None:
        self._starting.discard(chat_id)

    def add(self, gen: Generation) -> None:
        self._by_chat[gen.chat_id] = gen

    def remove(self, gen: Generation) -> None:
        if self._by_chat.get(gen.chat_id) is gen:
            del self._by_chat[gen.chat_id]

    def stop(self, chat_id: int) -> bool:
        """Stop this server's reply in the chat; False when it writes none (see `stop_anywhere`)."""
        gen = self._by_chat.get(chat_id)
        if gen is None:
            return False
        gen.stop.set()
        return True

    def stop_anywhere(self, chat_id: int) -> bool:
        """Stop the chat's reply on whichever server writes it (on a thread: a database write)."""
        return self.stop(chat_id) or self._claims.request_stop(REPLIES, chat_id)

    def stop_asked(self, chat_id: int, token: str) -> bool:
        return self._claims.stop_requested(REPLIES, chat_id, token)

    def writing(self, chat_id: int) -> bool:
        """Whether a reply is being written in the chat, here or on another server (on a thread when
        this server writes none: a database read)."""
        return chat_id in self._by_chat or self._claims.held_elsewhere(REPLIES, chat_id)

    def written_elsewhere(self, chat_id: int) -> str | None:
        """The claim token of the chat's reply when another server writes it (a database read)."""
        claim = self._claims.live_claim(REPLIES, chat_id)
        return claim[1] if claim is not None and claim[0] != self._claims.holder else None

    def finish_abandoned(self) -> int:
        """Mark the replies whose server died (no live claim any more) interrupted; how many."""
        with Session(self.engine) as session:
            count = chats.finish_interrupted_replies(session, writing=lambda: self._claims.chats(REPLIES))
            session.commit()
        return count

    async def shutdown(self) -> None:
        for gen in list(self._by_chat.values()):
            gen.stop.set()
            if gen.task:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(gen.task, timeout=5)


ALREADY_WRITING = "A reply is already being written in this chat. Stop it first."
# How often a reply being written looks whether Stop was asked on another server.
REMOTE_STOP_POLL_S = 1.0


async def _watch_remote_stop(registry: Generations, gen: Generation, token: str) -> None:
    """Set the reply's Stop when another server asked for it (its claim row says so)."""
    while not gen.stop.is_set():
        await asyncio.sleep(REMOTE_STOP_POLL_S)
        try:
            if await run_in_threadpool(registry.stop_asked, gen.chat_id, token):
                gen.stop.set()
        except Exception:  # a busy database: the next look tries again
            log.warning("could not read whether Stop was asked for chat %s", gen.chat_id, exc_info=True)


async def _publish(gen: Generation, event: str, data: dict) -> None:
    async with gen.changed:
        gen.events.append((event, data))
        gen.changed.notify_all()


async def subscribe(gen: Generation) -> AsyncIterator[str]:
    """SSE for one browser: every event so far, then new ones until the reply is finished."""
    seen = 0
    while True:
        async with gen.changed:
            while seen >= len(gen.events) and not gen.finished:
                await gen.changed.wait()
            batch = gen.events[seen:]
            seen = len(gen.events)
            done = gen.finished and seen >= len(gen.events)
        for event, data in batch:
            yield f"event: {event}\ndata: {json.dumps(data)}\n\n"
        if done:
            return


@dataclass
class StoredTurn:
    """What is committed before anything else happens, and what was loaded to do it."""

    message_id: int | None  # None for Impersonate
    swipe_index: int
    swipe_id: str
    chat: Chat
    characters: list[Character]
    persona: Persona | None
    speaker: Character | None
    purpose: Purpose = "reply"
    # Continue: the text being extended, and its version's status and error before (what stays if
    # nothing arrives).
    kept: str = ""
    kept_state: tuple[str, str | None] = ("ok", None)
    kept_reasoning: dict = field(default_factory=dict)  # the version's reasoning fields before
    # A new reply (a send): with Advanced Memory on it is split at its scene breaks once it ends.
    new_reply: bool = False
    # A reminder's own turn (app/tools/tasks/firing.py): its system line, and the tools it leaves out.
    reminder: str | None = None
    excluded_tools: frozenset[str] = frozenset()
    # A group's send: the members who answer after this one, in order (app/chats/turn_taking.py).
    next_speakers: list[int] = field(default_factory=list)
    # A group in smart order: the helper picks who answers this text once the message is stored.
    smart_pick: str | None = None
    # The composer's "start with": the reply begins with it and the model goes on (a prefill).
    start_with: str | None = None

    @property
    def posted_only(self) -> bool:
        """A send nobody answers (manual order, every member muted): the user's message is all."""
        return self.message_id is None and self.purpose == "reply" and self.smart_pick is None


@dataclass
class PreparedReply:
    prompt: Prompt | None = None
    params: GenerationParams | None = None
    config: ProviderConfig | None = None
    kind: str | None = None
    problem: str | None = None  # why the reply cannot be asked for (no connection, unreadable key)
    runners: dict[str, Tool] = field(default_factory=dict)  # the declared tools, by name
    round_cap: int = DEFAULT_ROUND_CAP
    connection_id: int | None = None


def store_turn(
    session: Session,
    chat_id: int,
    *,
    action: Action,
    content: str | None = None,
    speaker_id: int | None = None,
    message_id: int | None = None,
    attachment_ids: Sequence[int] = (),
    quote: str | None = None,
    chat_refs: Sequence[Mapping[str, Any]] = (),
    rng: random.Random | None = None,
    one_speaker: bool = False,
    whisper_to: int | None = None,
) -> StoredTurn:
    """Store the user's message and the reply's placeholder, and commit: the user's words are safe
    on disk before the provider hears of them, and the page can show both at once.

    A send in a group is answered by the members the chat's turn-taking picks (`rng` rolls for it),
    the first now and the others after it (`next_speakers`); by nobody in manual order. `one_speaker`:
    one member answers whatever the order says (a reminder's turn)."""
    chat = chats.get_chat(session, chat_id)
    characters = chats.chat_characters(session, chat_id)
    persona = chats.chat_persona(session, chat)
    # The reply's writer finds its swipe by this id: an earlier swipe deleted meanwhile moves it.
    swipe_id = uuid.uuid4().hex
    if action == "impersonate":
        speaker = (
            chats.next_speaker(session, chat, characters, speaker_id) if speaker_id is not None else None
        )
        return StoredTurn(None, 0, swipe_id, chat, characters, persona, speaker, purpose="impersonate")
    if action == "continue":
        return _store_continue(session, chat, characters, persona, message_id=message_id, swipe_id=swipe_id)
    if action == "send":
        if (content and content.strip()) or attachment_ids:
            name = persona.name if persona else chats.FALLBACK_USER_NAME
            chats.add_user_message(
                session,
                chat,
                content or "",
                name=name,
                flush=False,
                attachment_ids=attachment_ids,
                quote=quote,
                chat_refs=chat_refs,
                whisper_to=whisper_to,
            )
        reminder = None
        # A whisper is answered by its recipient (nobody else heard it), unless a member is picked.
        order = _send_speakers(
            session,
            chat,
            characters,
            speaker_id if speaker_id is not None else whisper_to,
            content,
            rng or random.Random(),
            one_speaker=one_speaker,
        )
        if not order:
            chats.touch_chat(session, chat)
            session.flush()
            session.commit()
            smart = order is None  # the helper picks, after the commit (it may take seconds)
            return StoredTurn(
                None,
                0,
                swipe_id,
                chat,
                characters,
                persona,
                None,
                smart_pick=(content or "") if smart else None,
            )
        speaker = order[0]
        target = _placeholder(session, chat, speaker, swipe_id)
    else:
        target = (
            chats.get_message(session, chat_id, message_id)
            if message_id
            else chats.last_message(session, chat_id)
        )
        if target is None or target.role != "assistant":
            raise UserError("There is no reply to regenerate here; send a message instead.")
        if target.id != chats.last_message(session, chat_id).id:
            raise UserError("Only the last reply can get new versions; branch from here to rewrite history.")
        swipes = [dict(s) for s in target.swipes]
        swipes.append(chats.swipe_record("", status="streaming", id=swipe_id))
        target.swipes = swipes
        target.active_swipe = len(swipes) - 1
        target.content, target.status, target.error = "", "streaming", None
        target.tool_calls = None
        session.add(target)
        speaker = next((c for c in characters if c.id == target.character_id), None)
        # A reminder's reply gets its new versions for the same reminder, its task tools left out again.
        reminder = next((s["reminder"] for s in swipes if isinstance(s.get("reminder"), str)), None)
    session.flush()
    session.commit()
    return StoredTurn(
        target.id,
        target.active_swipe,
        swipe_id,
        chat,
        characters,
        persona,
        speaker,
        new_reply=action == "send",
        reminder=reminder,
        excluded_tools=TASK_TOOL_NAMES if reminder else frozenset(),
        next_speakers=[c.id for c in order[1:]] if action == "send" else [],
    )


def _send_speakers(
    session: Session,
    chat: Chat,
    characters: list[Character],
    speaker_id: int | None,
    content: str | None,
    rng: random.Random,
    *,
    one_speaker: bool,
) -> list[Character] | None:
    """Who answers a send: the member asked for, the one character of a chat, or the group's pick;
    None when the helper picks (smart order)."""
    if speaker_id is not None or len(characters) < 2:
        return [chats.next_speaker(session, chat, characters, speaker_id)]
    settings = chats.chat_settings(chat)
    if settings.group_merged:
        # One reply speaks for the group; the first member's card frames the prompt.
        return characters[:1]
    by_id = {c.id: c for c in characters}
    if chat.mode == "game":
        # The Game Master answers every message; a party member speaks when picked under the box.
        return [by_id[settings.narrator_in(chat.mode, list(by_id))]]
    if settings.reply_order == "smart" and not one_speaker:
        return None
    order = [by_id[i] for i in choose_speakers(session, chat, user_text=content, rng=rng)]
    if one_speaker:
        return order[:1] or characters[:1]
    return order


# Who a merged group reply is from: the whole group (its parts name their speakers).
MERGED_REPLY_NAME = "The group"


def _placeholder(session: Session, chat: Chat, speaker: Character, swipe_id: str) -> Message:
    """A new reply's message, marked streaming, in the session; a merged group's is the group's."""
    if chats.chat_settings(chat).group_merged:
        target = chats.new_message(chat.id, "assistant", MERGED_REPLY_NAME, [""])
    else:
        target = chats.new_message(chat.id, "assistant", speaker.name, [""], character_id=speaker.id)
    target.swipes = [chats.swipe_record("", status="streaming", id=swipe_id)]
    target.status = "streaming"
    session.add(target)
    chats.touch_chat(session, chat)
    return target


def store_next_reply(engine: Engine, turn: StoredTurn) -> StoredTurn | None:
    """The placeholder of the next member answering the same send, committed; None when nobody is left
    (a member removed from the chat meanwhile is passed by)."""
    with Session(engine, expire_on_commit=False) as session:
        chat = chats.get_chat(session, turn.chat.id)
        characters = chats.chat_characters(session, chat.id)
        by_id = {c.id: c for c in characters}
        waiting = [i for i in turn.next_speakers if i in by_id]
        if not waiting:
            return None
        swipe_id = uuid.uuid4().hex
        target = _placeholder(session, chat, by_id[waiting[0]], swipe_id)
        session.flush()
        session.commit()
        return StoredTurn(
            target.id,
            0,
            swipe_id,
            chat,
            characters,
            chats.chat_persona(session, chat),
            by_id[waiting[0]],
            new_reply=True,
            next_speakers=waiting[1:],
        )


def _store_continue(
    session: Session,
    chat: Chat,
    characters: list[Character],
    persona: Persona | None,
    *,
    message_id: int | None,
    swipe_id: str,
) -> StoredTurn:
    """Mark the reply shown as being extended, and commit: a reload follows it like a new reply."""
    last = chats.last_message(session, chat.id)
    target = chats.get_message(session, chat.id, message_id) if message_id else last
    if target is not None and last is not None and target.id != last.id:
        raise UserError("Continue extends the last reply only; branch from here to rewrite history.")
    if target is None or target.role != "assistant" or target.kind != "message":
        raise UserError("Continue extends the last reply, and this chat does not end on one.")
    if target.hidden:
        raise UserError("The last reply is hidden from the AI; show it to the AI again to continue it.")
    if not target.content.strip():
        raise UserError("The last reply is empty: regenerate it instead.")
    swipes = [dict(s) for s in target.swipes]
    shown = swipes[target.active_swipe]
    # Versions stored before versions had ids (or imported) get one: the writer finds its version by it.
    swipe_id = shown.setdefault("id", swipe_id)
    kept_state = (shown.get("status") or "ok", shown.get("error"))
    kept_reasoning = {k: shown[k] for k in REASONING_FIELDS if shown.get(k) is not None}
    shown["status"] = "streaming"
    target.swipes = swipes
    target.status = "streaming"
    session.add(target)
    session.flush()
    session.commit()
    speaker = next((c for c in characters if c.id == target.character_id), None)
    return StoredTurn(
        target.id,
        target.active_swipe,
        swipe_id,
        chat,
        characters,
        persona,
        speaker,
        purpose="continue",
        kept=target.content,
        kept_state=kept_state,
        kept_reasoning=kept_reasoning,
    )


def prepare_request(session: Session, turn: StoredTurn, *, services: Services) -> PreparedReply:
    """Build the prompt and the provider config for a stored turn. Never raises: the placeholder
    is committed and must end marked, never left "streaming"."""
    reply = PreparedReply()
    chat_id = turn.chat.id
    try:
        prompt, effective = build_chat_prompt(
            session,
            turn.chat,
            services=services,
            speaker=turn.speaker,
            # Continue reads the reply it extends; a new reply or version reads what came before it.
            before_id=turn.message_id if turn.purpose == "reply" else None,
            characters=turn.characters,
            persona=turn.persona,
            for_reply=turn.purpose != "impersonate",
            seed=generation_seed(turn.chat.id, turn.message_id, turn.swipe_index),
            purpose=turn.purpose,
            excluded_tools=turn.excluded_tools,
            system_line=turn.reminder,
            start_with=turn.start_with if turn.purpose == "reply" else None,
        )
        if prompt.tools:
            reply.runners = declared_runners(session, services, [t["name"] for t in prompt.tools])
            reply.round_cap = load_tool_settings(session).round_cap
        session.commit()  # what the sources keep (the lorebook scan) and the macro variables
    except UserError as err:
        session.rollback()
        reply.problem = f"The prompt could not be built: {err}"
        return reply
    except Exception:
        session.rollback()  # a failed flush leaves the session unusable until then
        # The error's text can hold SQL or paths: it goes to the log, the user gets a sentence.
        log.exception("building the prompt failed in chat %s", chat_id)
        reply.problem = INTERNAL_PROMPT_ERROR
        return reply
    reply.prompt, reply.params = prompt, effective.params
    if effective.connection is None:
        reply.problem = "No connection is set up yet. Add one under Connections."
        return reply
    try:
        reply.config = provider_config(
            effective.connection, services.keybox, timeout_s=services.settings.model_timeout_s
        )
    except ValueError as err:
        reply.problem = str(err)
        return reply
    reply.kind = effective.connection.kind
    reply.connection_id = effective.connection.id
    return reply


async def run_generation(gen: Generation, turn: StoredTurn, *, services: Services) -> bool:
    """Write the reply; True when it ended well (`done`), False when it was stopped, failed or said
    nothing."""
    ended_well = False
    writer: ReplyWriter | Draft
    if gen.message_id is None:
        writer = Draft()
    else:
        writer = ReplyWriter(
            services.engine,
            gen.chat_id,
            gen.message_id,
            turn.swipe_id,
            services.settings.stream_flush_interval_s,
            kept=turn.kept,
            kept_state=turn.kept_state if turn.purpose == "continue" else None,
            kept_reasoning=turn.kept_reasoning,
        )
    started = utcnow()
    usage: Usage | None = None
    model: str | None = None
    reading: ReplyReading | None = None
    try:
        # On a thread: building waits for the query's embedding (a remote server may take seconds,
        # up to its timeout), for SQLite, and scans lorebooks; meanwhile every other request
        # (another chat, /healthz) must still be answered. It starts at once: the `start` event is
        # queued already and goes out while the build waits for the embedding (waiting for it to be
        # sent first cost the first token ~5 ms, bench/prompt_build.py).
        reply = await run_in_threadpool(_prepare, turn, services)
        if reply.problem:
            raise ProviderError("connection", reply.problem)
        reading = ReplyReading()
        if isinstance(writer, ReplyWriter):
            writer.reading = reading
            if reply.prompt.prefill:  # the reply begins with its prefill, shown and stored like its text
                await _publish(gen, "token", {"text": await writer.append(reply.prompt.prefill)})
        rounds = await _stream_reply(gen, turn, reply, writer, reading, services)
        usage, model = rounds.usage, rounds.model
        await _show(gen, writer, reading, reading.finish())  # what was held for a tag that never closed
        extra = _swipe_meta(started, model, usage)
        if reply.prompt.receipt:
            extra["receipt"] = list(reply.prompt.receipt)
        if notice := _rounds_notice(rounds, reply.round_cap):
            extra["tool_notice"] = notice
        if turn.reminder:
            # Kept with the version: the page says what the reply was written for, and a new version
            # of it is asked with the same line (store_turn).
            extra["reminder"] = turn.reminder
        # A reply that only called tools said something by acting: not an empty reply.
        silence = None if gen.stop.is_set() or rounds.calls else reading.silence(writer.text)
        if gen.stop.is_set():
            status = "partial" if writer.text else "error"
            await writer.finish(status, error=STOPPED, **extra)
            await _publish(gen, "stopped", {"message_id": gen.message_id, "text_kept": bool(writer.text)})
        elif silence:
            # Nothing said: a failed version (a Continue leaves the reply as it was).
            writer.text = ""
            await writer.finish("error", error=silence[1], **extra)
            await _publish(
                gen, "error", {"message_id": gen.message_id, "kind": silence[0], "message": silence[1]}
            )
        else:
            await writer.finish("ok", **extra)
            done: dict = {"message_id": gen.message_id}
            if gen.message_id is not None:
                done["message_ids"] = [gen.message_id]  # the messages holding the reply, in order
                if turn.new_reply and splits_replies(turn.chat):
                    # One message per scene; the page adds the parts after the first.
                    done["message_ids"] = await _split(services, gen.message_id, turn.swipe_id)
            await _publish(gen, "done", done)
            ended_well = True
        # Background work after every reply (memories, summaries); the reply never waits for it.
        if turn.purpose != "impersonate" and not silence:
            services.sources.after_reply(services, gen.chat_id)
    except ProviderError as err:
        if reading is not None:
            await _show(gen, writer, reading, reading.finish())
        status = "partial" if writer.text else "error"
        await writer.finish(status, error=err.message, **_swipe_meta(started, model, usage))
        await _publish(gen, "error", {"message_id": gen.message_id, "kind": err.kind, "message": err.message})
    except asyncio.CancelledError:
        writer.write(
            "partial" if writer.text else "error", error="The server stopped before the reply was finished."
        )
        raise
    except Exception:  # keep the partial reply whatever went wrong
        log.exception("generation failed in chat %s", gen.chat_id)
        await writer.finish("partial" if writer.text else "error", error=INTERNAL_REPLY_ERROR)
        await _publish(
            gen, "error", {"message_id": gen.message_id, "kind": "internal", "message": INTERNAL_REPLY_ERROR}
        )
    finally:
        if turn.purpose == "continue" and writer.text:
            # A reply written before changed: what was built from its old text (memories) re-syncs.
            services.sources.messages_changed(services, gen.chat_id)
    return ended_well


async def run_turn(gen: Generation, turn: StoredTurn, *, services: Services) -> None:
    """The send's replies, one member after the other: the next starts when the one before ended well
    (a Stop, a failure or an empty reply ends the group's turn: the user decides what comes next). A
    send nobody answers ends at once, its message stored."""
    if turn.posted_only:
        await _publish(gen, "done", {"message_id": None, "message_ids": []})
        services.sources.after_reply(services, gen.chat_id)
        return
    if turn.smart_pick is not None:
        picked = await run_in_threadpool(pick_speaker, services, gen.chat_id, turn.smart_pick)
        chosen = await run_in_threadpool(
            store_next_reply, services.engine, replace(turn, next_speakers=[picked])
        )
        if chosen is None:  # nobody left in the group meanwhile
            await _publish(gen, "done", {"message_id": None, "message_ids": []})
            return
        turn = chosen
        gen.message_id, gen.swipe_index = turn.message_id, turn.swipe_index
        await _publish(gen, "start", {"message_id": turn.message_id, "swipe_index": 0, "action": "send"})
    while await run_generation(gen, turn, services=services) and turn.next_speakers and not gen.stop.is_set():
        following = await run_in_threadpool(store_next_reply, services.engine, turn)
        if following is None:
            return
        # Stop pressed while the placeholder was being stored: the reply still runs, sees the Stop at
        # once and ends marked, so no message is left "streaming".
        turn = following
        gen.message_id, gen.swipe_index = turn.message_id, turn.swipe_index
        await _publish(gen, "start", {"message_id": turn.message_id, "swipe_index": 0, "action": "send"})


async def _end_stream(gen: Generation) -> None:
    """The reply's streams end: the last event has been published and the chat is free."""
    async with gen.changed:
        gen.finished = True
        gen.changed.notify_all()


async def _stream_reply(
    gen: Generation,
    turn: StoredTurn,
    reply: PreparedReply,
    writer: ReplyWriter | Draft,
    reading: ReplyReading,
    services: Services,
) -> ToolRounds:
    """The reply streamed to the page, with its tool rounds when tools are declared."""

    async def on_event(event) -> None:
        await _show(gen, writer, reading, reading.feed(event.text, event.reasoning))

    async def on_call_started(call, index: int) -> None:
        await _publish(gen, "tool_call", {"message_id": gen.message_id, "id": call.id, "name": call.name})

    async def on_call_done(record: dict) -> None:
        if isinstance(writer, ReplyWriter):
            writer.tool_calls.append(record)
            await writer.tick(force=True)
        await _publish(gen, "tool_result", {"message_id": gen.message_id, **shown_call(record)})

    ctx = ToolContext(
        services=services,
        chat_id=turn.chat.id,
        character_id=turn.speaker.id if turn.speaker else None,
        persona_id=turn.persona.id if turn.persona else None,
        message_id=gen.message_id,
        now=services.clock.now(),
        excluded=turn.excluded_tools,
        declared=tuple(reply.runners),
        missing=dict(reply.prompt.tools_missing),
    )
    params = replace(reply.params, tools=reply.prompt.tools) if reply.prompt.tools else reply.params
    messages = list(reply.prompt.messages)
    if reply.prompt.raw is not None:  # a text-completion connection: the raw prompt as Peek Prompt shows it
        messages = [{"role": RAW_ROLE, "content": reply.prompt.raw.text, "stop": list(reply.prompt.raw.stop)}]
    return await stream_with_tools(
        services=services,
        config=reply.config,
        kind=reply.kind,
        messages=messages,
        params=params,
        runners=reply.runners,
        cap=reply.round_cap,
        ctx=ctx,
        connection_id=reply.connection_id,
        hooks=RoundHooks(on_event, on_call_started, on_call_done, lambda: writer.text, gen.stop),
    )


def shown_call(record: dict) -> dict:
    """What the page shows of a call while the reply streams (the whole record is rendered at the end)."""
    return {k: record.get(k) for k in ("id", "name", "label", "error", "ms", "notice")}


def _rounds_notice(rounds: ToolRounds, cap: int) -> str | None:
    parts = []
    if rounds.refused:
        parts.append(
            "The model refused tools, so it was asked again without them; this connection will not be "
            "offered tools again until its Tools field is set to On."
        )
    if rounds.cap_hit:
        parts.append(CAP_NOTE.format(cap=cap))
    return " ".join(parts) or None


async def _show(
    gen: Generation, writer: ReplyWriter | Draft, reading: ReplyReading, pieces: list[Piece]
) -> None:
    """Store and stream what a delta added: `token` for text, `reasoning` for reasoning, `rewrite` when
    the text so far turned out to be reasoning, `thought` once the reasoning has ended. Impersonate's
    reasoning goes nowhere."""
    for piece in pieces:
        if piece.kind == "text":
            await _publish(gen, "token", {"text": await writer.append(piece.text)})
            if (ms := reading.take_thought()) is not None and gen.message_id is not None:
                await _publish(gen, "thought", {"ms": ms, "label": thought_label(ms)})
        elif piece.kind == "moved":
            writer.text = ""
            await _publish(
                gen, "rewrite", {"text": "", "reasoning": "" if gen.message_id is None else reading.reasoning}
            )
        elif gen.message_id is not None:
            await _publish(gen, "reasoning", {"text": piece.text})
            await writer.tick()


async def _split(services: Services, message_id: int, swipe_id: str) -> list[int]:
    """The finished reply split at its scene breaks; a failure (SQLite stayed locked) keeps it whole:
    it is finished either way."""
    try:
        return await run_in_threadpool(split_stored_reply, services.engine, message_id, swipe_id)
    except Exception:
        log.exception(
            "splitting the reply in message %s at its scene breaks failed; it stays one message", message_id
        )
        return [message_id]


def _prepare(turn: StoredTurn, services: Services) -> PreparedReply:
    if turn.purpose == "reply" and turn.chat.id is not None:
        services.sources.before_reply(services, turn.chat.id)  # e.g. who sees the new messages
    with Session(services.engine, expire_on_commit=False) as session:
        return prepare_request(session, turn, services=services)


def _swipe_meta(started, model: str | None, usage: Usage | None) -> dict:
    meta: dict = {"gen_started": started.isoformat(), "gen_finished": utcnow().isoformat()}
    if model:
        meta["model"] = model
    if usage:
        meta["usage"] = {k: v for k, v in usage.__dict__.items() if v is not None}
    return meta


def _store(
    services: Services,
    chat_id: int,
    action: Action,
    content: str | None,
    speaker_id: int | None,
    message_id: int | None,
    attachment_ids: Sequence[int] = (),
    quote: str | None = None,
    chat_refs: Sequence[Mapping[str, Any]] = (),
    one_speaker: bool = False,
    whisper_to: int | None = None,
) -> tuple[StoredTurn, str]:
    """The turn stored, and the chat's reply claim taken in the same transaction."""
    token: str | None = None
    with Session(services.engine, expire_on_commit=False) as session:
        try:
            token = services.generations.claim(session.connection(), chat_id)
            if action == "send" and content and content.strip():
                # Work that needs only the new message (embedding it for Memory Recall) starts now,
                # beside storing it and sending the `start` event, not once the prompt is built.
                services.sources.expect(services, session, chats.get_chat(session, chat_id), content)
            turn = store_turn(
                session,
                chat_id,
                action=action,
                content=content,
                speaker_id=speaker_id,
                message_id=message_id,
                attachment_ids=attachment_ids,
                quote=quote,
                chat_refs=chat_refs,
                rng=services.turn_random,
                one_speaker=one_speaker,
                whisper_to=whisper_to,
            )
            return turn, token
        except Exception:
            session.rollback()
            # Refused before the turn's first commit, the claim went with the rollback; a failure after
            # it leaves the committed claim, given back here rather than left to go stale.
            if token is not None:
                services.generations.give_back_if_held(chat_id, token)
            raise


async def start(
    services: Services,
    *,
    chat_id: int,
    action: Action,
    content: str | None,
    speaker_id: int | None,
    message_id: int | None,
    attachment_ids: Sequence[int] = (),
    quote: str | None = None,
    chat_refs: Sequence[Mapping[str, Any]] = (),
    reminder: str | None = None,
    excluded_tools: frozenset[str] = frozenset(),
    whisper_to: int | None = None,
    start_with: str | None = None,
) -> Generation:
    """Store the turn (on a thread: SQLite may make it wait), then hand the rest to a task; the
    `start` event (the reply's id) is the first thing streamed, before the prompt is even built."""
    registry = services.generations
    if content and (problem := message_too_long(content)):
        raise UserError(problem)  # before its text is embedded by `expect`
    registry.reserve(chat_id)
    try:
        turn, token = await run_in_threadpool(
            _store,
            services,
            chat_id,
            action,
            content,
            speaker_id,
            message_id,
            attachment_ids,
            quote,
            chat_refs,
            reminder is not None,
            whisper_to,
        )
    finally:
        registry.release(chat_id)
    # Nothing between the turn's store and here can fail: the claim is the runner's to give back.
    if reminder:
        turn.reminder, turn.excluded_tools = reminder, excluded_tools
    turn.start_with = start_with or None
    gen = Generation(chat_id=chat_id, message_id=turn.message_id, swipe_index=turn.swipe_index)
    gen.events.append(
        ("start", {"message_id": turn.message_id, "swipe_index": turn.swipe_index, "action": action})
    )
    registry.add(gen)
    claim_token = token

    async def runner() -> None:
        watcher = asyncio.create_task(_watch_remote_stop(registry, gen, claim_token))
        try:
            # Background work that takes the CPU waits while the reply is written (app/platform/foreground.py).
            with services.foreground.reply():
                await run_turn(gen, turn, services=services)
        finally:
            watcher.cancel()
            registry.remove(gen)
            try:
                await run_in_threadpool(registry.give_back, chat_id, claim_token)
            except Exception:  # left to go stale (a minute); the next reply in the chat waits for that
                log.exception("giving back the reply claim of chat %s failed", chat_id)
            finally:
                # Only now do the streams end: a message sent the moment one ends, through whichever
                # server a proxy picks, finds the chat free.
                await _end_stream(gen)

    gen.task = asyncio.get_running_loop().create_task(runner())
    return gen

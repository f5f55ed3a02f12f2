"""Continuity, after a reply of a chat with Advanced Memory on (jobs.process_chat), never before one: the
archived messages (those before the current window's new start) that no Chat Summary entry covers get
entries written by the helper, and when the active entries pass 70% of the budget, "Updating
continuity" combines them into one of about half their size (continuity.py judges the answer). A failed
call keeps every entry as it was and says why (SceneState.continuity_reason); a set that failed is not
sent again until an entry, the helper or the Combine prompt changes.

Decisions (where the issue is silent):
- Archived messages are summarised with the chosen Summary Prompt (Summaries → templates), by the
  Advanced Memory helper, ARCHIVE_BATCHES_PER_RUN batches of up to 50 messages per reply at most, so a
  newly prepared 5,000-message chat catches up over a few replies rather than in one burst. They obey
  Review outputs like any model-written entry.
- An entry still covering a message of the current window is not combined (it waits until they leave),
  nor are entries held for review or with macros other than {{user}}/{{char}}.
- The combined entry is titled "Continuity", covers the range of the entries it replaces, and those
  are turned off (not deleted): the user can turn them on again.
"""

from __future__ import annotations

import logging

from sqlalchemy import text
from sqlmodel import Session, col, select

from app.chats.models import Chat
from app.chats.settings import read_settings
from app.connections.providers import complete_chat_blocking
from app.connections.providers.base import GenerationParams, ProviderConfig, ProviderError
from app.memory.scenes.core import continuity
from app.memory.scenes.core.recap import PRIVATE_PARTS
from app.memory.scenes.messages import helper_config, readable_messages
from app.memory.scenes.models import SceneState
from app.memory.summaries import generate
from app.memory.summaries.core.answers import ProseSummary
from app.memory.summaries.core.prompts import TranscriptLine, transcript
from app.memory.summaries.core.rules import EntryText, summary_block
from app.memory.summaries.models import SummaryEntry, SummaryJob
from app.memory.summaries.service import MAX_CONTENT, uncovered
from app.platform.core.errors import UserError
from app.platform.services import Services
from app.platform.timeutil import utcnow
from app.prompt.core.tokens import count_tokens

log = logging.getLogger(__name__)

ARCHIVE_BATCHES_PER_RUN = 2


def updating(services: Services, chat_id: int) -> bool:
    """Whether continuity is being updated for the chat now ("Updating continuity")."""
    return services.claims.continuity.held(chat_id)


def update_continuity(services: Services, chat_id: int) -> None:
    """Write entries for uncovered archived messages, then combine the entries when they pass 70%."""
    if not services.claims.continuity.claim(chat_id):
        return
    try:
        with Session(services.engine) as session:
            chat = session.get(Chat, chat_id)
            if chat is None or not read_settings(chat.settings).advanced_memory_on(chat.mode):
                return
            state = session.get(SceneState, chat_id)
            if state is None or state.paused:
                return
            try:
                config = helper_config(session, services, chat)
            except UserError as err:
                _note(services, chat_id, str(err))
                return
            helper = f"{config.kind}:{config.base_url}:{config.model}"
        if _archive(services, chat_id, config):
            _combine(services, chat_id, config, helper)
    finally:
        services.claims.continuity.release(chat_id)


def _note(services: Services, chat_id: int, reason: str, set_key: str | None = None) -> None:
    with Session(services.engine) as session:
        state = session.get(SceneState, chat_id) or SceneState(chat_id=chat_id)
        state.continuity_reason = reason
        if set_key is not None:
            state.continuity_key = set_key
        state.updated_at = utcnow()
        session.add(state)
        session.commit()


# The chat's messages from the window's start on, and all its messages' ids (their positions).
_TAIL_SQL = text(
    "SELECT count(*) FROM message WHERE chat_id = :chat_id AND kind = 'message' AND id >= :start"
)
_MESSAGE_IDS_SQL = text("SELECT id FROM message WHERE chat_id = :chat_id AND kind = 'message' ORDER BY id")


def _archive(services: Services, chat_id: int, config: ProviderConfig) -> bool:
    """Entries for the archived messages no entry covers; False when a call failed (reason noted)."""
    for _ in range(ARCHIVE_BATCHES_PER_RUN):
        with Session(services.engine) as session:
            state = session.get(SceneState, chat_id)
            if state is None or state.window_start_id is None:
                return True
            tail = int(
                session.connection()
                .execute(_TAIL_SQL, {"chat_id": chat_id, "start": state.window_start_id})
                .scalar_one()
            )
            entries = list(session.exec(select(SummaryEntry).where(SummaryEntry.chat_id == chat_id)))
            gap = uncovered(session, chat_id, entries, tail=tail)
            if gap.next_positions is None:
                return True
            ids = list(session.connection().execute(_MESSAGE_IDS_SQL, {"chat_id": chat_id}).scalars())
            first, last = gap.next_positions
            job = SummaryJob(
                chat_id=chat_id,
                scope="range",
                start=first,
                end=last,
                first_message_id=ids[first - 1],
                last_message_id=ids[last - 1],
                first_position=first,
                last_position=last,
            )
            chat = session.get(Chat, chat_id)
            try:
                request = generate.summary_request(
                    session, job, read_settings(chat.settings).summary_max_tokens
                )
            except (
                UserError
            ):  # every message of the stretch is hidden or empty: nothing to say, nothing to ask
                return True
            request = _with_private_parts(session, chat_id, job, request)
        result = generate.ask(config, request)
        if not isinstance(result, ProseSummary):
            _note(
                services, chat_id, f"A continuity summary of messages {first}–{last} failed: {result.reason}"
            )
            return False
        with Session(services.engine) as session:
            written = generate.write_model_entry(
                session,
                chat_id,
                result.text,
                first_id=job.first_message_id,
                last_id=job.last_message_id,
                first_position=first,
                last_position=last,
            )
            if isinstance(written, str):
                session.rollback()
                _note(services, chat_id, written)
                return False
            session.commit()
        log.info(
            "Advanced Memory wrote a continuity summary of messages %s–%s in chat %s", first, last, chat_id
        )
    return True


def _with_private_parts(
    session: Session, chat_id: int, job: SummaryJob, request: generate.Request
) -> generate.Request:
    """In a group whose archived stretch holds messages some members did not see, the request as a
    recap's is (the manual: the Chat Summary entries follow the same per-character rules): each such
    message marked ("[hidden from Bram]", "[whispered to Aria]"), and the helper told to put what only
    some know inside {{#if character == "Name"}} sections, which each member's prompt then reads for
    itself (app/memory/scenes/prompt.py). Otherwise the request as it was."""
    lines = [
        m for m in readable_messages(session, chat_id) if job.first_message_id <= m.id <= job.last_message_id
    ]
    if not any(m.seen_by for m in lines):
        return request
    text = transcript(
        TranscriptLine(f"{m.name} [{m.seen_by}]" if m.seen_by else m.name, m.text) for m in lines
    )
    system = f"{request.messages[0]['content']}\n\n{PRIVATE_PARTS}"
    return generate.Request(
        [{"role": "system", "content": system}, {"role": "user", "content": text}], request.max_output_size
    )


def _entry_text(e: SummaryEntry) -> str:
    return summary_block([EntryText(e.title, e.content)])


def _combine(services: Services, chat_id: int, config: ProviderConfig, helper: str) -> None:
    with Session(services.engine) as session:
        chat = session.get(Chat, chat_id)
        settings = read_settings(chat.settings)
        state = session.get(SceneState, chat_id)
        mark = state.window_start_id if state else None
        active = list(
            session.exec(
                select(SummaryEntry)
                .where(
                    SummaryEntry.chat_id == chat_id,
                    SummaryEntry.active == True,  # noqa: E712
                    SummaryEntry.awaiting_review == False,  # noqa: E712
                )
                .order_by(col(SummaryEntry.first_message_id), col(SummaryEntry.id))
            )
        )
        texts = {
            e.id: continuity.EntryText(e.id, _entry_text(e), count_tokens(_entry_text(e))) for e in active
        }
        if not continuity.combine_due([t.tokens for t in texts.values()], settings.adv_budget):
            return
        chosen = [
            texts[e.id]
            for e in active
            if not (mark is not None and e.last_message_id >= mark)
            and not continuity.keeps_as_is(e.title + e.content)
        ]
        if len(chosen) < 1 or sum(t.tokens for t in chosen) < 2:
            return
        prompt = continuity.DEFAULT_COMBINE_PROMPT
        set_key = continuity.continuity_key(chosen, helper, prompt)
        if state is not None and state.continuity_key == set_key:
            return  # this set failed before: not sent again until something changes
        max_output = settings.summary_max_tokens
    answers: list[str] = []
    for part in continuity.parts(chosen):
        text = continuity.part_text(part)
        tokens = sum(e.tokens for e in part)
        try:
            done = complete_chat_blocking(
                config,
                continuity.combine_request(prompt, text, tokens),
                GenerationParams(max_tokens=continuity.combine_max_tokens(tokens, max_output)),
            )
        except ProviderError as err:
            _note(services, chat_id, f"Updating continuity failed: {err}", set_key)
            return
        read = continuity.read_combined(
            done.text or "", text=text, tokens=tokens, finish_reason=done.finish_reason, count=count_tokens
        )
        if isinstance(read, continuity.Refused):
            _note(
                services,
                chat_id,
                f"Updating continuity left the summaries as they are: {read.reason}",
                set_key,
            )
            return
        answers.append(read)
    content = "\n\n".join(answers)
    if len(content) > MAX_CONTENT:
        _note(
            services,
            chat_id,
            "Updating continuity left the summaries as they are: the combined summary is "
            f"longer than an entry may be ({MAX_CONTENT:,} characters).",
            set_key,
        )
        return
    with Session(services.engine) as session:
        olds = [session.get(SummaryEntry, e.id) for e in chosen]
        if any(o is None or not o.active or _entry_text(o) != texts[o.id].text for o in olds):
            return  # the user changed an entry meanwhile: theirs wins; the next reply tries again
        session.add(
            SummaryEntry(
                chat_id=chat_id,
                title=continuity.COMBINED_TITLE,
                content=content,
                first_message_id=min(o.first_message_id for o in olds),
                last_message_id=max(o.last_message_id for o in olds),
                first_position=min(o.first_position for o in olds),
                last_position=max(o.last_position for o in olds),
                tokens=count_tokens(content),
                origin="model",
                active=True,
            )
        )
        for o in olds:
            o.active, o.updated_at = False, utcnow()
            session.add(o)
        state = session.get(SceneState, chat_id) or SceneState(chat_id=chat_id)
        state.continuity_key, state.continuity_reason, state.updated_at = "", "", utcnow()
        session.add(state)
        session.commit()
    log.info("Advanced Memory combined %s summaries into one in chat %s", len(chosen), chat_id)

"""Chat Summary as a prompt source: the active entries in the older short-term memory slot (above
the conversation), the summarised messages older than the recent tail taken out when the chat
hides them, and its part of Chat Settings. Roleplay chats only."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app import forms
from app.chats.models import Chat
from app.chats.settings import read_settings
from app.errors import UserError
from app.jobs import Job
from app.memory.summaries import generate, runs, service
from app.memory.summaries.coverage import ChatMessage, ScopeError, SummaryRange, check_every, select_messages
from app.memory.summaries.rules import EntryText, summary_block
from app.prompt.builder import DynamicBlock
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn
from app.services import Services


class SummarySource(PromptSource):
    name = "summaries"
    label = "Chat Summary"

    def contribute(self, turn: Turn) -> Contribution | None:
        if turn.chat.mode != "roleplay":
            return None
        every = service.list_entries(turn.session, turn.chat.id)
        entries = [e for e in every if e.active and not e.awaiting_review]
        if not entries:
            return None
        block = summary_block([EntryText(e.title, e.content) for e in entries])
        count = f"{len(entries)} active summary {'entry' if len(entries) == 1 else 'entries'}"
        if not turn.settings.summary_hide_messages:
            return Contribution(
                fixed=(DynamicBlock("older_short_term_memory", "Chat Summary", block),),
                note=f"Chat Summary: {count} sent; the messages they cover are sent too (Hide summarised messages is off).",
            )  # fmt: skip
        chosen = select_messages([ChatMessage(m.id, m.hidden) for m in turn.history.messages], _ranges(every),
                                 tail=turn.settings.summary_recent_tail, hide_summarised=True)  # fmt: skip
        turn.scratch[self.name] = chosen.summarised_ids
        return Contribution(
            fixed=(DynamicBlock("older_short_term_memory", "Chat Summary", block),),
            note=f"Chat Summary: {count} sent. {len(chosen.summarised_ids)} messages summarised and left out; "
            f"{chosen.uncovered_count} older messages not covered by any summary are still sent.",
        )

    def history_filter(self, turn: Turn) -> Collection[int]:
        return turn.scratch.pop(self.name, ())

    def after_reply(self, services: Services, chat_id: int) -> None:
        runs.schedule_automatic(services, chat_id)

    def jobs(self) -> Sequence[Job]:
        return runs.JOBS

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection | None:
        if chat.mode != "roleplay":
            return None
        return SettingsSection("memory/_summary_settings.html", panel_context(session, chat, engine=services.engine))

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        if not forms.text(form, "chat_summary_shown"):
            return {}
        tail = forms.optional_number(form, "summary_recent_tail", int)
        every = forms.optional_number(form, "summary_every", int)
        if every is not None:
            try:
                check_every(every)
            except ScopeError as err:
                raise UserError(str(err)) from None
        return {"summary_hide_messages": forms.checkbox(form, "summary_hide_messages"),
                "summary_auto": forms.checkbox(form, "summary_auto"),
                **({} if tail is None else {"summary_recent_tail": tail}),
                **({} if every is None else {"summary_every": every})}  # fmt: skip


def _ranges(entries) -> list[SummaryRange]:
    """Entries as coverage.py reads them: one held for review covers nothing yet."""
    return [SummaryRange(e.first_message_id, e.last_message_id, e.active and not e.awaiting_review) for e in entries]


def panel_context(session: Session, chat: Chat, *, engine: Engine, show_inactive: bool = True) -> dict[str, Any]:
    """What the Chat Summary panel shows."""
    views = service.entry_views(session, chat.id)
    inactive = sum(1 for v in views if not v.entry.active)
    ids = service.message_ids(session, chat.id)
    tail = read_settings(chat.settings).summary_recent_tail
    uncovered = select_messages([ChatMessage(i) for i in ids], _ranges([v.entry for v in views]), tail=tail).uncovered_count
    return {
        "entries": [v for v in views if show_inactive or v.entry.active], "total": len(views), "inactive": inactive,
        "show_inactive": show_inactive, "message_count": len(ids), "uncovered": uncovered, "tail": tail,
        "job": generate.latest_job(session, engine, chat.id), "review": read_settings(chat.settings).summary_review,
        "backfill": runs.latest_run(session, chat.id, "backfill"), "auto": runs.latest_run(session, chat.id, "automatic"),
        "batch": runs.BATCH,
    }  # fmt: skip

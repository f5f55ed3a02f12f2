"""Conversation chats' day and week summaries as a prompt source: the week summaries, then the day
summaries of weeks not yet consolidated, and their key details, in the older short-term memory slot
(so the cached prefix changes only when a summary does); the messages they speak for leave the
history, except the Recent Message Tail. Messages of past days no summary speaks for, and today's, are
sent word for word. Also the always-on job, its part of Chat Settings, and its keys in chat files
(export, import and branch; day_transfer.py has the format)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlmodel import Session

from app.chats.models import Chat
from app.chats.st_metadata import SUGO_KEY
from app.memory.days import runs as day_runs
from app.memory.days import service as conversation
from app.memory.days.core import days
from app.memory.days.core import transfer as day_transfer
from app.memory.summaries.core.prompts import day_block, important_memories, week_block
from app.platform import forms
from app.platform.jobs import RESUME, Job, RunKind
from app.platform.services import Services
from app.prompt.core.builder import DynamicBlock
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn

SUMMARIZE_CHAT = "summaries.conversation_days.chat"  # after a reply: this chat's missing days
JOBS = (
    Job(
        "summaries.conversation_days",
        day_runs.summarize_conversations,
        every_minutes=day_runs.JOB_MINUTES,
        at_start=True,
    ),
    Job(SUMMARIZE_CHAT, day_runs.summarize_chat, every_minutes=None),
)
RUNS = (RunKind("Day Backfill", "summary_run", RESUME, day_runs.resume_backfills),)


class DaySummarySource(PromptSource):
    name = "day_summaries"
    kinds = ("older_short_term_memory",)
    label = "Day summaries"

    def contribute(self, turn: Turn) -> Contribution | None:
        if turn.chat.mode != "conversation":
            return None
        chat_id = turn.chat.id
        assert chat_id is not None
        if not conversation.has_summaries(turn.session, chat_id):  # off for this chat: one cheap check
            return None
        dayrows = {r.day: r for r in conversation.day_rows(turn.session, chat_id)}
        weekrows = {r.week: r for r in conversation.week_rows(turn.session, chat_id)}
        # The days counted by the database, and the messages of only those the prompt reads: the tail's
        # and the window's (the builder takes out only history messages, so the window is all to filter).
        counts = conversation.message_days(turn.session, turn.chat)
        tail = min(turn.settings.summary_recent_tail, days.MAX_TAIL)
        plan = days.summary_plan(counts, dayrows, weekrows, conversation.today_of(turn.chat), tail=tail)
        if not plan.weeks and not plan.days:
            return None
        tail_ids = set(conversation.newest_ids(turn.session, turn.chat, plan.tail))
        window = [m.id for m in turn.history.messages]
        day_of = conversation.days_of(turn.session, turn.chat, window)
        # Counted among the messages the prompt reads (the window): those the window dropped are
        # counted as dropped, so Peek Prompt's numbers add up to the chat, each message once.
        turn.scratch[self.name] = left_out = {
            i for i in window if day_of.get(i) in plan.covered and i not in tail_ids
        }
        parts = [week_block(w, weekrows[w].summary) for w in plan.weeks]
        parts += [day_block(d, dayrows[d].summary) for d in plan.days]
        memories = important_memories(
            [(w, weekrows[w].key_details) for w in plan.weeks],
            [(d, dayrows[d].key_details) for d in plan.days],
        )
        text = "\n\n".join(parts + ([memories] if memories else []))
        kept = sum(i in tail_ids for i in window)
        return Contribution(
            fixed=(DynamicBlock("older_short_term_memory", "Day summaries", text),),
            note=f"Day summaries: {len(plan.weeks)} week and {len(plan.days)} day summaries sent; "
            f"{len(left_out)} summarised messages left out, {kept} kept as the recent tail.",
        )

    def history_filter(self, turn: Turn) -> Collection[int]:
        return turn.scratch.pop(self.name, ())

    def after_reply(self, services: Services, chat_id: int) -> None:
        if services.queue is not None:  # one such job waiting per chat
            services.queue.defer(SUMMARIZE_CHAT, chat_id=chat_id)

    def jobs(self) -> Sequence[Job]:
        return JOBS

    def runs(self) -> Sequence[RunKind]:
        return RUNS

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection | None:
        if chat.mode != "conversation":
            return None
        return SettingsSection(
            "memory/_day_summary_settings.html", day_runs.panel_context(session, chat, services=services)
        )

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        if not forms.text(form, "day_summaries_shown"):
            return {}
        values = {
            "summary_rollover_hour": forms.optional_number(form, "summary_rollover_hour", int),
            "summary_recent_tail": forms.optional_number(form, "summary_recent_tail", int),
        }
        return {k: v for k, v in values.items() if v is not None}

    def export_chat_metadata(self, session: Session, chat: Chat) -> dict[str, Any]:
        # Written even when empty, so an imported file's old summaries never come back out of its header.
        return conversation.file_metadata(session, chat)

    def import_chat_metadata(
        self, session: Session, chat: Chat, metadata: Mapping[str, Any], line_ids: Sequence[int]
    ) -> list[str]:
        if chat.mode != "conversation":
            if not day_transfer.has_summaries(metadata):
                return []
            return ["The file's day and week summaries were left out: they are for Conversation chats."]
        # Sugo's own settings block (read with the chat's settings) wins over Marinara's tail key.
        sugo = metadata.get(SUGO_KEY)
        ours = (
            isinstance(sugo, Mapping)
            and isinstance(sugo.get("summaries"), Mapping)
            and "recent_tail" in sugo["summaries"]
        )
        return conversation.import_file_summaries(session, chat, metadata, read_tail=not ours)

    def summary_count(self, session: Session, chat: Chat) -> int:
        assert chat.id is not None
        return len(conversation.day_rows(session, chat.id)) + len(conversation.week_rows(session, chat.id))

    def chat_branched(self, session: Session, source: Chat, branch: Chat) -> None:
        if source.mode == "conversation":
            conversation.copy_to_branch(session, source, branch)

"""Chat Summary as a prompt source: the active entries in the older short-term memory slot (above
the conversation), the summarised messages older than the recent tail taken out when the chat
hides them, and its part of Chat Settings. Roleplay chats only.

In a group chat each character reads only the parts of an entry meant for them
(`{{#if char == "Kaito"}}…{{/if}}`, prompts.visible_to); narrator-only parts reach no character. Sugo
has no merged reply (one reply speaking for everyone present), so prompts.merged_view is not used.
A one-character chat reads the conditions for that character."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.chats.models import Chat
from app.chats.settings import read_settings
from app.chats.st_metadata import SUGO_KEY
from app.connections.service import list_connections
from app.memory.summaries import generate, runs, service, templates
from app.memory.summaries.core.coverage import (
    ChatMessage,
    ScopeError,
    check_every,
    select_messages,
)
from app.memory.summaries.core.transfer import ENTRIES_KEY, HIDE_KEY, read_hide
from app.platform import forms
from app.platform.core.errors import UserError
from app.platform.jobs import Job, RunKind
from app.platform.modelbase import parse_row_id
from app.platform.services import Services
from app.prompt.core.builder import DynamicBlock
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn

MAX_OUTPUT = 32_768


class SummarySource(PromptSource):
    name = "summaries"
    kinds = ("older_short_term_memory",)
    label = "Chat Summary"

    def contribute(self, turn: Turn) -> Contribution | None:
        if turn.chat.mode != "roleplay" or turn.settings.advanced_memory_on(turn.chat.mode):
            return None  # with Advanced Memory on, its planner sends the entries that fit (as constants)
        # One aggregate over the chat's entries; their text is read again only when they changed.
        part = turn.services.summary_blocks.part(turn.session, turn.chat.id, turn.speaker.name)
        if part is None:  # off for this chat (no active entry)
            return None
        block = part.block
        count = f"{part.count} active summary {'entry' if part.count == 1 else 'entries'}"
        if part.conditional:
            count += f" (as {turn.speaker.name} may read them: parts meant for others left out)"
        if not turn.settings.summary_hide_messages:
            return Contribution(
                fixed=(DynamicBlock("older_short_term_memory", "Chat Summary", block),),
                note=f"Chat Summary: {count} sent; the messages they cover are sent too (Hide summarised messages is off).",
            )
        chosen = select_messages(
            [ChatMessage(m.id, m.hidden) for m in turn.history.messages],
            part.ranges,
            tail=turn.settings.summary_recent_tail,
            hide_summarised=True,
        )
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

    def runs(self) -> Sequence[RunKind]:
        return runs.RUNS

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection | None:
        if chat.mode != "roleplay":
            return None
        return SettingsSection(
            "memory/_summary_settings.html", panel_context(session, chat, engine=services.engine)
        )

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
        return {
            "summary_hide_messages": forms.checkbox(form, "summary_hide_messages"),
            "summary_auto": forms.checkbox(form, "summary_auto"),
            "summary_collapse_hidden": forms.checkbox(form, "summary_collapse_hidden"),
            **({} if tail is None else {"summary_recent_tail": tail}),
            **({} if every is None else {"summary_every": every}),
            # Review outputs is saved by its own switch; Save settings keeps it as it is.
            "summary_review": read_settings(chat.settings).summary_review,
            **_prompt_settings(session, form),
        }

    def export_chat_metadata(self, session: Session, chat: Chat) -> dict[str, Any]:
        # Written even when empty, so an imported file's old entries never come back out of its header.
        return {
            ENTRIES_KEY: service.file_entries(session, chat.id),
            HIDE_KEY: read_settings(chat.settings).summary_hide_messages,
        }

    def import_chat_metadata(
        self, session: Session, chat: Chat, metadata: Mapping[str, Any], line_ids: Sequence[int]
    ) -> list[str]:
        if chat.mode != "roleplay":
            return (
                ["The file's summary entries were left out: Chat Summary is for Roleplay chats."]
                if metadata.get(ENTRIES_KEY)
                else []
            )
        hide = read_hide(metadata)
        # Sugo's own settings block (read with the chat's settings) wins over Marinara's key.
        if hide is not None and not isinstance(metadata.get(SUGO_KEY), Mapping):
            chat.settings = {**(chat.settings or {}), "summary_hide_messages": hide}
            session.add(chat)
        return service.import_file_entries(session, chat.id, metadata, line_ids)

    def summary_count(self, session: Session, chat: Chat) -> int:
        return service.entry_count(session, chat.id)

    def chat_branched(self, session: Session, source: Chat, branch: Chat) -> None:
        service.copy_to_branch(session, source.id, branch.id)


def _prompt_settings(session: Session, form: Any) -> dict[str, Any]:
    """Summary Provider and Maximum output size from the form, each checked; the Summary Prompt is
    chosen for every Roleplay chat here too (in the same transaction, so a refused form saves none)."""
    raw = forms.text(form, "summary_max_tokens").strip()
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_OUTPUT:
        shown = f"“{raw}”" if raw else "Empty"
        raise UserError(
            f"Maximum output size: {shown} is not a whole number of tokens from 1 to {MAX_OUTPUT:,}."
        )
    _choose_template(session, form)
    connection_id = forms.optional_number(form, "summary_connection_id", int)
    if connection_id is not None and connection_id not in {c.id for c in list_connections(session)}:
        raise UserError("That Summary Provider connection no longer exists; choose another.")
    return {"summary_max_tokens": int(raw), "summary_connection_id": connection_id}


def _choose_template(session: Session, form: Any) -> None:
    """Store the Summary Prompt select's choice, when it differs from the one the page was drawn with
    (`summary_template_shown`): Save settings in a chat opened before another chat chose a template
    leaves that choice alone."""
    picked = forms.text(form, "summary_template_id").strip()
    shown = form.get("summary_template_shown")
    if shown is not None and picked == shown:
        return
    template_id = parse_row_id(picked) if picked else None
    if picked and template_id is None:
        raise UserError(f"Summary prompt: “{picked}” is not a template; choose one from the list.")
    templates.choose_template(session, template_id)


def prompt_context(
    session: Session, chat: Chat, *, chosen: templates.ChosenPrompt | None = None
) -> dict[str, Any]:
    """What the Summary Prompt / Provider / output size part shows; `chosen` is the select's unsaved
    value when the template manager redraws it before Save (None: the choice every chat uses)."""
    settings = read_settings(chat.settings)
    conn, provider_missing = generate.summary_connection(session, chat)
    return {
        "templates": templates.list_templates(session),
        "chosen": chosen or templates.chosen_prompt(session),
        "stored": templates.chosen_value(session),
        "connections": list_connections(session),
        "provider_id": settings.summary_connection_id,
        "provider_missing": provider_missing,
        "provider": conn,
        "max_output": MAX_OUTPUT,
        "default_text": templates.ROLEPLAY_ENTRY_PROMPT,
    }


def panel_context(
    session: Session, chat: Chat, *, engine: Engine, show_inactive: bool = True
) -> dict[str, Any]:
    """What the Chat Summary panel shows. The runs are read before the entries: a run that ends between
    the two reads has committed its entry with its status, so a panel that shows a run done shows its
    entry too (read the other way round, a run ending in between left a "done" panel, which polls no
    more, without the entry it wrote)."""
    job = generate.latest_job(session, engine, chat.id)
    backfill = runs.latest_run(session, chat.id, "backfill")
    auto = runs.latest_run(session, chat.id, "automatic")
    views = service.entry_views(session, chat.id)
    inactive = sum(1 for v in views if not v.entry.active)
    tail = read_settings(chat.settings).summary_recent_tail
    gap = service.uncovered(session, chat.id, [v.entry for v in views], tail=tail)
    return {
        "entries": [v for v in views if show_inactive or v.entry.active],
        "total": len(views),
        "inactive": inactive,
        "show_inactive": show_inactive,
        "message_count": service.message_count(session, chat.id),
        "uncovered": gap.count,
        "gap": gap,
        "uncovered_batch": service.UNCOVERED_BATCH,
        "tail": tail,
        "job": job,
        "review": read_settings(chat.settings).summary_review,
        "waiting_for": generate.waiting_for(session, chat.id)
        if job is not None and job.status == "waiting"
        else "",
        "prompt": prompt_context(session, chat),
        "backfill": backfill,
        "auto": auto,
        "batch": runs.BATCH,
    }

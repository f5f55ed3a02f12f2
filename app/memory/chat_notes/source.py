"""The memory of this chat as a prompt source (issue 25).

- The notes the user keeps go above the conversation as their own block ("chat_notes"), on by
  default: the user wrote them to be remembered.
- The rule-made summary ("chat_memory") is off by default: it is for the user and for other chats
  (attached with @); the chat's own model reads the conversation itself. Chat Settings turns either on
  or off.
- The memory is built again in the background when a reply ends and when messages change (the same
  hooks Memory Recall uses), for an imported or branched chat at once, and once at start for chats
  older than this feature; a deleted chat's file goes with it."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import text
from sqlmodel import Session

from app.chats.models import Chat
from app.memory.chat_notes import mirror, service
from app.memory.chat_notes.core.rules import ChatSummary, render_markdown
from app.platform import forms
from app.platform.jobs import Job, run_soon
from app.platform.services import Services
from app.prompt.core.builder import DynamicBlock
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn

log = logging.getLogger(__name__)

# One primary-key read: most chats have no notes and the summary is off.
_READ = text("SELECT notes, summary FROM chat_memory WHERE chat_id = :chat_id")
EXPORT_KEY = "chat_notes"  # under chat_metadata.sugo


def notes_block(notes: list[str]) -> str:
    lines = "\n".join(f"- {note}" for note in notes)
    return f"Notes the user keeps about this chat (facts to keep in mind):\n{lines}"


class ChatNotesSource(PromptSource):
    name = "chat_notes"
    kinds = ("chat_memory", "chat_notes")
    label = "Memory of this chat"

    def contribute(self, turn: Turn) -> Contribution | None:
        notes_on, memory_on = turn.settings.chat_notes_in_prompt, turn.settings.chat_memory_in_prompt
        if not (notes_on or memory_on):
            return None
        row = turn.session.connection().execute(_READ, {"chat_id": turn.chat.id}).first()
        if row is None:
            return None
        notes = [str(n) for n in (json.loads(row[0]) if isinstance(row[0], str) else row[0]) or ()]
        summary = ChatSummary.from_json(json.loads(row[1]) if isinstance(row[1], str) else row[1])
        blocks = []
        if memory_on and not summary.is_empty():
            text = render_markdown(turn.chat.name, summary, ())
            blocks.append(DynamicBlock("chat_memory", "This chat's memory", text))
        if notes_on and notes:
            blocks.append(DynamicBlock("chat_notes", "Notes on this chat", notes_block(notes)))
        if not blocks:
            return None
        return Contribution(
            fixed=tuple(blocks),
            note=f"Memory of this chat: {len(notes) if notes_on else 0} note(s)"
            + (", the summary" if memory_on and not summary.is_empty() else "")
            + ".",
        )

    def after_reply(self, services: Services, chat_id: int) -> None:
        rebuild_soon(services, chat_id)

    def messages_changed(self, services: Services, chat_id: int) -> None:
        rebuild_soon(services, chat_id)

    def chat_added(self, services: Services, chat_id: int) -> None:
        rebuild_soon(services, chat_id)

    def chat_deleted(self, services: Services, chat_id: int) -> None:
        mirror.remove(services.settings.data_dir, chat_id)

    def jobs(self) -> tuple[Job, ...]:
        # At start: chats older than this feature get their memory, once (each then has a row), and
        # files missing or edited by hand are written again from the database; daily after that.
        return (Job("chat_notes.settle", settle, every_minutes=24 * 60, at_start=True),)

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection:
        return SettingsSection("memory/_chat_notes_settings.html")

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        return {
            "chat_notes_in_prompt": forms.checkbox(form, "chat_notes_in_prompt"),
            "chat_memory_in_prompt": forms.checkbox(form, "chat_memory_in_prompt"),
        }

    def export_chat_metadata(self, session: Session, chat: Chat) -> dict[str, Any]:
        return {"sugo": {EXPORT_KEY: list(service.view(session, chat).notes)}}

    def import_chat_metadata(
        self, session: Session, chat: Chat, metadata: Mapping[str, Any], line_ids: Sequence[int]
    ) -> list[str]:
        sugo = metadata.get("sugo")
        notes = sugo.get(EXPORT_KEY) if isinstance(sugo, dict) else None
        if not notes:
            return []
        if not isinstance(notes, list):
            return ["The file's chat notes were left out: they are not a list."]
        # The row is written in the import's transaction; its file follows when the chat is added.
        problems = service.set_notes(session, None, chat, [str(n) for n in notes])
        return [f"A note of the file was left out: {p}" for p in problems[:3]]

    def chat_branched(self, session: Session, source: Chat, branch: Chat) -> None:
        notes = service.view(session, source).notes
        if notes:
            service.set_notes(session, None, branch, notes)


def rebuild_now(services: Services, chat_id: int) -> None:
    try:
        with Session(services.engine) as session:
            service.rebuild(session, services.settings.data_dir, chat_id)
            session.commit()
    except Exception:  # the next reply or change, or the start-up pass, builds it again
        log.exception("building the memory of chat %s failed", chat_id)


def rebuild_soon(services: Services, chat_id: int) -> None:
    if not run_soon(
        services.scheduler, rebuild_now, services, chat_id, job_id=f"chat_notes.rebuild.{chat_id}"
    ):
        rebuild_now(services, chat_id)


def settle(services: Services) -> None:
    """Memory for the chats that have none yet (older than this feature), then the files in step with
    the database: missing or edited ones written again, those of chats without memory removed."""
    data_dir = services.settings.data_dir
    with Session(services.engine) as session:
        waiting = service.chats_without_memory(session)
    for chat_id in waiting:
        rebuild_now(services, chat_id)
    with Session(services.engine) as session:
        kept = set()
        for chat_id in service.chats_with_memory(session):
            chat = session.get(Chat, chat_id)
            if chat is not None:
                service.ensure_file(data_dir, service.view(session, chat))
                kept.add(chat_id)
        # A file whose chat has no memory (deleted while Sugo was down). Asked again one by one: a
        # chat may have got its first memory since the list above was read.
        for chat_id in set(mirror.mirrored_ids(data_dir)) - kept:
            if not service.has_memory(session, chat_id):
                mirror.remove(data_dir, chat_id)

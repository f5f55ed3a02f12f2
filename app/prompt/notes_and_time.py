"""The small prompt sources that need no folder of their own: the character's note, the chat's
context note (SillyTavern's Author's Note) and time awareness."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Session

from app.characters.service import character_note
from app.chats.models import Chat
from app.platform import forms
from app.platform.services import Services
from app.prompt.core.builder import DepthNote, DynamicBlock
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn


class CharacterNoteSource(PromptSource):
    """The speaking character's Character's Note (a card's `depth_prompt`), at its depth."""

    name = "character_note"
    kinds = ("context_note",)
    label = "Character's note"

    def contribute(self, turn: Turn) -> Contribution | None:
        text, depth, role = character_note(turn.speaker)
        if not text.strip():
            return None
        return Contribution(depth_notes=(DepthNote(text, depth, role, label=f"{turn.speaker.name}'s note"),))


class ContextNoteSource(PromptSource):
    """The chat's context note, placed among the recent messages at its depth."""

    name = "context_note"
    kinds = ("context_note",)
    label = "Context note"

    def contribute(self, turn: Turn) -> Contribution | None:
        s = turn.settings
        if not s.context_note.strip():
            return None
        return Contribution(
            depth_notes=(DepthNote(s.context_note, s.context_note_depth, s.context_note_role),)
        )

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection:
        return SettingsSection("prompt/_context_note_settings.html")

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        values = {
            "context_note": forms.text(form, "context_note").strip(),
            "context_note_depth": forms.optional_number(form, "context_note_depth", int),
            "context_note_role": forms.text(form, "context_note_role") or None,
        }
        return {k: v for k, v in values.items() if v is not None}


def now_text(now: datetime) -> str:
    return f"{now:%A, %d %B %Y, %H:%M} ({now.tzname()})"


class TimeAwarenessSource(PromptSource):
    """The current date and time just above the newest turns, when the chat asks for it."""

    name = "time_awareness"
    kinds = ("current_time",)
    label = "Time awareness"

    def contribute(self, turn: Turn) -> Contribution | None:
        if not turn.settings.time_awareness:
            return None
        text = f"Current time: {now_text(datetime.now().astimezone())}"
        return Contribution(dynamic=(DynamicBlock("current_time", "Current time", text),))

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection:
        return SettingsSection("prompt/_time_settings.html")

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        return {"time_awareness": forms.checkbox(form, "time_awareness")}

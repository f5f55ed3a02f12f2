"""Game Mode's part of the prompt and of Chat Settings (the manual's "No Game Mode").

A Game chat is run by its Game Master: one member's card (the first picked when the chat was made;
Chat Settings changes it; `ChatSettings.narrator_in`). The Game Master answers every message of the
user (app/generation/reply.py), reads every message and every memory as a narrator does, and is the
only one to read the game's secrets: the story arc and the twists still to come, which the user writes
here. A party member, asked to speak under the message box, never gets them. The builder keeps a Game
chat's prefix the same between turns (app/prompt/core/layout.py, GAME_AFTER_HISTORY)."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from app.chats.models import Chat
from app.chats.settings import read_settings
from app.chats.turn_taking import group_members
from app.platform import forms
from app.platform.services import Services
from app.prompt.core.builder import DynamicBlock
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn

SECRETS_HEADER = (
    "The Game Master's secrets (the story arc and what is still to come): known to you alone. Never "
    "state them outright; let the game uncover them."
)


def game_master_id(turn: Turn) -> int | None:
    return turn.settings.narrator_in(turn.chat.mode, [c.id for c in turn.characters])


class GameSource(PromptSource):
    name = "game"
    label = "Game Master's secrets"

    def contribute(self, turn: Turn) -> Contribution | None:
        if turn.chat.mode != "game" or turn.purpose == "impersonate":
            return None
        secrets = turn.settings.game_secrets.strip()
        if not secrets:
            return None
        if turn.speaker.id != game_master_id(turn):
            return Contribution(
                note=f"The Game Master's secrets are left out: {turn.speaker.name} is in the party."
            )
        return Contribution(
            fixed=(DynamicBlock("game_secrets", "Game Master's secrets", f"{SECRETS_HEADER}\n{secrets}"),)
        )

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection | None:
        if chat.mode != "game":
            return None
        members = [m.character for m in group_members(session, chat.id)]
        gm = read_settings(chat.settings).narrator_in(chat.mode, [c.id for c in members])
        return SettingsSection("game/_settings.html", {"members": members, "game_master_id": gm})

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        if not forms.checkbox(form, "game_shown"):  # not a Game chat's form: the stored secrets stay
            return {"game_secrets": read_settings(chat.settings).game_secrets}
        return {
            "narrator_id": forms.optional_number(form, "narrator_id", int),
            "game_secrets": forms.text(form, "game_secrets"),
        }

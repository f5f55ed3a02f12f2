"""Game Mode's part of the prompt and of Chat Settings (the manual's "No Game Mode").

A Game chat is run by its Game Master: one member's card (the first picked when the chat was made;
Chat Settings changes it; `ChatSettings.narrator_in`). The Game Master answers every message of the
user (app/generation/reply.py), reads every message and every memory as a narrator does, and is the
only one to read the game's secrets: the story arc and the twists still to come, which the user writes
here. A party member, asked to speak under the message box, never gets them. The builder keeps a Game
chat's prefix the same between turns (app/prompt/core/layout.py, GAME_AFTER_HISTORY).

In a later session (app/game/sessions.py) the Game Master also reads the earlier sessions' scene
recaps, above the conversation (they do not change during a session, so they stay in the cached
prefix), every private part included, as the Game Master reads everything. They take at most the
Advanced Memory budget and an eighth of the context; past it the oldest are left out, and Peek Prompt
says how many."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from app.chats.models import Chat
from app.chats.settings import read_settings
from app.chats.turn_taking import group_members
from app.game.sessions import EarlierRecap, earlier_recaps, sessions_of
from app.memory.summaries.core.prompts import visible_to
from app.platform import forms
from app.platform.services import Services
from app.prompt.core.builder import DynamicBlock
from app.prompt.core.tokens import count_tokens
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn

SECRETS_HEADER = (
    "The Game Master's secrets (the story arc and what is still to come): known to you alone. Never "
    "state them outright; let the game uncover them."
)
EARLIER_HEADER = "## Earlier sessions\n\nWhat happened in this game's earlier sessions, scene by scene:"
SESSION_HEADING_TOKENS = 8  # "### Session N" and its line


def game_master_id(turn: Turn) -> int | None:
    return turn.settings.narrator_in(turn.chat.mode, [c.id for c in turn.characters])


def _recap_line(recap: EarlierRecap) -> str:
    # The Game Master reads every private part ({{#if character == …}} sections) of a recap.
    text = visible_to(recap.summary, None).strip()
    when = recap.timeframe.strip()
    return f"- {when}: {text}" if when else f"- {text}"


def earlier_sessions_text(recaps: list[EarlierRecap], limit: int) -> tuple[str, int]:
    """The earlier sessions' recaps within `limit` tokens, the newest kept first (a recap whole or not
    at all), told oldest first under their session's heading; and how many were left out."""
    kept: list[tuple[EarlierRecap, str]] = []
    used = count_tokens(EARLIER_HEADER)
    for recap in reversed(recaps):
        line = _recap_line(recap)
        cost = count_tokens(line) + SESSION_HEADING_TOKENS
        if used + cost > limit:
            break
        kept.append((recap, line))
        used += cost
    if not kept:
        return "", len(recaps)
    lines = [EARLIER_HEADER]
    current = None
    for recap, line in reversed(kept):
        if recap.session != current:
            current = recap.session
            lines.append(f"\n### Session {current}")
        lines.append(line)
    return "\n".join(lines), len(recaps) - len(kept)


class GameSource(PromptSource):
    name = "game"
    kinds = ("game_secrets", "earlier_sessions")
    label = "Game"

    def contribute(self, turn: Turn) -> Contribution | None:
        if turn.chat.mode != "game" or turn.purpose == "impersonate":
            return None
        secrets = turn.settings.game_secrets.strip()
        if turn.speaker.id != game_master_id(turn):
            if secrets or turn.chat.game_root_id:
                return Contribution(
                    note=f"The Game Master's secrets and earlier sessions are left out: {turn.speaker.name} "
                    "is in the party."
                )
            return None
        blocks, note = [], None
        if secrets:
            blocks.append(
                DynamicBlock("game_secrets", "Game Master's secrets", f"{SECRETS_HEADER}\n{secrets}")
            )
        recaps = earlier_recaps(turn.session, turn.chat) if turn.chat.game_root_id else []
        if recaps:
            limit = min(turn.settings.adv_budget, turn.context_size // 8)
            text, left_out = earlier_sessions_text(recaps, limit)
            if text:
                blocks.append(DynamicBlock("earlier_sessions", "Earlier sessions (Game)", text))
            note = f"Earlier sessions: {len(recaps) - left_out} of {len(recaps)} scene recaps" + (
                f"; the {left_out} oldest left out (over {limit} tokens)." if left_out else "."
            )
        if not blocks and note is None:
            return None
        return Contribution(fixed=tuple(blocks), note=note)

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection | None:
        if chat.mode != "game":
            return None
        members = [m.character for m in group_members(session, chat.id)]
        gm = read_settings(chat.settings).narrator_in(chat.mode, [c.id for c in members])
        return SettingsSection(
            "game/_settings.html",
            {"members": members, "game_master_id": gm, "sessions": sessions_of(session, chat)},
        )

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        if not forms.checkbox(form, "game_shown"):  # not a Game chat's form: the stored secrets stay
            return {"game_secrets": read_settings(chat.settings).game_secrets}
        return {
            "narrator_id": forms.optional_number(form, "narrator_id", int),
            "game_secrets": forms.text(form, "game_secrets"),
        }

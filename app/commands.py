"""The message box's slash commands, one registration line each, in the order the `/` palette lists
them (app/chats/core/commands.py says what a command declares). A new command is declared beside its
handler, by the feature that owns it, plus one line here."""

from __future__ import annotations

from app.chats.core.commands import REFRESH, SlashCommand
from app.memory.chat_notes.core.commands import FORGET, MEMORY, REMEMBER


def default_commands() -> tuple[SlashCommand, ...]:
    return (
        REFRESH,
        REMEMBER,
        MEMORY,
        FORGET,
    )

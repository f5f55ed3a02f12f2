"""The message box's slash commands, one registration line each, in the order the `/` palette lists
them (app/chats/core/commands.py says what a command declares). A new command is declared beside its
handler, by the feature that owns it, plus one line here. The list lives at the web edge because it is
what the chat page shows; the declarations sit low, beside their parsers, where any layer may read them."""

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

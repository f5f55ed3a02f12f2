"""The `/` palette's registry: every command the message box understands is registered, once, with
a usage and a one-line description (app/web/commands.py, app/chats/core/commands.py)."""

from __future__ import annotations

import re
from pathlib import Path

from app.chats.core.commands import SlashCommand, check_commands
from app.memory.chat_notes.core.commands import FORGET, MEMORY, REMEMBER
from app.web.commands import default_commands


def test_the_registered_commands_are_refresh_and_the_memory_commands_in_palette_order():
    assert [c.name for c in default_commands()] == ["refresh", "remember", "memory", "forget"]


def test_each_registered_command_is_well_declared():
    assert check_commands(default_commands()) == []
    for command in default_commands():
        assert "\n" not in command.description and command.description.endswith(".")


def test_a_command_takes_an_argument_when_its_usage_names_one():
    by_name = {c.name: c for c in default_commands()}
    assert [n for n, c in by_name.items() if c.takes_argument] == ["remember", "forget"]
    assert by_name["memory"].aliases == ("memoria", "memória")


def test_check_commands_names_each_problem():
    good = SlashCommand("roll", "/roll DICE", "Roll the dice.")
    assert check_commands([good]) == []
    assert check_commands([good, SlashCommand("dice", "/dice", "Roll.", ("roll",))]) == [
        "/roll is declared twice"
    ]
    assert check_commands([SlashCommand("roll", "/dice", "Roll.")]) == [
        "/roll: its usage '/dice' does not start with it"
    ]
    bad = ["/roll: the description must be one sentence on one short line"]
    assert check_commands([SlashCommand("roll", "/roll", "Roll\nthe dice.")]) == bad
    assert check_commands([SlashCommand("roll", "/roll", "")]) == bad
    assert check_commands([SlashCommand("roll", "/roll", "x" * 200 + ".")]) == bad


def test_the_message_box_sends_every_word_of_the_memory_commands_to_them():
    # static/app.js picks the memory commands out of a message by its own pattern: a word the palette
    # offers but the pattern missed would go to the model as a message.
    script = (Path(__file__).resolve().parents[2] / "static" / "app.js").read_text()
    words = re.search(r"const MEMORY_COMMAND = /\^\\s\*\\/\(([^)]*)\)", script)
    assert words is not None
    assert set(words.group(1).split("|")) == {
        w for c in (REMEMBER, MEMORY, FORGET) for w in (c.name, *c.aliases)
    }

"""The seam for the message box's slash commands: what a command tells the `/` palette.

A command is declared by the feature that owns it (and handles it), as a `SlashCommand` beside its
parser; `app/web/commands.py` lists them all, one line each, in the order the palette shows them. The
chat page renders the list into the composer, and the palette (static/app.js) reads it from there:
adding a command adds it to the palette without touching the page or the script.

Decisions:
- `name` is the word after the slash, lower case; `aliases` are other words for the same command
  (the Portuguese ones): typing an alias finds the command too.
- `usage` is how it is written, with its argument in capitals ("/forget N"); a command whose usage
  is its bare name takes no argument, so choosing it in the palette runs it, while one that takes an
  argument is completed ("/remember ") for the user to go on typing.
- `description` is one sentence on one line: the palette has room for one line per command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

_MAX_DESCRIPTION = 120  # characters: one line of the palette on a desktop; a phone cuts it with an ellipsis


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str
    description: str
    aliases: tuple[str, ...] = ()

    @property
    def takes_argument(self) -> bool:
        return self.usage != f"/{self.name}"


def check_commands(commands: Sequence[SlashCommand]) -> list[str]:
    """What is wrong with a list of commands (empty when nothing): a name or alias taken twice, a
    usage that does not start with the command, a description that is not one short line."""
    problems = []
    seen: set[str] = set()
    for command in commands:
        for word in (command.name, *command.aliases):
            if word in seen:
                problems.append(f"/{word} is declared twice")
            seen.add(word)
        if not command.usage.startswith(f"/{command.name}"):
            problems.append(f"/{command.name}: its usage {command.usage!r} does not start with it")
        text = command.description
        if not text or "\n" in text or len(text) > _MAX_DESCRIPTION or not text.endswith("."):
            problems.append(f"/{command.name}: the description must be one sentence on one short line")
    return problems


# The chat's own command; its handler is the refresh mark (app/chats/service.py, add_refresh_mark).
REFRESH = SlashCommand(
    "refresh", "/refresh", "Start afresh: the AI reads nothing above this point (undo by deleting the mark)."
)

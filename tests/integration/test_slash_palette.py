"""The chat page carries the `/` palette's list: every registered command, in registry order, with its
usage, its one-line description, its aliases and whether it takes an argument (app/web/commands.py)."""

from __future__ import annotations

from html.parser import HTMLParser

from app.web.commands import default_commands
from tests.conftest import add_character, new_chat


class _Options(HTMLParser):
    """The palette's options: their attributes, and the text of each one's usage and description."""

    def __init__(self) -> None:
        super().__init__()
        self.options: list[dict] = []
        self._part: str | None = None

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if found.get("role") == "option" and found.get("id", "").startswith("slash-option-"):
            self.options.append({**found, "slash-usage": "", "slash-desc": ""})
        self._part = found.get("class") if found.get("class") in ("slash-usage", "slash-desc") else None

    def handle_data(self, data):
        if self._part:
            self.options[-1][self._part] += data

    def handle_endtag(self, tag):
        self._part = None


def test_the_chat_page_lists_every_registered_command(api):
    chat = new_chat(api, [add_character(api, "Aria")["id"]])
    page = api.get(f"/chats/{chat['id']}")
    assert page.status_code == 200
    assert 'placeholder="Message Aria… / for commands"' in page.text
    parser = _Options()
    parser.feed(page.text)
    commands = default_commands()
    assert [o["data-name"] for o in parser.options] == [c.name for c in commands]
    assert [o["slash-usage"] for o in parser.options] == [c.usage for c in commands]
    assert [o["slash-desc"] for o in parser.options] == [c.description for c in commands]
    for option, command in zip(parser.options, commands, strict=True):
        assert option["data-words"].split(" ") == [command.name, *command.aliases]
        assert ("data-argument" in option) == command.takes_argument

"""Macro expansion for card fields, prompts and messages. This capability knows {{char}} and
{{user}} (and their SillyTavern V1 spellings <BOT>/<CHAR>/<USER>), case-insensitively."""

from __future__ import annotations

import re

_MACRO = re.compile(r"\{\{\s*(char|user)\s*\}\}|<(BOT|CHAR|USER)>", re.IGNORECASE)


def expand_macros(text: str, *, char: str, user: str) -> str:
    if not text or ("{{" not in text and "<" not in text):
        return text

    def sub(m: re.Match[str]) -> str:
        name = (m.group(1) or m.group(2)).lower()
        return user if name == "user" else char

    return _MACRO.sub(sub, text)

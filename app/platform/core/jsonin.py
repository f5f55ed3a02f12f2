"""JSON from users' files (cards, lorebooks, chats, memory files), with a limit on nesting.

Python's json parser recurses once per level: a file nested 3,000 deep raises RecursionError,
which no import caught (a 500), and one nested a little less than the interpreter's limit parses
but then breaks whatever walks it next (an export, a round trip). Real files nest a handful of
levels; MAX_DEPTH leaves room for any `extensions` a front end writes.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "JsonTooDeep", "loads"]

MAX_DEPTH = 100


class JsonTooDeep(ValueError):
    """The JSON nests deeper than MAX_DEPTH; the message is one sentence for the user."""


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads`, refusing JSON nested deeper than `max_depth` with `JsonTooDeep`; other
    errors are json's own (`json.JSONDecodeError`, `UnicodeDecodeError`)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonTooDeep(_message(max_depth)) from None
    if _deeper_than(value, max_depth):
        raise JsonTooDeep(_message(max_depth))
    return value


def _message(max_depth: int) -> str:
    return f"its JSON is nested more than {max_depth} levels deep, which no real file is"


def _deeper_than(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False

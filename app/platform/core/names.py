"""The one check every name a user gives passes (chats, characters, personas, lorebooks, connections,
summary prompt templates): no control characters. Pure.

A name is one line shown in lists, page titles, headers, file names of exports and the prompt (`{{char}}`,
`{{user}}`): a line break there splits a list item or a prompt line, a NUL cuts it short in some tools, and
neither can be seen or typed back in a text field. So names holding C0/C1 control characters (tab, CR, LF,
NUL, DEL, ...) or the Unicode line and paragraph separators are refused with a sentence, not cleaned: the
user sees what was wrong and decides. Format characters (zero-width joiners inside emoji, bidi marks) are
allowed: they are part of how names are written.

Imports (cards, lorebooks and chats from files) keep the names they carry; this checks what is typed or
sent to the API."""

from __future__ import annotations

import re

from pydantic import AfterValidator

from app.platform.core.errors import UserError

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def refuse_control_characters(name: str, what: str = "A name") -> str:
    """`name` as it is, or UserError (a ValueError, so pydantic reports it too) when it holds a control
    character. `what` starts the sentence: "A chat name"."""
    if _CONTROL.search(name):
        raise UserError(f"{what} cannot contain line breaks, tabs or other control characters.")
    return name


def checked(what: str) -> AfterValidator:
    """For an input model's name field: `name: Annotated[str, checked("A chat name")]`; the JSON API's
    422 and the form's error carry the sentence."""
    return AfterValidator(lambda name: refuse_control_characters(name, what))

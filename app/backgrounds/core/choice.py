"""A background choice as stored, and SillyTavern's `custom_background` value. Pure.

A chat's choice: "" (its first character's default), "none", "builtin:<name>" (shipped with Sugo),
"image:<background id>" (uploaded), or "st:<file name>" (an imported chat's SillyTavern background
not uploaded yet: a file of that name uploaded later is shown). A character's default is one of the
builtin or image forms (None: no default).

SillyTavern keeps a chat's background in `chat_metadata.custom_background` as a CSS value:
`url("backgrounds/Forest%20Night.jpg")` (the file name URI-encoded; older files left it plain)."""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

NONE = "none"
MAX_FILE_NAME = 255
# The CSS value a file may carry is short; a longer one is not a background SillyTavern wrote.
MAX_CSS_VALUE = 2000
_BUILTIN = re.compile(r"builtin:[a-z0-9-]{1,40}")
_IMAGE = re.compile(r"image:[1-9][0-9]{0,17}")
_CSS_URL = re.compile(r"""\s*url\(\s*(["']?)(.*?)\1\s*\)\s*;?\s*""", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def clean_file_name(name: str) -> str | None:
    """A background's file name as kept: the last path part, without control characters, at most
    255 characters (the extension kept); None when nothing usable is left."""
    name = _CONTROL.sub("", name.replace("\\", "/").rsplit("/", 1)[-1]).strip()
    if not name or name in (".", ".."):
        return None
    if len(name) > MAX_FILE_NAME:
        stem, dot, ext = name.rpartition(".")
        keep = ext if dot and 0 < len(ext) <= 10 else ""
        name = name[: MAX_FILE_NAME - len(keep) - 1] + "." + keep if keep else name[:MAX_FILE_NAME]
    return name


def check_chat_choice(value: str) -> str:
    """A chat's background as stored, or ValueError with a sentence for the user."""
    if value in ("", NONE) or _BUILTIN.fullmatch(value) or _IMAGE.fullmatch(value):
        return value
    if value.startswith("st:") and clean_file_name(value[3:]) == value[3:]:
        return value
    raise ValueError(
        "The background must be none, the character's default, a shipped one or an uploaded one."
    )


def check_character_default(value: str) -> str | None:
    """A character's default background from a form: "" is none."""
    if value == "":
        return None
    if _BUILTIN.fullmatch(value) or _IMAGE.fullmatch(value):
        return value
    raise ValueError("A character's default background must be none, a shipped one or an uploaded one.")


def st_file_name(css: object) -> str | None:
    """The file name in SillyTavern's `custom_background` (`url("backgrounds/Forest.jpg")`), or None
    when the value is empty or names no file."""
    if not isinstance(css, str) or not css.strip() or len(css) > MAX_CSS_VALUE:
        return None
    found = _CSS_URL.fullmatch(css)
    path = found.group(2) if found else css.strip()
    return clean_file_name(unquote(path.split("?", 1)[0]))


def st_css(file_name: str) -> str:
    """SillyTavern's `custom_background` for a file name, as SillyTavern writes it."""
    return f'url("backgrounds/{quote(file_name, safe="")}")'

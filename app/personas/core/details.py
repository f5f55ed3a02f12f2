"""The checks a persona's details pass (pure), for the Personas page, its JSON twin and the
update_user_info tool alike.

- Every detail (pronouns, form of address, time zone, and a character's nickname, prefix and suffix for
  the user) is one line of at most 60 characters: a longer one is no name or pronoun, and each reaches
  every prompt. Control characters are refused with a sentence (app/platform/core/names.py).
- A time zone is an IANA name (Europe/Lisbon, matched without regard to case) or a whole-hour UTC
  offset ("UTC+3", "GMT-5", "+03:00"), kept as Etc/GMT∓N; a half-hour offset is refused with a hint to
  name the place instead, since a zone's name also knows its daylight saving time.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from app.platform.core.errors import UserError
from app.platform.core.names import refuse_control_characters

MAX_DETAIL_CHARS = 60

_OFFSET = re.compile(r"^(?:UTC|GMT)?\s*([+-])\s*(\d{1,2})(?::?(\d{2}))?$", re.IGNORECASE)


def checked_detail(label: str, value: str) -> str:
    """`value` stripped, or UserError saying what is wrong with it (too long, a line break). `label`
    starts the sentence: "Pronouns"."""
    value = value.strip()
    refuse_control_characters(value, label)
    if len(value) > MAX_DETAIL_CHARS:
        raise UserError(f"{label} is {len(value)} characters long; at most {MAX_DETAIL_CHARS} are kept.")
    return value


def read_time_zone(text: str, known: Collection[str]) -> str:
    """The IANA name of the zone `text` means, or UserError. `known`: the zone names there are."""
    text = text.strip()
    if text in known:
        return text
    by_lower = {name.lower(): name for name in known}
    if text.lower() in by_lower:
        return by_lower[text.lower()]
    if text.upper() in {"UTC", "GMT", "Z"}:
        return "UTC"
    if match := _OFFSET.match(text):
        sign, hours, minutes = match.group(1), int(match.group(2)), int(match.group(3) or 0)
        if minutes:
            raise UserError(
                f"“{text}” is not a whole-hour offset; give the place's zone instead "
                "(Asia/Kolkata, America/St_Johns)."
            )
        if hours == 0:
            return "UTC"
        # The Etc zones' signs are POSIX's, the reverse of ISO's: UTC+3 is Etc/GMT-3.
        name = f"Etc/GMT{'-' if sign == '+' else '+'}{hours}"
        if name in known:
            return name
    raise UserError(
        f"“{text[:MAX_DETAIL_CHARS]}” is not a time zone Sugo knows; give a name like Europe/Lisbon or "
        "America/New_York, or an offset like UTC+3."
    )

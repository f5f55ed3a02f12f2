"""The user's details a character reads (pure): the update a tool call asks for, the name a character
calls the user, and the prompt's lines about the user.

Decisions:
- Naming (nickname, prefix, suffix) is per character; pronouns, form of address and time zone are per
  persona (app/tools/user_info/models.py says where each is stored).
- Every field passes app/personas/core/details.py's checks (one line, at most 60 characters; a time
  zone Sugo knows).
- A blank value clears the field, as does naming it in `clear`; a field both set and cleared is refused
  (which one was meant cannot be told).
- A nickname sent with the prefix or suffix already in force ("Captain Mara" while the prefix is
  "Captain") keeps only the nickname: the affix is compared with the resolved value, the nickname is
  never split on spaces to guess where a title ends.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from app.personas.core.details import checked_detail, read_time_zone
from app.platform.core.errors import UserError

NAMING_FIELDS = ("nickname", "prefix", "suffix")
PERSONA_FIELDS = ("pronouns", "form_of_address", "time_zone")
FIELDS = NAMING_FIELDS + PERSONA_FIELDS
FIELD_LABELS = {
    "nickname": "Nickname",
    "prefix": "Prefix",
    "suffix": "Suffix",
    "pronouns": "Pronouns",
    "form_of_address": "Form of address",
    "time_zone": "Time zone",
}


@dataclass(frozen=True)
class Naming:
    nickname: str = ""
    prefix: str = ""
    suffix: str = ""


def called(name: str, naming: Naming) -> str:
    """What the character calls the user: prefix, nickname (or the persona's name), suffix. A suffix
    starting with a mark ("-san", ", PhD") joins without a space, a prefix ending with "-" likewise."""
    core = naming.nickname or name
    if naming.prefix:
        core = f"{naming.prefix}{'' if naming.prefix.endswith('-') else ' '}{core}"
    if naming.suffix:
        core = f"{core}{'' if not naming.suffix[0].isalnum() else ' '}{naming.suffix}"
    return core


@dataclass(frozen=True)
class DetailsUpdate:
    """What a call changes: field → new value ("" clears). Only fields the call touched are keys."""

    changes: Mapping[str, str]

    @property
    def naming(self) -> dict[str, str]:
        return {k: v for k, v in self.changes.items() if k in NAMING_FIELDS}

    @property
    def persona(self) -> dict[str, str]:
        return {k: v for k, v in self.changes.items() if k in PERSONA_FIELDS}


def plan_update(
    values: Mapping[str, str | None],
    clear: Iterable[str],
    *,
    current: Naming,
    known_zones: Collection[str],
) -> DetailsUpdate:
    """Check every field of a call, then say what to write, or UserError naming every problem at once
    (nothing is written when one field is wrong). `values` holds the fields the call gave (None: not
    given); `current` is the naming in force, for dropping a redundant affix from a new nickname."""
    clear = list(dict.fromkeys(clear))
    problems: list[str] = []
    for name in clear:
        if name not in FIELDS:
            problems.append(f"“{name}” is no field; clear takes {', '.join(FIELDS)}.")
    changes: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        if name in clear:
            problems.append(f"{FIELD_LABELS[name]} was both given and cleared; send one of the two.")
            continue
        try:
            value = checked_detail(FIELD_LABELS[name], value)
            if value and name == "time_zone":
                value = read_time_zone(value, known_zones)
        except UserError as err:
            problems.append(str(err))
            continue
        changes[name] = value
    if problems:
        raise UserError(" ".join(problems))
    for name in clear:
        changes[name] = ""
    if changes.get("nickname"):
        prefix = changes.get("prefix", current.prefix)
        suffix = changes.get("suffix", current.suffix)
        changes["nickname"] = without_affixes(changes["nickname"], prefix, suffix)
    return DetailsUpdate(changes)


def without_affixes(nickname: str, prefix: str, suffix: str) -> str:
    """`nickname` without the prefix and suffix in force when it repeats them at its ends, where they
    join it as `called` joins them ("Captain Mara", "Mara-san"; never "Captainia")."""
    trimmed = nickname
    if prefix:
        head = prefix if prefix.endswith("-") else prefix + " "
        if trimmed.startswith(head) and trimmed[len(head) :].strip():
            trimmed = trimmed[len(head) :].strip()
    if suffix:
        tail = suffix if not suffix[0].isalnum() else " " + suffix
        if trimmed.endswith(tail) and trimmed[: -len(tail)].strip():
            trimmed = trimmed[: -len(tail)].strip()
    return trimmed


def details_text(
    *,
    character_name: str,
    user_name: str,
    naming: Naming,
    pronouns: str,
    form_of_address: str,
    time_zone: str,
) -> str:
    """The prompt's lines about the user, each only when set; "" when nothing is."""
    lines = []
    if naming != Naming():
        parts = [f"{FIELD_LABELS[k].lower()} “{v}”" for k, v in vars(naming).items() if v]
        lines.append(
            f"{character_name} calls {user_name} “{called(user_name, naming)}” ({', '.join(parts)})."
        )
    if pronouns:
        lines.append(f"{user_name}'s pronouns: {pronouns}.")
    if form_of_address:
        lines.append(f"{user_name} prefers to be addressed: {form_of_address}.")
    if time_zone:
        lines.append(f"{user_name}'s time zone: {time_zone}.")
    return "\n".join(lines)

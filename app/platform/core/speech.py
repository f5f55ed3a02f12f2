"""Each speaker's speech in a colour of its own (issue 29): the stylesheet a chat page links, built
from the chat's members and the user's persona.

Decisions:
- The page's policy forbids inline styles, so colours reach the page as a small stylesheet
  (`/chats/{id}/speakers.css?v=<version>`) of rules keyed by each message's `data-speaker`
  ("c<character id>", "u" for the user) that set `--speech`; app.css colours `.dialogue` with it.
- Only colours that match `COLOUR` (#rrggbb) whole are ever written into CSS, in lower case;
  anything else stored counts as "automatic". No user text reaches the stylesheet.
- No single colour reads at 4.5:1 on both the dark theme's surfaces and the light theme's, so the
  automatic palette has a shade per theme, and a chosen colour is used as is in a theme where it reads
  and otherwise mixed toward white (dark) or black (light) until it does.
- Automatic colours: a character prefers the palette slot its id hashes to (crc32: the same in every
  process), and within a chat members take slots in id order, moving on to the next free one, so a
  chat's speakers differ while the palette lasts.
- The user's speech without a colour keeps the theme's own dialogue colour (--dialogue).
- A merged group reply's speaker marks (`<speaker="Aria">`, app/platform/rendering.py) carry a
  fingerprint of the name (`data-name`, crc32 in hex: never the name itself), and the stylesheet colours
  a member's mark and the speech after it (until the next mark) with its speech colour; a name no
  member has keeps its colour from the name, and its speech the message's.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

from app.platform.core.errors import UserError

COLOUR = re.compile(r"#[0-9a-fA-F]{6}")  # matched whole (fullmatch): "$" would let a newline through
AA = 4.5  # WCAG AA for body text

# Twelve hues, a shade for each theme, each at 5.3:1 or more on every surface a message sits on there
# (tests/unit/test_dialogue.py checks them against the surfaces below).
PALETTE_DARK = (
    "#eb8484", "#ebad84", "#ebcc84", "#ebeb84", "#afeb84", "#84eba6",
    "#84ebd6", "#84daeb", "#84b8eb", "#8d9aec", "#eb84d1", "#eb84a6",
)  # fmt: skip # a table: six hues a row, the same slots in both themes
PALETTE_LIGHT = (
    "#9e1a1a", "#954a18", "#765913", "#606010", "#366911", "#126e30",
    "#116958", "#136676", "#1a5c9e", "#1a2b9e", "#9e1a7d", "#9e1a46",
)  # fmt: skip # a table: six hues a row, the same slots in both themes
# What a message's text sits on, per theme (static/app.css: --bg, --bg-2, --surface, --surface-2 and
# --user-bubble; a test keeps the two in step). A chat's background picture changes nothing: each message
# then sits on its own surface of 86-92% --bg/--surface over the scrim, at worst #23242d (dark, over white)
# and #ebeaef (light, over black), no harsher than the darkest and lightest here.
SURFACES_DARK = ("#0f1015", "#16171f", "#1c1d27", "#242633", "#23253a")
SURFACES_LIGHT = ("#f6f5fa", "#eeedf5", "#ffffff", "#f1eff8", "#ece8fb")


@dataclass(frozen=True)
class Member:
    """A chat's character as the stylesheet needs it: its id, its chosen colour (None: automatic) and
    its name (for a merged reply's speaker marks)."""

    id: int
    colour: str | None = None
    name: str = ""


def name_key(name: str) -> str:
    """What a speaker mark and the stylesheet both know a name by: its fingerprint, not its text."""
    return f"{zlib.crc32(name.strip().lower().encode()):08x}"


def checked_colour(value: str | None) -> str | None:
    """A colour as stored: "#rrggbb" in lower case, or None (automatic) for "" or None. Anything
    else is refused with a sentence (UserError is a ValueError: the API's 422 carries it too)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if not COLOUR.fullmatch(value):
        raise UserError("A speech colour is written #rrggbb (for example #e0a3ff), or left automatic.")
    return value.lower()


# For an input model: `colour: SpeechColour = None`.
SpeechColour = Annotated[str | None, AfterValidator(checked_colour)]


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def _luminance(colour: str) -> float:
    def linear(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = _rgb(colour)
    return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours, 1 to 21."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@functools.lru_cache(maxsize=1024)
def readable(colour: str, surfaces: tuple[str, ...], *, toward: str) -> str:
    """`colour` if it reads at AA on every surface, else the least mix of it toward `toward` (white
    on a dark theme, black on a light one) that does. Memoized: a chat page asks for its speakers'
    colours on every view, and the search costs a hundred luminances."""
    r, g, b = _rgb(colour)
    tr, tg, tb = _rgb(toward)
    for step in range(21):
        t = step / 20
        mixed = "#" + "".join(f"{round(c + (to - c) * t):02x}" for c, to in ((r, tr), (g, tg), (b, tb)))
        if min(contrast(mixed, s) for s in surfaces) >= AA:
            return mixed
    return toward


def auto_slots(ids: Sequence[int]) -> dict[int, int]:
    """Palette slot per character id: the slot its id hashes to, or the next free one in the chat."""
    size = len(PALETTE_DARK)
    taken: set[int] = set()
    slots: dict[int, int] = {}
    for character_id in sorted(set(ids)):
        preferred = zlib.crc32(f"character-{character_id}".encode()) % size
        slot = next(
            (s % size for s in range(preferred, preferred + size) if s % size not in taken), preferred
        )
        taken.add(slot)
        slots[character_id] = slot
    return slots


def _valid(colour: str | None) -> str | None:
    try:
        return checked_colour(colour)
    except UserError:
        return None


def _rules(key: str, dark: str, light: str, name: str = "") -> list[str]:
    rules = [
        f'.msg[data-speaker="{key}"]{{--speech:{dark}}}',
        f'[data-theme="light"] .msg[data-speaker="{key}"]{{--speech:{light}}}',
    ]
    if name.strip():
        mark, speech = (f'.{kind}[data-name="{name_key(name)}"]' for kind in ("speaker-mark", "dialogue"))
        rules += [
            f"{mark}{{color:{dark}}}",
            f'[data-theme="light"] {mark}{{color:{light}}}',
            f"{speech}{{--speech:{dark}}}",
            f'[data-theme="light"] {speech}{{--speech:{light}}}',
        ]
    return rules


def speakers_css(members: Sequence[Member], user_colour: str | None) -> str:
    """The stylesheet: a `--speech` per member (chosen or automatic) and the user's, if chosen."""
    lines = ["/* Speech colours of this chat's speakers (app/platform/core/speech.py) */"]
    slots = auto_slots([m.id for m in members if _valid(m.colour) is None])
    for member in sorted(members, key=lambda m: m.id):
        key = f"c{int(member.id)}"
        if (colour := _valid(member.colour)) is not None:
            lines += _rules(
                key,
                readable(colour, SURFACES_DARK, toward="#ffffff"),
                readable(colour, SURFACES_LIGHT, toward="#000000"),
                member.name,
            )
        else:
            slot = slots[member.id]
            lines += _rules(key, PALETTE_DARK[slot], PALETTE_LIGHT[slot], member.name)
    if (colour := _valid(user_colour)) is not None:
        lines += _rules(
            "u",
            readable(colour, SURFACES_DARK, toward="#ffffff"),
            readable(colour, SURFACES_LIGHT, toward="#000000"),
        )
    return "\n".join(lines) + "\n"


def css_version(css: str) -> str:
    """A short fingerprint of the stylesheet for its address: a changed colour is a new address."""
    return f"{zlib.crc32(css.encode()):08x}"

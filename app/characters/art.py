"""A character's pictures for the roleplay view (issue 29): the full-size art shown beside the story
and the expression images, uploaded, removed, and picked for a reply.

Every upload goes through `store_image` (its size and format limits). Expression files are all
checked by name before any is stored, and a refusal raises, so the request's transaction stores
none of them: a batch lands whole or not at all. A replaced picture's old image row stays, as a
replaced avatar's does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlmodel import Session

from app.characters.core.expressions import EXPRESSIONS, art_image, expression_of_file_name, reply_expression
from app.characters.models import Character
from app.characters.service import get_character
from app.images.service import store_image
from app.platform.core.errors import UserError
from app.platform.timeutil import utcnow

MAX_EXPRESSION_FILES = len(EXPRESSIONS)  # one picture per expression name at most


@dataclass(frozen=True)
class Upload:
    file_name: str
    data: bytes


def set_art(session: Session, character_id: int, raw: bytes) -> Character:
    char = get_character(session, character_id)
    char.art_id = store_image(session, raw).id
    return _touched(session, char)


def remove_art(session: Session, character_id: int) -> Character:
    char = get_character(session, character_id)
    char.art_id = None
    return _touched(session, char)


def _named(uploads: Sequence[Upload], chosen: str) -> list[tuple[str, Upload]]:
    """Each upload with the expression it is for: the chosen name, or each file's own name."""
    if not uploads:
        raise UserError(
            "Choose a picture (or several named like SillyTavern's sprites: joy.png, anger.webp)."
        )
    if len(uploads) > MAX_EXPRESSION_FILES:
        raise UserError(f"{len(uploads)} files at once; at most {MAX_EXPRESSION_FILES}, one per expression.")
    if chosen:
        if chosen not in EXPRESSIONS:
            raise UserError(f"“{chosen[:40]}” is not an expression name.")
        if len(uploads) > 1:
            raise UserError(
                f"{len(uploads)} files for one expression ({chosen}): choose one, or pick “By file name”."
            )
        return [(chosen, uploads[0])]
    named = []
    for upload in uploads:
        name = expression_of_file_name(upload.file_name)
        if name is None:
            raise UserError(
                f"“{upload.file_name[:80]}”: its name is not an expression name, so nothing was stored. "
                "Name each file after one in the Expression list (joy.png, anger.webp), or pick it there."
            )
        named.append((name, upload))
    twice = sorted({n for n, _ in named if sum(1 for m, _ in named if m == n) > 1})
    if twice:
        raise UserError(f"Two files for {', '.join(twice)}; nothing was stored.")
    return named


def add_expressions(
    session: Session, character_id: int, uploads: Sequence[Upload], *, name: str = ""
) -> Character:
    """Store expression pictures, replacing those of the same names; all or none."""
    char = get_character(session, character_id)
    named = _named(uploads, name.strip().lower())
    stored = {n: store_image(session, u.data).id for n, u in named}
    char.expressions = {**(char.expressions or {}), **stored}
    return _touched(session, char)


def remove_expression(session: Session, character_id: int, name: str) -> Character:
    char = get_character(session, character_id)
    if name not in (char.expressions or {}):
        raise UserError(f"{char.name} has no picture for “{name[:40]}”.")
    char.expressions = {n: i for n, i in char.expressions.items() if n != name}
    return _touched(session, char)


def _touched(session: Session, char: Character) -> Character:
    char.updated_at = utcnow()
    session.add(char)
    session.flush()
    return char


def shown_expressions(char: Character) -> list[tuple[str, int]]:
    """The character's expression pictures, in SillyTavern's order of names."""
    have = char.expressions or {}
    return [(n, have[n]) for n in EXPRESSIONS if n in have]


def art_picker(
    characters: Sequence[Character], *, expressions_on: bool
) -> Callable[[int | None, str], str | None]:
    """For the chat page: the picture beside the story after a reply by `character_id` with `text`:
    "/images/ID", "" when that member has no picture at all, None when it is no member (a narrator's
    line: the picture stays as it was). With expressions on, the reply's expression picks among the
    member's expression images (the tag, else the word rule)."""
    members = {c.id: c for c in characters}

    def pick(character_id: int | None, text: str) -> str | None:
        char = members.get(character_id) if character_id is not None else None
        if char is None:
            return None
        pictured = char.expressions or {}
        name = reply_expression(text) if expressions_on and pictured else None
        image = art_image(art_id=char.art_id, avatar_id=char.avatar_id, expressions=pictured, name=name)
        return f"/images/{image}" if image else ""

    return pick

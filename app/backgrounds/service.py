"""Backgrounds: uploading and deleting pictures, and what a chat shows behind its messages.

A chat's choice follows its first character's default when it has none of its own (app/backgrounds/
core/choice.py names the forms). An uploaded background is found by id; a SillyTavern name ("st:")
by file name, case-insensitively (SillyTavern's folders are often on Windows), the newest upload
of that name winning: uploading the file later shows it without touching the chat."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, func, select

from app.backgrounds.core import choice
from app.backgrounds.core.builtin import BUILTINS, Builtin, builtin, builtin_by_file
from app.backgrounds.models import Background
from app.images.models import Image
from app.images.service import store_image
from app.platform.core.errors import NotFound, UserError

# Each upload is up to 12 MB in the database: a few hundred is a large collection already.
MAX_BACKGROUNDS = 500


@dataclass(frozen=True)
class Backdrop:
    """What a chat shows: the picture's address and a name for the settings to show."""

    url: str
    label: str


def list_backgrounds(session: Session) -> list[Background]:
    return list(session.exec(select(Background).order_by(col(Background.id).desc())))


def get_background(session: Session, background_id: int) -> Background:
    background = session.get(Background, background_id)
    if background is None:
        raise NotFound(f"Background {background_id} does not exist.")
    return background


def upload_background(session: Session, raw: bytes, file_name: str | None) -> Background:
    """Store an uploaded picture as a background; store_image refuses what is not a picture or is
    too large, before anything is written."""
    count = session.exec(select(func.count()).select_from(Background)).one()
    if count >= MAX_BACKGROUNDS:
        raise UserError(f"Sugo keeps at most {MAX_BACKGROUNDS} backgrounds; delete some first.")
    image = store_image(session, raw)
    name = choice.clean_file_name(file_name or "") or f"background-{image.id}.{image.mime.split('/')[1]}"
    background = Background(name=name, image_id=image.id)
    session.add(background)
    session.flush()
    return background


def delete_background(session: Session, background_id: int) -> None:
    """The background and its picture (no other row uses an upload's picture); chats and characters
    that chose it show none from then on."""
    background = get_background(session, background_id)
    image = session.get(Image, background.image_id)
    session.delete(background)
    if image is not None:
        session.delete(image)
    session.flush()


def find_by_name(session: Session, file_name: str) -> Background | None:
    return session.exec(
        select(Background)
        .where(func.lower(Background.name) == file_name.lower())
        .order_by(col(Background.id).desc())
        .limit(1)
    ).first()


def resolve(session: Session, value: str | None) -> Backdrop | None:
    """The picture a stored choice names, or None (none chosen, or one since deleted)."""
    if not value or value == choice.NONE:
        return None
    kind, _, rest = value.partition(":")
    if kind == "builtin":
        shipped = builtin(rest)
        return Backdrop(shipped.url, shipped.label) if shipped else None
    if kind == "image" and rest.isdigit():
        background = session.get(Background, int(rest))
    elif kind == "st":
        background = find_by_name(session, rest)
    else:
        return None
    return Backdrop(f"/images/{background.image_id}", background.name) if background else None


def chat_choice(chat_value: str, character_default: str | None) -> str | None:
    """The choice that applies to a chat: its own, else its first character's default."""
    return chat_value or character_default


def chat_backdrop(session: Session, chat_value: str, character_default: str | None) -> Backdrop | None:
    return resolve(session, chat_choice(chat_value, character_default))


def missing_st_name(session: Session, chat_value: str) -> str | None:
    """An imported chat's SillyTavern background not uploaded yet: its file name, to ask for it."""
    if chat_value.startswith("st:") and find_by_name(session, chat_value[3:]) is None:
        return chat_value[3:]
    return None


def imported_choice(session: Session, file_name: str) -> str:
    """A SillyTavern chat's background by file name: an upload of that name, a shipped one, or the
    name kept for a later upload."""
    if (background := find_by_name(session, file_name)) is not None:
        return f"image:{background.id}"
    if (shipped := builtin_by_file(file_name)) is not None:
        return f"builtin:{shipped.name}"
    return f"st:{file_name}"


def exported_file_name(session: Session, chat_value: str) -> str | None:
    """The file name SillyTavern's `custom_background` gets for a chat's own choice; None for none
    and for the character's default (SillyTavern then shows its global background)."""
    kind, _, rest = chat_value.partition(":")
    if kind == "builtin":
        shipped = builtin(rest)
        return shipped.file_name if shipped else None
    if kind == "image" and rest.isdigit():
        background = session.get(Background, int(rest))
        return background.name if background else None
    if kind == "st":
        return rest
    return None


def check_character_default(value: str) -> str | None:
    try:
        return choice.check_character_default(value)
    except ValueError as err:
        raise UserError(str(err)) from err


@dataclass(frozen=True)
class Picker:
    """Chat Settings' Background section: the chat's choice and what it may choose from."""

    chosen: str
    default: Backdrop | None  # the first character's default, shown beside "the character's default"
    shipped: tuple[Builtin, ...]
    uploaded: list[Background]
    missing: str | None  # an imported SillyTavern background's file name, not uploaded yet


def picker(session: Session, chat_value: str, character_default: str | None) -> Picker:
    return Picker(
        chosen=chat_value,
        default=resolve(session, character_default),
        shipped=BUILTINS,
        uploaded=list_backgrounds(session),
        missing=missing_st_name(session, chat_value),
    )

"""Characters: create, edit, import and export SillyTavern cards (JSON and PNG)."""

from __future__ import annotations

from sqlmodel import Session, col, select

from app.characters.core import cards
from app.characters.core.cards import talkativeness
from app.characters.models import Character
from app.characters.schemas import CharacterIn, CharacterRead
from app.images.models import Image
from app.images.service import store_image
from app.platform.core.errors import NotFound, UserError
from app.platform.timeutil import utcnow

_NOTE_FIELDS = ("character_note", "character_note_depth", "character_note_role", "talkativeness")
_CARD_FIELDS = tuple(f for f in CharacterIn.model_fields if f not in _NOTE_FIELDS)


def character_note(char: Character) -> tuple[str, int, str]:
    """(text, depth, role) of the card's Character's Note; ("", 4, "system") when it has none."""
    note = char.extensions.get("depth_prompt") if isinstance(char.extensions, dict) else None
    if not isinstance(note, dict):
        return "", 4, "system"
    depth = note.get("depth", 4)
    role = note.get("role", "system")
    return (
        str(note.get("prompt") or ""),
        depth if isinstance(depth, int) else 4,
        role if role in {"system", "user", "assistant"} else "system",
    )


def _apply_note(char: Character, data: CharacterIn) -> None:
    if data.character_note is None and data.character_note_depth is None and data.character_note_role is None:
        return
    text, depth, role = character_note(char)
    existing = char.extensions.get("depth_prompt")
    if not isinstance(existing, dict) and not (data.character_note or "").strip():
        return  # nothing to write, and no key to keep in step
    note = dict(existing) if isinstance(existing, dict) else {}
    note["prompt"] = data.character_note if data.character_note is not None else text
    note["depth"] = data.character_note_depth if data.character_note_depth is not None else depth
    note["role"] = data.character_note_role or role
    char.extensions = {**char.extensions, "depth_prompt": note}


def _stated_talkativeness(char: Character) -> object:
    extensions = char.extensions if isinstance(char.extensions, dict) else {}
    top = char.card_top_extra if isinstance(char.card_top_extra, dict) else {}
    return extensions.get("talkativeness", top.get("talkativeness"))


def card_talkativeness(char: Character) -> float:
    """The card's talkativeness (`data.extensions.talkativeness`, or SillyTavern's flat copy at the
    card's top level), 0.5 when it has none or none that reads as a number."""
    return talkativeness(_stated_talkativeness(char))


def stated_talkativeness(char: Character) -> float | None:
    """The card's own talkativeness, None when it states none (the editor then shows the default as a
    hint and saving leaves the card as it was)."""
    return None if _stated_talkativeness(char) is None else card_talkativeness(char)


def _apply_talkativeness(char: Character, data: CharacterIn) -> None:
    if data.talkativeness is None:
        return
    char.extensions = {**char.extensions, "talkativeness": data.talkativeness}
    if isinstance(char.card_top_extra, dict) and "talkativeness" in char.card_top_extra:
        # SillyTavern's flat copy, kept for export, says the same (as the text SillyTavern writes).
        char.card_top_extra = {**char.card_top_extra, "talkativeness": str(data.talkativeness)}


def avatar_url(image_id: int | None) -> str | None:
    return f"/images/{image_id}" if image_id else None


def to_read(char: Character) -> CharacterRead:
    note, depth, role = character_note(char)
    return CharacterRead(
        id=char.id,
        **{f: getattr(char, f) for f in _CARD_FIELDS},
        character_note=note,
        character_note_depth=depth,
        character_note_role=role,
        talkativeness=card_talkativeness(char),
        avatar_url=avatar_url(char.avatar_id),
        art_url=avatar_url(char.art_id),
        expression_urls={n: f"/images/{i}" for n, i in (char.expressions or {}).items()},
        extensions=char.extensions,
        has_character_book=bool(char.character_book),
        card_spec=char.card_spec,
        created_at=char.created_at,
        updated_at=char.updated_at,
    )


def list_characters(session: Session, *, query: str | None = None) -> list[Character]:
    stmt = select(Character).order_by(Character.name)
    if query:
        stmt = stmt.where(col(Character.name).icontains(query.strip()))
    return list(session.exec(stmt))


def get_character(session: Session, character_id: int) -> Character:
    char = session.get(Character, character_id)
    if char is None:
        raise NotFound(f"Character {character_id} does not exist.")
    return char


def create_character(session: Session, data: CharacterIn, *, avatar: bytes | None = None) -> Character:
    char = Character(**data.model_dump(exclude=set(_NOTE_FIELDS)))
    _apply_note(char, data)
    _apply_talkativeness(char, data)
    if avatar:
        char.avatar_id = store_image(session, avatar).id
    session.add(char)
    session.flush()
    return char


def update_character(
    session: Session, character_id: int, data: CharacterIn, *, avatar: bytes | None = None
) -> Character:
    char = get_character(session, character_id)
    # A client that does not know speech colours (an older form, a script) leaves the colour alone.
    kept = set() if "colour" in data.model_fields_set else {"colour"}
    for field, value in data.model_dump(exclude=set(_NOTE_FIELDS) | kept).items():
        setattr(char, field, value)
    _apply_note(char, data)
    _apply_talkativeness(char, data)
    if avatar:
        char.avatar_id = store_image(session, avatar).id
    char.updated_at = utcnow()
    session.add(char)
    session.flush()
    return char


def delete_character(session: Session, character_id: int) -> None:
    session.delete(get_character(session, character_id))
    session.flush()


def import_card(session: Session, raw: bytes, filename: str | None = None) -> Character:
    """One transaction: a refused card creates nothing, not even its picture. The card's embedded
    lorebook stays in `character_book`; app/lore/card_books.py makes it a lorebook."""
    try:
        card = cards.read_card(raw, filename)
    except cards.CardError as err:
        raise UserError(str(err)) from err
    char = Character(
        name=card.name.strip() or "Unnamed",
        description=card.description,
        personality=card.personality,
        scenario=card.scenario,
        first_mes=card.first_mes,
        mes_example=card.mes_example,
        creator_notes=card.creator_notes,
        system_prompt=card.system_prompt,
        post_history_instructions=card.post_history_instructions,
        alternate_greetings=list(card.alternate_greetings),
        tags=list(card.tags),
        creator=card.creator,
        character_version=card.character_version,
        extensions=dict(card.extensions),
        character_book=card.character_book,
        card_spec=card.spec if card.spec in {"chara_card_v2", "chara_card_v3"} else "chara_card_v2",
        card_data_extra=dict(card.data_extra),
        card_top_extra=dict(card.top_extra),
    )
    if card.image:
        char.avatar_id = store_image(session, card.image).id
    char.st_avatar = st_avatar_key(filename, char.name)
    session.add(char)
    session.flush()
    return char


def st_avatar_key(filename: str | None, name: str) -> str:
    """SillyTavern's avatar key for a card: the PNG's file name, as its group files name members; a
    card from JSON (or without a name) gets the `<name>.png` SillyTavern would give it."""
    base = (filename or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
    if base.lower().endswith(".png") and len(base) <= 255:
        return base
    return f"{name[:200]}.png"


def avatar_key(char: Character) -> str:
    """The key SillyTavern's files name this character by."""
    return char.st_avatar or st_avatar_key(None, char.name)


def to_card(char: Character, character_book: dict | None = None) -> cards.CardData:
    return cards.CardData(
        spec=char.card_spec,
        spec_version="3.0" if char.card_spec == "chara_card_v3" else "2.0",
        name=char.name,
        description=char.description,
        personality=char.personality,
        scenario=char.scenario,
        first_mes=char.first_mes,
        mes_example=char.mes_example,
        creator_notes=char.creator_notes,
        system_prompt=char.system_prompt,
        post_history_instructions=char.post_history_instructions,
        alternate_greetings=list(char.alternate_greetings),
        tags=list(char.tags),
        creator=char.creator,
        character_version=char.character_version,
        extensions=dict(char.extensions),
        character_book=character_book if character_book is not None else char.character_book,
        data_extra=dict(char.card_data_extra),
        top_extra=dict(char.card_top_extra),
    )


def export_card_json(
    char: Character, *, spec: str | None = None, character_book: dict | None = None
) -> bytes:
    chosen = spec or ("v3" if char.card_spec == "chara_card_v3" else "v2")
    if chosen not in {"v2", "v3"}:
        raise UserError("Export format must be v2 or v3.")
    return cards.card_to_json_bytes(to_card(char, character_book), spec=chosen)  # type: ignore[arg-type]


def export_card_png(session: Session, char: Character, *, character_book: dict | None = None) -> bytes:
    image = session.get(Image, char.avatar_id) if char.avatar_id else None
    return cards.write_card_png(to_card(char, character_book), image.data if image else None)


def greetings(char: Character) -> list[str]:
    """The first message and its alternates: they become swipes of the chat's opening message."""
    return [g for g in [char.first_mes, *char.alternate_greetings] if g and g.strip()]

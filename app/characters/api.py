from typing import Literal

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.responses import Response

from app.characters import art, service
from app.characters.schemas import CharacterIn, CharacterRead
from app.lore import card_books
from app.memory.scenes.renames import character_renamed
from app.platform.core.downloads import attachment
from app.web.deps import SessionDep

router = APIRouter(prefix="/api/characters", tags=["characters"])


@router.get("", response_model=list[CharacterRead])
def list_characters(session: SessionDep, q: str | None = None) -> list[CharacterRead]:
    """List characters, optionally filtered by name."""
    return [service.to_read(c) for c in service.list_characters(session, query=q)]


@router.post("", response_model=CharacterRead, status_code=201)
def create_character(data: CharacterIn, session: SessionDep) -> CharacterRead:
    """Write a new character."""
    return service.to_read(service.create_character(session, data))


class CharacterImported(CharacterRead):
    notes: list[str] = []  # what the import changed: lorebook entries turned off, and why


@router.post("/import", response_model=CharacterImported, status_code=201)
def import_character(session: SessionDep, file: UploadFile = File(...)) -> CharacterImported:
    """Import a SillyTavern Character Card V1/V2/V3 (PNG or JSON). Entries of its lorebook with a
    `/regex/` key Sugo cannot run come in turned off, each named in `notes`."""
    raw = file.file.read()
    imported = card_books.import_card(session, raw, file.filename)
    return CharacterImported(**service.to_read(imported.character).model_dump(), notes=imported.notes)


@router.get("/{character_id}", response_model=CharacterRead)
def show_character(character_id: int, session: SessionDep) -> CharacterRead:
    """One character."""
    return service.to_read(service.get_character(session, character_id))


@router.put("/{character_id}", response_model=CharacterRead)
def update_character(character_id: int, data: CharacterIn, session: SessionDep) -> CharacterRead:
    """Edit a character's card fields (extensions and unknown card fields are kept)."""
    old_name = service.get_character(session, character_id).name
    char = service.update_character(session, character_id, data)
    character_renamed(session, character_id, old_name, char.name)  # its scenes know it by name
    return service.to_read(char)


@router.post("/{character_id}/avatar", response_model=CharacterRead)
def upload_character_avatar(
    character_id: int, session: SessionDep, file: UploadFile = File(...)
) -> CharacterRead:
    """Replace the character's picture."""
    char = service.get_character(session, character_id)
    # As stored, not checked again: a new picture must not depend on an imported card's name.
    data = CharacterIn.model_construct(**service.to_read(char).model_dump())
    return service.to_read(service.update_character(session, character_id, data, avatar=file.file.read()))


@router.post("/{character_id}/art", response_model=CharacterRead)
def upload_character_art(
    character_id: int, session: SessionDep, file: UploadFile = File(...)
) -> CharacterRead:
    """Set the full-size picture shown beside the story."""
    return service.to_read(art.set_art(session, character_id, file.file.read()))


@router.delete("/{character_id}/art", response_model=CharacterRead)
def remove_character_art(character_id: int, session: SessionDep) -> CharacterRead:
    """Remove the art: the card's picture stands in again."""
    return service.to_read(art.remove_art(session, character_id))


@router.post("/{character_id}/expressions", response_model=CharacterRead)
def upload_character_expressions(
    character_id: int,
    session: SessionDep,
    files: list[UploadFile] = File(...),
    name: str = Form("", max_length=40),
) -> CharacterRead:
    """Store expression pictures: one for `name`, or several named by their files (joy.png); all or none."""
    uploads = [art.Upload(f.filename or "", f.file.read()) for f in files]
    return service.to_read(art.add_expressions(session, character_id, uploads, name=name))


@router.delete("/{character_id}/expressions/{name}", response_model=CharacterRead)
def remove_character_expression(character_id: int, name: str, session: SessionDep) -> CharacterRead:
    """Remove one expression's picture."""
    return service.to_read(art.remove_expression(session, character_id, name))


@router.delete("/{character_id}", status_code=204)
def delete_character(character_id: int, session: SessionDep) -> None:
    """Delete a character (chats keep their messages)."""
    service.delete_character(session, character_id)


@router.get("/{character_id}/export")
def export_character(
    character_id: int,
    session: SessionDep,
    format: Literal["png", "json"] = "png",
    spec: Literal["v2", "v3"] | None = None,
) -> Response:
    """Export as a SillyTavern card: PNG (chara + ccv3 chunks) or JSON (V2 or V3)."""
    char = service.get_character(session, character_id)
    body = card_books.export_card(session, char, fmt=format, spec=spec)
    mime, ext = ("image/png", "png") if format == "png" else ("application/json", "json")
    return Response(
        body,
        media_type=mime,
        headers={"Content-Disposition": attachment(char.name, ext, fallback="character")},
    )

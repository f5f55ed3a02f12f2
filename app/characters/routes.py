"""Character pages."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from app.backgrounds import service as backgrounds
from app.backgrounds.core.builtin import BUILTINS
from app.characters import art, service
from app.characters.core.expressions import EXPRESSIONS
from app.characters.models import Character
from app.characters.schemas import CharacterIn
from app.lore import card_books
from app.lore.service import books_of_character
from app.memory.scenes.renames import character_renamed
from app.platform import forms
from app.platform.core.errors import UserError
from app.web.deps import SessionDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)
# What the page's pictures section (art beside the story, expression images) reads.
_PICTURES = {"expressions_of": art.shown_expressions, "expression_names": EXPRESSIONS}


def _form_input(form) -> CharacterIn:
    greetings = [
        g.strip() for g in forms.text(form, "alternate_greetings").replace("\r\n", "\n").split("\n---\n")
    ]
    try:
        return CharacterIn(
            **{
                f: forms.text(form, f)
                for f in (
                    "name",
                    "description",
                    "personality",
                    "scenario",
                    "first_mes",
                    "mes_example",
                    "creator_notes",
                    "system_prompt",
                    "post_history_instructions",
                    "creator",
                    "character_version",
                )
            },
            alternate_greetings=[g for g in greetings if g],
            tags=[t.strip() for t in forms.text(form, "tags").split(",") if t.strip()],
            character_note=forms.text(form, "character_note"),
            character_note_depth=forms.optional_number(form, "character_note_depth", int),
            character_note_role=forms.text(form, "character_note_role") or None,
            talkativeness=forms.optional_number(form, "talkativeness"),
            **forms.speech_colour(form),
        )
    except ValidationError as err:
        raise forms.refused(err, "A character needs a name.") from err


def _background_choices(session: Session) -> dict:
    """The Default background select's options: the shipped backgrounds and the uploaded ones."""
    return {"bg_shipped": BUILTINS, "bg_uploaded": backgrounds.list_backgrounds(session)}


def _set_background(session: Session, char: Character, form) -> None:
    # A form without the select (a script's) leaves the character's default as it was. A refused value
    # fails the request, whose transaction then keeps nothing of it (the character's other changes too).
    if "background" in form:
        char.background = backgrounds.check_character_default(forms.text(form, "background"))
        session.add(char)
        session.flush()


@router.get("/characters")
def list_characters_page(
    request: Request, session: SessionDep, hx: HxRequest, q: str | None = None
) -> HTMLResponse:
    """All characters, with card import; the search box asks for the list alone."""
    return render(
        request,
        "characters/list.html",
        {"characters": service.list_characters(session, query=q), "q": q},
        block="character_list" if hx else None,
    )


@router.get("/characters/new")
def new_character_page(request: Request, session: SessionDep) -> HTMLResponse:
    """Write a character from scratch."""
    return render(
        request,
        "characters/edit.html",
        {
            "char": None,
            "note_of": service.character_note,
            "talkativeness_of": service.stated_talkativeness,
            **_PICTURES,
            **_background_choices(session),
        },
    )


@router.post("/characters")
async def create_character_page(request: Request, session: SessionDep) -> Response:
    """Save a new character and open it."""
    form = await request.form()
    char = service.create_character(session, _form_input(form), avatar=await forms.upload(form, "avatar"))
    _set_background(session, char, form)
    return Response(status_code=204, headers={"HX-Redirect": f"/characters/{char.id}"})


@router.post("/characters/import")
async def import_character_page(request: Request, session: SessionDep) -> Response:
    """Import a card and open the character."""
    form = await request.form()
    raw = await forms.upload(form, "file")
    if not raw:
        raise UserError("Choose a card file (PNG or JSON) to import.")
    upload = form.get("file")
    # A card's book may hold thousands of entries: parsed and written on a thread.
    imported = await run_in_threadpool(
        card_books.import_card, session, raw, getattr(upload, "filename", None)
    )
    char = imported.character
    # The character page says the card's book was one already stored (linked, not copied).
    shown = f"/characters/{char.id}" + (
        f"?reused_book={imported.reused_book}" if imported.reused_book else ""
    )
    return Response(status_code=204, headers={"HX-Redirect": shown})


@router.get("/characters/{character_id}")
def edit_character_page(
    character_id: int, request: Request, session: SessionDep, reused_book: str = ""
) -> HTMLResponse:
    """View and edit a character; after a card import that linked a stored book, says so."""
    char = service.get_character(session, character_id)
    lorebooks = books_of_character(session, character_id)
    reused = next((b for b in lorebooks if str(b.id) == reused_book), None)
    return render(
        request,
        "characters/edit.html",
        {
            "char": char,
            "note_of": service.character_note,
            "talkativeness_of": service.stated_talkativeness,
            "lorebooks": lorebooks,
            "reused_book": reused,
            **_PICTURES,
            **_background_choices(session),
        },
    )


@router.post("/characters/{character_id}")
async def update_character_page(
    character_id: int, request: Request, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Save changes to a character: for HTMX, the page's content (name, picture and form all may change)."""
    form = await request.form()
    old_name = service.get_character(session, character_id).name
    char = service.update_character(
        session, character_id, _form_input(form), avatar=await forms.upload(form, "avatar")
    )
    character_renamed(session, character_id, old_name, char.name)  # its scenes know it by name
    _set_background(session, char, form)
    ctx = {
        "char": char,
        "saved": True,
        "note_of": service.character_note,
        "talkativeness_of": service.stated_talkativeness,
        "lorebooks": books_of_character(session, character_id),
        **_PICTURES,
        **_background_choices(session),
    }
    return (
        render_blocks(request, "characters/edit.html", ctx, ["content"])
        if hx
        else render(request, "characters/edit.html", ctx)
    )


@router.post("/characters/{character_id}/delete")
def delete_character_page(character_id: int, session: SessionDep) -> Response:
    """Delete a character."""
    service.delete_character(session, character_id)
    return Response(status_code=204, headers={"HX-Redirect": "/characters"})


def _pictures(request: Request, char) -> HTMLResponse:
    return render(request, "characters/edit.html", {"char": char, **_PICTURES}, block="character_pictures")


@router.post("/characters/{character_id}/art")
async def upload_character_art(character_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Store the full-size picture shown beside the story."""
    raw = await forms.upload(await request.form(), "art")
    if not raw:
        raise UserError("Choose a picture to show beside the story.")
    return _pictures(request, art.set_art(session, character_id, raw))


@router.post("/characters/{character_id}/art/delete")
def remove_character_art(character_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Go back to the card's image beside the story."""
    return _pictures(request, art.remove_art(session, character_id))


@router.post("/characters/{character_id}/expressions")
async def upload_character_expressions(
    character_id: int, request: Request, session: SessionDep
) -> HTMLResponse:
    """Store expression pictures: one for the chosen name, or several named by their files."""
    form = await request.form()
    uploads = [
        art.Upload(f.filename or "", data)
        for f in form.getlist("files")
        if isinstance(f, UploadFile) and f.filename and (data := await forms.upload_data(f))
    ]
    char = art.add_expressions(session, character_id, uploads, name=forms.text(form, "name"))
    return _pictures(request, char)


@router.post("/characters/{character_id}/expressions/{name}/delete")
def remove_character_expression(
    character_id: int, name: str, request: Request, session: SessionDep
) -> HTMLResponse:
    """Remove one expression's picture."""
    return _pictures(request, art.remove_expression(session, character_id, name))

"""Persona page."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from app.personas import service
from app.personas.schemas import PersonaIn
from app.platform import forms
from app.web.deps import SessionDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)


def _page(request: Request, session, *, hx: bool = False, oob: tuple[str, ...] = (), **extra) -> HTMLResponse:
    """The page; for HTMX, the persona list (a default badge may move to another card) and `oob`."""
    ctx = {
        "personas": service.list_personas(session),
        "time_zones": sorted(service.known_time_zones()),
        "time_zone_of": service.persona_time_zone,
        **extra,
    }
    if hx:
        return render_blocks(request, "personas/list.html", ctx, ["persona_list"], oob=oob)
    return render(request, "personas/list.html", ctx)


def _form_input(form) -> PersonaIn:
    try:
        return PersonaIn(
            name=forms.text(form, "name"),
            description=forms.text(form, "description"),
            is_default=forms.checkbox(form, "is_default"),
            pronouns=forms.text(form, "pronouns"),
            form_of_address=forms.text(form, "form_of_address"),
            time_zone=forms.text(form, "time_zone"),
            deliberate_tools=forms.text(form, "deliberate_tools") or "",
            **forms.speech_colour(form),
        )
    except ValidationError as err:
        raise forms.refused(err, "A persona needs a name.") from err


@router.get("/personas")
def list_personas_page(request: Request, session: SessionDep) -> HTMLResponse:
    """All personas, editable in place."""
    return _page(request, session)


@router.post("/personas")
async def create_persona_page(request: Request, session: SessionDep, hx: HxRequest) -> HTMLResponse:
    """Add a persona."""
    form = await request.form()
    persona = service.create_persona(session, _form_input(form), avatar=await forms.upload(form, "avatar"))
    # An empty form for the next one, saying beside its button who was added.
    return _page(request, session, hx=hx, oob=("new_persona_form",), added=persona.name)


@router.post("/personas/{persona_id}")
async def update_persona_page(
    persona_id: int, request: Request, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Save a persona."""
    form = await request.form()
    service.update_persona(session, persona_id, _form_input(form), avatar=await forms.upload(form, "avatar"))
    return _page(request, session, hx=hx, saved_id=persona_id)


@router.post("/personas/{persona_id}/delete")
def delete_persona_page(
    persona_id: int, request: Request, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Delete a persona."""
    service.delete_persona(session, persona_id)
    return _page(request, session, hx=hx)

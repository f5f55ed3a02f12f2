from fastapi import APIRouter, File, UploadFile

from app.personas import service
from app.personas.schemas import PersonaIn, PersonaRead
from app.web.deps import SessionDep

router = APIRouter(prefix="/api/personas", tags=["personas"])


@router.get("", response_model=list[PersonaRead])
def list_personas(session: SessionDep) -> list[PersonaRead]:
    """List personas, the default first."""
    return [service.to_read(p) for p in service.list_personas(session)]


@router.post("", response_model=PersonaRead, status_code=201)
def create_persona(data: PersonaIn, session: SessionDep) -> PersonaRead:
    """Add a persona; the first one becomes the default."""
    return service.to_read(service.create_persona(session, data))


@router.get("/{persona_id}", response_model=PersonaRead)
def show_persona(persona_id: int, session: SessionDep) -> PersonaRead:
    """One persona."""
    return service.to_read(service.get_persona(session, persona_id))


@router.put("/{persona_id}", response_model=PersonaRead)
def update_persona(persona_id: int, data: PersonaIn, session: SessionDep) -> PersonaRead:
    """Edit a persona."""
    return service.to_read(service.update_persona(session, persona_id, data))


@router.post("/{persona_id}/avatar", response_model=PersonaRead)
def upload_persona_avatar(persona_id: int, session: SessionDep, file: UploadFile = File(...)) -> PersonaRead:
    """Replace the persona's picture."""
    p = service.get_persona(session, persona_id)
    data = PersonaIn.model_construct(
        name=p.name, description=p.description, is_default=p.is_default
    )  # as stored
    return service.to_read(service.update_persona(session, persona_id, data, avatar=file.file.read()))


@router.delete("/{persona_id}", status_code=204)
def delete_persona(persona_id: int, session: SessionDep) -> None:
    """Delete a persona."""
    service.delete_persona(session, persona_id)

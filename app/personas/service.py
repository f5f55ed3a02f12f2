from __future__ import annotations

from sqlmodel import Session, select

from app.characters.service import avatar_url
from app.images.service import store_image
from app.personas.models import Persona
from app.personas.schemas import PersonaIn, PersonaRead
from app.platform.core.errors import NotFound
from app.platform.timeutil import utcnow

# Who {{user}} is when no persona exists yet: SillyTavern's default name.
FALLBACK_USER_NAME = "User"


def to_read(persona: Persona) -> PersonaRead:
    return PersonaRead(
        id=persona.id,
        name=persona.name,
        description=persona.description,
        is_default=persona.is_default,
        avatar_url=avatar_url(persona.avatar_id),
    )


def list_personas(session: Session) -> list[Persona]:
    return list(session.exec(select(Persona).order_by(Persona.is_default.desc(), Persona.name)))


def get_persona(session: Session, persona_id: int) -> Persona:
    persona = session.get(Persona, persona_id)
    if persona is None:
        raise NotFound(f"Persona {persona_id} does not exist.")
    return persona


_DEFAULT_PERSONA = select(Persona).where(Persona.is_default == True).limit(1)  # noqa: E712  (built once)


def default_persona(session: Session) -> Persona | None:
    return session.exec(_DEFAULT_PERSONA).first()


def _make_default(session: Session, persona: Persona) -> None:
    for other in session.exec(select(Persona).where(Persona.is_default == True)):  # noqa: E712
        if other.id != persona.id:
            other.is_default = False
            session.add(other)
    persona.is_default = True


def create_persona(session: Session, data: PersonaIn, *, avatar: bytes | None = None) -> Persona:
    first = session.exec(select(Persona.id)).first() is None
    persona = Persona(name=data.name.strip(), description=data.description)
    if avatar:
        persona.avatar_id = store_image(session, avatar).id
    session.add(persona)
    session.flush()
    if data.is_default or first:
        _make_default(session, persona)
    session.flush()
    return persona


def update_persona(
    session: Session, persona_id: int, data: PersonaIn, *, avatar: bytes | None = None
) -> Persona:
    persona = get_persona(session, persona_id)
    persona.name = data.name.strip()
    persona.description = data.description
    if avatar:
        persona.avatar_id = store_image(session, avatar).id
    if data.is_default:
        _make_default(session, persona)
    persona.updated_at = utcnow()
    session.add(persona)
    session.flush()
    return persona


def delete_persona(session: Session, persona_id: int) -> None:
    session.delete(get_persona(session, persona_id))
    session.flush()

from __future__ import annotations

import zoneinfo
from functools import cache

from sqlmodel import Session, select

from app.characters.service import avatar_url
from app.images.service import store_image
from app.personas.core.details import read_time_zone
from app.personas.models import Persona
from app.personas.schemas import PersonaIn, PersonaRead
from app.platform.core.errors import NotFound
from app.platform.timeutil import utcnow

# Who {{user}} is when no persona exists yet: SillyTavern's default name.
FALLBACK_USER_NAME = "User"
DETAIL_FIELDS = ("pronouns", "form_of_address", "time_zone", "deliberate_tools")


@cache
def known_time_zones() -> frozenset[str]:
    """The IANA zone names this machine knows (read once: listing them walks the tz database)."""
    return frozenset(zoneinfo.available_timezones())


def persona_time_zone(persona: Persona | None) -> str:
    return (persona.time_zone or "") if persona is not None else ""


def checked_details(values: dict[str, str | None]) -> dict[str, str | None]:
    """The persona details given (None: not given), checked whole: a known time zone in its stored
    spelling, "" for a field to clear; UserError when one is wrong."""
    checked = dict(values)
    zone = (values.get("time_zone") or "").strip()
    if zone:
        checked["time_zone"] = read_time_zone(zone, known_time_zones())
    return checked


def set_details(persona: Persona, values: dict[str, str | None]) -> None:
    """Write checked details (None: leave; "" clears) to the persona; nothing to a missing column."""
    for name, value in values.items():
        if value is None:
            continue
        setattr(persona, name, value or None)


def to_read(persona: Persona) -> PersonaRead:
    return PersonaRead(
        id=persona.id,
        name=persona.name,
        description=persona.description,
        is_default=persona.is_default,
        pronouns=persona.pronouns,
        form_of_address=persona.form_of_address,
        time_zone=persona_time_zone(persona) or None,
        deliberate_tools=persona.deliberate_tools,
        colour=persona.colour,
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
    details = checked_details(_details_of(data))
    persona = Persona(name=data.name.strip(), description=data.description, colour=data.colour)
    set_details(persona, details)
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
    details = checked_details(_details_of(data))
    persona.name = data.name.strip()
    persona.description = data.description
    if "colour" in data.model_fields_set:
        persona.colour = data.colour
    set_details(persona, details)
    if avatar:
        persona.avatar_id = store_image(session, avatar).id
    if data.is_default:
        _make_default(session, persona)
    persona.updated_at = utcnow()
    session.add(persona)
    session.flush()
    return persona


def _details_of(data: PersonaIn) -> dict[str, str | None]:
    return {name: getattr(data, name, None) for name in DETAIL_FIELDS}


def delete_persona(session: Session, persona_id: int) -> None:
    session.delete(get_persona(session, persona_id))
    session.flush()

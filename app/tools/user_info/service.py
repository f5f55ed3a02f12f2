"""Reading and writing the user's details: a character's naming of the user (UserAddress) and the
persona's pronouns, form of address and time zone. The checks are app/tools/user_info/core/details.py.

The persona's time zone is the tasks feature's column: until it is there, it is read as unset and
refused with a sentence (app/personas/service.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam
from sqlmodel import Session, select

from app.chats.service import chat_persona, get_chat
from app.personas.models import Persona
from app.personas.service import known_time_zones, set_details
from app.platform.core.errors import UserError
from app.platform.timeutil import utcnow
from app.tools.user_info.core.details import PERSONA_FIELDS, DetailsUpdate, Naming, plan_update
from app.tools.user_info.models import UserAddress

# Built once: the prompt reads it every turn.
_ADDRESS = select(UserAddress).where(
    UserAddress.character_id == bindparam("character_id"), UserAddress.persona_id == bindparam("persona_id")
)
_ADDRESS_NO_PERSONA = select(UserAddress).where(
    UserAddress.character_id == bindparam("character_id"),
    UserAddress.persona_id.is_(None),  # type: ignore[union-attr]
)


def user_address(session: Session, character_id: int, persona_id: int | None) -> UserAddress | None:
    if persona_id is None:
        return session.exec(_ADDRESS_NO_PERSONA, params={"character_id": character_id}).first()
    return session.exec(_ADDRESS, params={"character_id": character_id, "persona_id": persona_id}).first()


def naming_of(address: UserAddress | None) -> Naming:
    if address is None:
        return Naming()
    return Naming(address.nickname, address.prefix, address.suffix)


@dataclass(frozen=True)
class DetailsChanged:
    before: Naming
    after: Naming
    update: DetailsUpdate


def update_user_details(
    session: Session,
    *,
    character_id: int | None,
    persona: Persona | None,
    values: dict[str, str | None],
    clear: list[str],
) -> DetailsChanged:
    """Check every field, then write them all (flushed, in the caller's transaction), or write nothing
    and raise UserError. `values`: the fields given (None: not given)."""
    asked = {name for name, value in values.items() if value is not None} | set(clear)
    refusals = []
    if persona is None and asked & set(PERSONA_FIELDS):
        refusals.append(
            "This chat has no persona, so pronouns, form of address and time zone have nowhere to be "
            "kept; the user can add one on the Personas page."
        )
    if character_id is None and asked - set(PERSONA_FIELDS):
        refusals.append("Nickname, prefix and suffix belong to a speaking character, and none is speaking.")
    if refusals:
        raise UserError(" ".join(refusals))
    persona_id = persona.id if persona is not None else None
    address = user_address(session, character_id, persona_id) if character_id is not None else None
    before = naming_of(address)
    update = plan_update(values, clear, current=before, known_zones=known_time_zones())
    if update.naming and character_id is not None:
        if address is None:
            address = UserAddress(character_id=character_id, persona_id=persona_id)
        for name, value in update.naming.items():
            setattr(address, name, value)
        address.updated_at = utcnow()
        session.add(address)
    if update.persona and persona is not None:
        set_details(persona, update.persona)
        persona.updated_at = utcnow()
        session.add(persona)
    session.flush()
    return DetailsChanged(before, naming_of(address), update)


def context_persona(session: Session, chat_id: int, persona_id: int | None) -> Persona | None:
    """The persona a tool call's chat reads: the one the call names, else the chat's (or the default)."""
    if persona_id is not None and (persona := session.get(Persona, persona_id)) is not None:
        return persona
    return chat_persona(session, get_chat(session, chat_id))

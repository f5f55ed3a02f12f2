"""Participant info: what the speaking character knows of how to address the user (its nickname,
prefix and suffix for them) and the persona's pronouns, form of address and time zone, above the
conversation right after the persona. Nothing when all are empty. One indexed read per turn."""

from __future__ import annotations

from sqlalchemy import text

from app.personas.service import persona_time_zone
from app.prompt.core.builder import DynamicBlock
from app.prompt.sources import Contribution, PromptSource, Turn
from app.tools.user_info.core.details import details_text
from app.tools.user_info.service import naming_of, user_address

_ANY_ADDRESS = text("SELECT 1 FROM user_address WHERE character_id = :character_id LIMIT 1")


class ParticipantInfoSource(PromptSource):
    name = "participant_info"
    kinds = ("participant_info",)
    label = "Participant info"

    def contribute(self, turn: Turn) -> Contribution | None:
        persona = turn.persona
        persona_id = persona.id if persona is not None else None
        # Most characters never got a name for the user: one probe on the (character_id, persona_id)
        # index tells, before an object is built.
        named = (
            turn.speaker.id
            and turn.session.connection().execute(_ANY_ADDRESS, {"character_id": turn.speaker.id}).first()
        )
        address = user_address(turn.session, turn.speaker.id, persona_id) if named else None
        text = details_text(
            character_name=turn.speaker.name,
            user_name=turn.user_name,
            naming=naming_of(address),
            pronouns=(persona.pronouns or "") if persona is not None else "",
            form_of_address=(persona.form_of_address or "") if persona is not None else "",
            time_zone=persona_time_zone(persona),
        )
        if not text:
            return None
        return Contribution(fixed=(DynamicBlock("participant_info", "Participant info", text),))

"""update_user_info: the character keeps what the user asked to be called, and how.

Naming (nickname, prefix, suffix) is this character's for this persona; pronouns, form of address and
time zone are the persona's, read by every character. Each field is its own optional argument, a blank
value clears, and `clear` lists fields to clear. Every field is checked before anything is written, then
all are written in one transaction (app/tools/user_info/core/details.py has the rules).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field
from sqlmodel import Session

from app.characters.models import Character
from app.personas.service import FALLBACK_USER_NAME
from app.platform.core.errors import UserError
from app.tools.registry import Tool, ToolContext, ToolError, ToolResult
from app.tools.user_info.core.details import FIELD_LABELS, FIELDS, called
from app.tools.user_info.service import context_persona, update_user_details

FieldName = Literal["nickname", "prefix", "suffix", "pronouns", "form_of_address", "time_zone"]
# Each field is checked at 60 characters with a sentence (app/personas/core/details.py); this larger
# bound keeps a runaway argument from reaching the checks at all.
_BOUND = 240


class UpdateUserInfoArgs(BaseModel):
    nickname: str | None = Field(None, max_length=_BOUND, description="What you call the user. Blank clears.")
    prefix: str | None = Field(None, max_length=_BOUND, description="A title before the name: Captain, Dr.")
    suffix: str | None = Field(None, max_length=_BOUND, description="After the name: -san, the Brave.")
    pronouns: str | None = Field(None, max_length=_BOUND, description="The user's pronouns: she/her.")
    form_of_address: str | None = Field(
        None, max_length=_BOUND, description="How formally to address the user: formal, informal, …"
    )
    time_zone: str | None = Field(
        None, max_length=_BOUND, description="The user's time zone: Europe/Lisbon, or UTC+3."
    )
    clear: list[FieldName] = Field(
        default_factory=list, max_length=len(FIELDS), description="Fields to clear."
    )


def update_user_info(ctx: ToolContext, args: UpdateUserInfoArgs) -> ToolResult:
    values = {name: getattr(args, name) for name in FIELDS}
    with Session(ctx.services.engine) as session:
        persona = context_persona(session, ctx.chat_id, ctx.persona_id)
        character = session.get(Character, ctx.character_id) if ctx.character_id is not None else None
        try:
            changed = update_user_details(
                session,
                character_id=character.id if character else None,
                persona=persona,
                values=values,
                clear=list(args.clear),
            )
        except UserError as err:
            raise ToolError(f"Nothing was changed: {err}") from err
        user = persona.name if persona else FALLBACK_USER_NAME
        speaker = character.name if character else None
        lines = [
            f"{FIELD_LABELS[name]}: {value or '(cleared)'}" for name, value in changed.update.changes.items()
        ]
        session.commit()
    if not lines:
        return ToolResult(text="Nothing to change: no field was given.")
    saved = "Saved: " + "; ".join(lines) + "."
    # The resulting name only when the naming really changed: a pronoun or time zone edit does not
    # repeat a name nothing altered.
    if changed.after != changed.before and speaker is not None:
        naming = f"{speaker} now calls you {called(user, changed.after)}."
        return ToolResult(text=f"{saved} {naming}", notice=naming)
    return ToolResult(text=saved, notice=saved)


TOOLS = [
    Tool(
        name="update_user_info",
        description=(
            "Keep how the user asked to be addressed: nickname, prefix, suffix (how you call them), "
            "pronouns, form of address and time zone. Only on the user's explicit request. A blank "
            "value clears a field; `clear` lists fields to clear."
        ),
        args=UpdateUserInfoArgs,
        run=update_user_info,
        permission="metadata",
        family="user_info",
        label="Update the user's details",
    )
]

from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field

from app.personas.core.details import checked_detail
from app.platform.core.names import checked
from app.platform.core.speech import SpeechColour


def _detail(label: str) -> Callable[[str | None], str | None]:
    return lambda value: None if value is None else checked_detail(label, value)


class PersonaIn(BaseModel):
    name: Annotated[str, checked("A persona's name")] = Field(min_length=1, max_length=200)
    description: str = ""
    is_default: bool = False
    # Read by every character. Left out (None), a field keeps what is stored; "" clears it. The time
    # zone is checked against the zones Sugo knows when it is saved (app/personas/service.py).
    pronouns: Annotated[str | None, AfterValidator(_detail("Pronouns"))] = None
    form_of_address: Annotated[str | None, AfterValidator(_detail("Form of address"))] = None
    time_zone: Annotated[str | None, AfterValidator(_detail("Time zone"))] = None
    # Deliberate Tool Mode: "" follows the app-wide setting, "on" / "off" override it; None keeps.
    deliberate_tools: Literal["", "on", "off"] | None = None
    # The colour of the user's speech in chats (#rrggbb); None: the theme's own. Left out of an update,
    # the stored colour stays.
    colour: SpeechColour = None


class PersonaRead(PersonaIn):
    name: str  # as stored, read back whatever an older version let in (app/platform/core/names.py)
    pronouns: str | None = None
    form_of_address: str | None = None
    time_zone: str | None = None
    deliberate_tools: str | None = None
    colour: str | None = None
    id: int
    avatar_url: str | None

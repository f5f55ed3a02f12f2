from typing import Annotated

from pydantic import BaseModel, Field

from app.platform.core.names import checked


class PersonaIn(BaseModel):
    name: Annotated[str, checked("A persona's name")] = Field(min_length=1, max_length=200)
    description: str = ""
    is_default: bool = False


class PersonaRead(PersonaIn):
    name: str  # as stored, read back whatever an older version let in (app/platform/core/names.py)
    id: int
    avatar_url: str | None

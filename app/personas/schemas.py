from pydantic import BaseModel, Field


class PersonaIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    is_default: bool = False


class PersonaRead(PersonaIn):
    id: int
    avatar_url: str | None

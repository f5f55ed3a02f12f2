from datetime import datetime

from sqlmodel import Field, SQLModel

from app.platform.timeutil import utcnow


class Persona(SQLModel, table=True):
    """Who the user plays: the name that {{user}} becomes and a description the model reads."""

    id: int | None = Field(default=None, primary_key=True)
    name: str
    description: str = ""
    avatar_id: int | None = Field(default=None, foreign_key="image.id", ondelete="SET NULL")
    is_default: bool = False
    # Read by every character (the user_info tool and the Personas page set them): "she/her", and how
    # formally the characters should speak to the user ("formal", "informal", free text). ≤ 60 each.
    pronouns: str | None = None
    form_of_address: str | None = None
    # The user's IANA time zone ("Europe/Lisbon"): reminders' times are read and shown in it; None: the server's.
    time_zone: str | None = None
    # Deliberate Tool Mode for this persona: None follows Settings → Tools & Permissions, "on" / "off"
    # override it (app/tools/source.py).
    deliberate_tools: str | None = None
    # The colour of the user's speech in the roleplay view (#rrggbb, None: the theme's own).
    colour: str | None = Field(default=None, max_length=7)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

from datetime import datetime

from sqlalchemy import JSON, Column
from sqlmodel import Field, SQLModel

from app.platform.timeutil import utcnow


class PromptPreset(SQLModel, table=True):
    """A saved preset (app/presets/core/model.py), kept whole in Sugo's own file format (`data`, as the
    export writes it, unknown fields of an imported file included). Sugo's default preset is built in
    and never stored."""

    __tablename__ = "prompt_preset"

    id: int | None = Field(default=None, primary_key=True)
    name: str
    data: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

from datetime import datetime

from sqlmodel import Field, SQLModel

from app.platform import modelbase as _  # noqa: F401  (naming convention before tables are declared)
from app.platform.timeutil import utcnow


class Background(SQLModel, table=True):
    """An uploaded background, by its file name (SillyTavern's chats name their background by it)."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=255, index=True)
    image_id: int = Field(foreign_key="image.id", ondelete="CASCADE")
    created_at: datetime = Field(default_factory=utcnow)

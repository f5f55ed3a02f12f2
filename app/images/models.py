from datetime import datetime

from sqlalchemy import Column, LargeBinary
from sqlmodel import Field, SQLModel

from app.platform import modelbase as _  # noqa: F401  (naming convention before tables are declared)
from app.platform.timeutil import utcnow


class Image(SQLModel, table=True):
    """An uploaded picture (avatars). Kept in the database so a failed import leaves nothing behind."""

    id: int | None = Field(default=None, primary_key=True)
    mime: str
    width: int = 0
    height: int = 0
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)

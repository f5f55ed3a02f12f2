"""Shared model plumbing: one MetaData with a naming convention so migrations name constraints
predictably, and a JSON column helper."""

from typing import Annotated, Any

from annotated_types import Ge, Le
from sqlalchemy import JSON, Column, MetaData
from sqlmodel import Field, SQLModel

SQLModel.metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def json_field(default_factory: Any = dict) -> Any:
    return Field(default_factory=default_factory, sa_column=Column(JSON, nullable=False))


# Row ids are SQLite's 64-bit signed integers. A larger Python int never names a row, and handed to
# the driver it fails as an OverflowError (a 500) instead of matching nothing.
MAX_ROW_ID = 2**63 - 1
RowId = Annotated[int, Ge(-MAX_ROW_ID - 1), Le(MAX_ROW_ID)]


def parse_row_id(text: str) -> int | None:
    """The row id `text` spells in ASCII digits, or None when it spells none a row can have."""
    if not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if number <= MAX_ROW_ID else None

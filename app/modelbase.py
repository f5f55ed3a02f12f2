"""Shared model plumbing: one MetaData with a naming convention so migrations name constraints
predictably, and a JSON column helper."""

from typing import Any

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

"""Secrets every Sugo server sharing a database must agree on, kept in that database.

Decisions:
- The key that signs login cookies is a row here (`session`), not a file: logging out replaces it, and
  every server must stop accepting the old cookies, which a file on one machine cannot tell the others.
  A cookie is signed with this secret *and* the password (app/web/auth.py), so a copy of the database
  alone forges nothing.
- The key that encrypts API keys stays a file (SUGO_SECRET_KEY_FILE, app/connections/crypto.py): kept
  beside the ciphertext it opens, it would protect nothing. What lives here is a check (`api_key_check`):
  a known text sealed with the first server's key, so a server started with another key file is told
  so at start instead of sealing new API keys no other server can open.
- The first writer wins: INSERT … ON CONFLICT DO NOTHING, then read back, on both databases.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Field, SQLModel

from app.platform import modelbase as _  # noqa: F401  (naming convention before tables are declared)
from app.platform.timeutil import utcnow

SESSION = "session"
API_KEY_CHECK = "api_key_check"
MAX_SECRET_CHARS = 4000


class SharedSecret(SQLModel, table=True):
    """One named secret, the same for every server of this database."""

    __tablename__ = "shared_secret"

    name: str = Field(primary_key=True, max_length=64)
    value: str = Field(max_length=MAX_SECRET_CHARS)
    changed_at: datetime


def _now() -> datetime:
    return utcnow().replace(tzinfo=None)


def read_secret(engine: Engine, name: str) -> tuple[str, datetime] | None:
    """The secret and when it last changed, or None when it was never made."""
    with engine.connect() as conn:
        row = conn.execute(
            text("SELECT value, changed_at FROM shared_secret WHERE name = :name"), {"name": name}
        ).first()
    return (row[0], row[1]) if row else None


def ensure_secret(engine: Engine, name: str, make: Callable[[], str]) -> str:
    """The secret `name`, made by `make` when no server has made it yet (the first one kept)."""
    if found := read_secret(engine, name):
        return found[0]
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO shared_secret (name, value, changed_at) VALUES (:name, :value, :at) "
                "ON CONFLICT (name) DO NOTHING"
            ),
            {"name": name, "value": make(), "at": _now()},
        )
    found = read_secret(engine, name)
    assert found is not None  # just written, or written by another server first
    return found[0]


def replace_secret(engine: Engine, name: str, value: str) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO shared_secret (name, value, changed_at) VALUES (:name, :value, :at) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value, changed_at = excluded.changed_at"
            ),
            {"name": name, "value": value, "at": _now()},
        )

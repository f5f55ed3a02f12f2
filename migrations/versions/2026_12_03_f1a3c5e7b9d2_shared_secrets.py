"""secrets every server of a database shares: the session secret (logging out ends sessions on every
server) and the check that each server holds the same API-key file; wrong passwords counted per client
in the database (issue 26)

Revision ID: f1a3c5e7b9d2
Revises: e7b9d1f3a5c8
Create Date: 2026-12-03 07:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "f1a3c5e7b9d2"
down_revision: str | None = "e7b9d1f3a5c8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "shared_secret",
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("value", sqlmodel.sql.sqltypes.AutoString(length=4000), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_shared_secret"),
    )
    op.create_table(
        "login_failure",
        sa.Column("client", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("client", name="pk_login_failure"),
    )


def downgrade() -> None:
    op.drop_table("login_failure")
    op.drop_table("shared_secret")

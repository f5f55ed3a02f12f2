"""scenes stored before the participant check (issue 27): Fix asks again about them in a group

Revision ID: f8c0e2a4b6d7
Revises: e7b9d1f3a5c6
Create Date: 2026-12-04 17:35:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f8c0e2a4b6d7"
down_revision: str | None = "e7b9d1f3a5c6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Every scene stored until now is marked unchecked; the writer marks each one it writes from now on.
    op.add_column(
        "scene", sa.Column("participants_checked", sa.Boolean(), nullable=False, server_default=sa.false())
    )


def downgrade() -> None:
    op.drop_column("scene", "participants_checked")

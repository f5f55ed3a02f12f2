"""a scene's recap remembers who saw what when it was written: the private audiences of its messages
(issue 27); a reader who cannot see some of them recalls the scene only while they are unchanged

Revision ID: f2b4d6e8a0c1
Revises: e8a0c2e4f6b8
Create Date: 2026-12-04 14:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f2b4d6e8a0c1"
down_revision: str | None = "e8a0c2e4f6b8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("scene", sa.Column("private_key", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("scene") as batch:
        batch.drop_column("private_key")

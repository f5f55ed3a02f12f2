"""Character recollections (issue 27): one character's own short memory of a closed scene

Revision ID: b4d6f8a0c2e3
Revises: a3c5e7f9b1d2
Create Date: 2026-12-04 14:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b4d6f8a0c2e3"
down_revision: str | None = "a3c5e7f9b1d2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scene_recollection",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scene_id", sa.Integer(), nullable=False),
        sa.Column("character_id", sa.Integer(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("manual", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("summary_key", sa.String(), nullable=False),
        sa.Column("private_key", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["scene_id"], ["scene.id"], name="fk_scene_recollection_scene_id_scene", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["character_id"],
            ["character.id"],
            name="fk_scene_recollection_character_id_character",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_scene_recollection"),
        sa.UniqueConstraint("scene_id", "character_id", name="uq_scene_recollection"),
    )


def downgrade() -> None:
    op.drop_table("scene_recollection")

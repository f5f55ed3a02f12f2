"""the roleplay view (issue 29): uploaded backgrounds; a character's full-size art, default background,
speech colour and expression images; a persona's speech colour

Revision ID: b2d4f6a8c0e1
Revises: a1c3e5f7b9d2
Create Date: 2026-12-04 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b2d4f6a8c0e1"
down_revision: str | None = "a1c3e5f7b9d2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "background",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["image_id"], ["image.id"], name="fk_background_image_id_image", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_background"),
    )
    op.create_index("ix_background_name", "background", ["name"])
    with op.batch_alter_table("character") as batch_op:
        batch_op.add_column(sa.Column("art_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("background", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("colour", sa.String(length=7), nullable=True))
        batch_op.add_column(sa.Column("expressions", sa.JSON(), nullable=False, server_default="{}"))
        batch_op.create_foreign_key("fk_character_art_id_image", "image", ["art_id"], ["id"], ondelete="SET NULL")
    with op.batch_alter_table("persona") as batch_op:
        batch_op.add_column(sa.Column("colour", sa.String(length=7), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("persona") as batch_op:
        batch_op.drop_column("colour")
    with op.batch_alter_table("character") as batch_op:
        batch_op.drop_constraint("fk_character_art_id_image", type_="foreignkey")
        batch_op.drop_column("expressions")
        batch_op.drop_column("colour")
        batch_op.drop_column("background")
        batch_op.drop_column("art_id")
    op.drop_index("ix_background_name", table_name="background")
    op.drop_table("background")

"""user details: how each character names the user (user_address), and the persona's pronouns and
form of address (issue 24, the update_user_info tool)

Revision ID: e5a7c9b1d3f6
Revises: e1f3a5c7b9d1
Create Date: 2026-12-02 17:45:00

The persona's time zone is added by the tasks migration, not here.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e5a7c9b1d3f6"
down_revision: str | None = "e1f3a5c7b9d1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("persona", sa.Column("pronouns", sa.String(), nullable=True))
    op.add_column("persona", sa.Column("form_of_address", sa.String(), nullable=True))
    op.create_table(
        "user_address",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("character_id", sa.Integer(), nullable=False),
        sa.Column("persona_id", sa.Integer(), nullable=True),
        sa.Column("nickname", sa.String(), nullable=False),
        sa.Column("prefix", sa.String(), nullable=False),
        sa.Column("suffix", sa.String(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["character_id"],
            ["character.id"],
            name="fk_user_address_character_id_character",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["persona_id"], ["persona.id"], name="fk_user_address_persona_id_persona", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_user_address"),
        sa.UniqueConstraint("character_id", "persona_id", name="uq_user_address_character_persona"),
    )
    op.create_index(
        "uq_user_address_character_no_persona",
        "user_address",
        ["character_id"],
        unique=True,
        sqlite_where=sa.text("persona_id IS NULL"),
        postgresql_where=sa.text("persona_id IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("uq_user_address_character_no_persona", table_name="user_address")
    op.drop_table("user_address")
    op.drop_column("persona", "form_of_address")
    op.drop_column("persona", "pronouns")

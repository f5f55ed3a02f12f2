"""prompt presets and text-completion connections (issue 28): a preset's sections, choices and
parameters, kept whole as JSON; a connection's text-completion API and its instruct and context templates

Revision ID: a1c3e5f7b9d2
Revises: f8c0e2a4b6d7
Create Date: 2026-12-04 20:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a1c3e5f7b9d2"
down_revision: str | None = "f8c0e2a4b6d7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "prompt_preset",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_prompt_preset"),
    )
    with op.batch_alter_table("connection") as batch_op:
        batch_op.add_column(sa.Column("text_api", sa.String(), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("top_k", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("min_p", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("repetition_penalty", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("instruct_template", sa.JSON(), nullable=False, server_default="{}"))
        batch_op.add_column(sa.Column("context_template", sa.JSON(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("connection") as batch_op:
        batch_op.drop_column("context_template")
        batch_op.drop_column("instruct_template")
        batch_op.drop_column("repetition_penalty")
        batch_op.drop_column("min_p")
        batch_op.drop_column("top_k")
        batch_op.drop_column("text_api")
    op.drop_table("prompt_preset")

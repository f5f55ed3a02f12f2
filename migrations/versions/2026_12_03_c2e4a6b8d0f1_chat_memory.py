"""chat memory: a chat's rule-made summary and the user's notes, and a message's quote and attached
chat memories (issue 25)

Revision ID: c2e4a6b8d0f1
Revises: b9d1f3a5c7e9
Create Date: 2026-12-03 00:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c2e4a6b8d0f1"
down_revision: str | None = "b9d1f3a5c7e9"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "chat_memory",
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("notes", sa.JSON(), nullable=False),
        sa.Column("has_content", sa.Boolean(), nullable=False),
        sa.Column("first_request", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_chat_memory_chat_id_chat", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("chat_id", name="pk_chat_memory"),
    )
    with op.batch_alter_table("message") as batch_op:
        batch_op.add_column(sa.Column("quote", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("chat_refs", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("message") as batch_op:
        batch_op.drop_column("chat_refs")
        batch_op.drop_column("quote")
    op.drop_table("chat_memory")

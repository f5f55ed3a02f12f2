"""tasks: reminders a character sets in a chat (issue 24), and the persona's time zone

Revision ID: f6b8d0e2a4c7
Revises: d5f7a9c1e3b5
Create Date: 2026-12-02 17:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f6b8d0e2a4c7"
down_revision: str | None = "d5f7a9c1e3b5"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "task",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("character_id", sa.Integer(), nullable=True),
        sa.Column("persona_id", sa.Integer(), nullable=True),
        sa.Column("purpose", sa.String(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("interval_hours", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("fired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("late", sa.Boolean(), nullable=False),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_task_chat_id_chat", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["character_id"], ["character.id"], name="fk_task_character_id_character", ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["persona_id"], ["persona.id"], name="fk_task_persona_id_persona", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_task"),
    )
    op.create_index("ix_task_status_due", "task", ["status", "due_at"])
    op.create_index("ix_task_chat_status", "task", ["chat_id", "status"])
    with op.batch_alter_table("persona") as batch:
        batch.add_column(sa.Column("time_zone", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("persona") as batch:
        batch.drop_column("time_zone")
    op.drop_index("ix_task_chat_status", table_name="task")
    op.drop_index("ix_task_status_due", table_name="task")
    op.drop_table("task")

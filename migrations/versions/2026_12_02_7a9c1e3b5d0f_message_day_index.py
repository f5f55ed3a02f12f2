"""message day index: a Conversation chat's messages the AI reads, by time, so the day summaries'
pages and prompt count a chat's days from the index alone (app/memory/days/service.py)

Revision ID: 7a9c1e3b5d0f
Revises: 6f8b0d2e4a3c
Create Date: 2026-12-02 14:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "7a9c1e3b5d0f"
down_revision: str | None = "6f8b0d2e4a3c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("message") as batch_op:
        batch_op.create_index("ix_message_chat_days", ["chat_id", "kind", "hidden", "created_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("message") as batch_op:
        batch_op.drop_index("ix_message_chat_days")

"""who can see a message in a group chat: the characters it is hidden from, the one it is whispered
to, and `private` (either is set) in the window's index, so the history's count stays index-only and
a chat without them reads as before (issue 27)

Revision ID: d6f8a0c2e4b6
Revises: c3e5a7b9d1f2
Create Date: 2026-12-04 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d6f8a0c2e4b6"
down_revision: str | None = "c3e5a7b9d1f2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_WINDOW = ["chat_id", "kind", "id", "status", "hidden"]


def upgrade() -> None:
    op.add_column("message", sa.Column("hidden_for", sa.JSON(), nullable=True))
    op.add_column("message", sa.Column("whisper_to", sa.Integer(), nullable=True))
    op.add_column("message", sa.Column("private", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.drop_index("ix_message_chat_window", table_name="message")
    op.create_index("ix_message_chat_window", "message", [*OLD_WINDOW, "private"])


def downgrade() -> None:
    op.drop_index("ix_message_chat_window", table_name="message")
    op.create_index("ix_message_chat_window", "message", OLD_WINDOW)
    op.drop_column("message", "private")
    op.drop_column("message", "whisper_to")
    op.drop_column("message", "hidden_for")

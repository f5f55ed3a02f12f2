"""attachments: files (PDFs, UTF-8 text) attached to a user's message, for read_document (issue 24)

Revision ID: d5f7a9c1e3b5
Revises: e5a7c9b1d3f6
Create Date: 2026-12-02 17:45:00

The file itself lives under the data folder, named by its SHA-256 (app/chats/attachments.py); the
row says whose it is. `message_id` is empty while the upload waits in the composer.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d5f7a9c1e3b5"
down_revision: str | None = "e5a7c9b1d3f6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "attachment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("media_type", sa.String(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(), nullable=False),
        sa.Column("path", sa.String(), nullable=False),
        sa.Column("pages", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chat_id"], ["chat.id"], name="fk_attachment_chat_id_chat", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["message_id"], ["message.id"], name="fk_attachment_message_id_message", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_attachment"),
    )
    op.create_index("ix_attachment_chat_id", "attachment", ["chat_id"])
    op.create_index("ix_attachment_message", "attachment", ["message_id"])
    op.create_index("ix_attachment_sha256", "attachment", ["sha256"])


def downgrade() -> None:
    op.drop_index("ix_attachment_sha256", table_name="attachment")
    op.drop_index("ix_attachment_message", table_name="attachment")
    op.drop_index("ix_attachment_chat_id", table_name="attachment")
    op.drop_table("attachment")

"""mcp server: the MCP servers the user adds (Settings → MCP Servers), with their sealed token and the
last successful discovery's tools (issue 24)

Revision ID: a7c9e1b3d5f8
Revises: f6b8d0e2a4c7
Create Date: 2026-12-02 17:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a7c9e1b3d5f8"
down_revision: str | None = "f6b8d0e2a4c7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_server",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("token_sealed", sa.String(), nullable=True),
        sa.Column("server_type", sa.String(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("discovered_tools", sa.JSON(), nullable=True),
        sa.Column("discovered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_server"),
        sa.UniqueConstraint("name", name="uq_mcp_server_name"),
    )


def downgrade() -> None:
    op.drop_table("mcp_server")

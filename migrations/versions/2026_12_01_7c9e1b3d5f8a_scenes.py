"""scenes: Advanced Memory Recall's scenes, the saved parts of big scenes' recaps, and each chat's
scene-check state, and Prepare existing history's runs (issue 14)

Revision ID: 7c9e1b3d5f8a
Revises: 5b7d9f1a3c6e
Create Date: 2026-12-01 06:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7c9e1b3d5f8a"
down_revision: str | None = "5b7d9f1a3c6e"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scene",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("first_message_id", sa.Integer(), nullable=False),
        sa.Column("last_message_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("summary", sa.String(), nullable=False),
        sa.Column("participants", sa.JSON(), nullable=False),
        sa.Column("timeframe", sa.String(), nullable=False),
        sa.Column("manual", sa.Boolean(), nullable=False),
        sa.Column("check_who", sa.Boolean(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_scene_chat_id_chat", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_scene"),
        sa.UniqueConstraint("chat_id", "first_message_id", name="uq_scene_chat_first"),
    )
    op.create_index("ix_scene_state", "scene", ["state"])
    op.create_table(
        "scene_recap_part",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scene_id", sa.Integer(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("first_message_id", sa.Integer(), nullable=False),
        sa.Column("last_message_id", sa.Integer(), nullable=False),
        sa.Column("summary", sa.String(), nullable=False),
        sa.Column("participants", sa.JSON(), nullable=True),
        sa.Column("timeframe", sa.String(), nullable=False),
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["scene_id"], ["scene.id"], name="fk_scene_recap_part_scene_id_scene", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_scene_recap_part"),
        sa.UniqueConstraint("scene_id", "part", name="uq_scene_recap_part"),
    )
    op.create_table(
        "scene_state",
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("checked_through_id", sa.Integer(), nullable=True),
        sa.Column("window_start_id", sa.Integer(), nullable=True),
        sa.Column("continuity_reason", sa.String(), nullable=False),
        sa.Column("continuity_key", sa.String(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("next_check_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_scene_state_chat_id_chat", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("chat_id", name="pk_scene_state"),
    )
    op.create_table(
        "scene_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("stage", sa.String(), nullable=False),
        sa.Column("checked_through_id", sa.Integer(), nullable=True),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("current", sa.String(), nullable=False),
        sa.Column("stop_requested", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_scene_run_chat_id_chat", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_scene_run"),
    )
    op.create_index("ix_scene_run_chat", "scene_run", ["chat_id", "id"])
    op.create_index("ix_scene_run_status", "scene_run", ["status"])
    op.create_table(
        "scene_snapshot",
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("anchor_id", sa.Integer(), nullable=False),
        sa.Column("scenes", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_scene_snapshot_chat_id_chat", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("chat_id", "anchor_id", name="pk_scene_snapshot"),
    )


def downgrade() -> None:
    op.drop_table("scene_snapshot")
    op.drop_index("ix_scene_run_status", table_name="scene_run")
    op.drop_index("ix_scene_run_chat", table_name="scene_run")
    op.drop_table("scene_run")
    op.drop_table("scene_state")
    op.drop_table("scene_recap_part")
    op.drop_index("ix_scene_state", table_name="scene")
    op.drop_table("scene")

"""Replies keep their reasoning apart from their text.

Before, a reasoning model's `<think>` block (or `<thinking>`, `<reasoning>`, an unclosed one, or the
text before a lone `</think>`) was stored in the reply's text: shown as the reply, sent back in every
later prompt, and read into memories, summaries and scenes. Each version of an assistant message whose
text holds such a block now has it moved into the version's `reasoning` (shown folded above the
reply), as new replies are stored. A version that was only reasoning is marked failed, as a new one
would be, so Regenerate is at hand and it stays out of later prompts.

Downgrade leaves the texts as they are: older code ignores `reasoning`, and the reasoning is not
written back into the story.

Revision ID: 4e6a8c0b2d1f
Revises: 7c9e1b3d5f8a
Create Date: 2026-12-02
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "4e6a8c0b2d1f"
down_revision = "7c9e1b3d5f8a"
branch_labels = None
depends_on = None

BATCH = 500
ONLY_THINKING = "The model used its whole answer thinking; nothing was said."
# Cheap to test in SQL on SQLite and PostgreSQL alike; the reader decides.
_MAYBE = ("(lower(content) LIKE '%think%' OR lower(content) LIKE '%reasoning%'"
          " OR lower(CAST(swipes AS TEXT)) LIKE '%think%' OR lower(CAST(swipes AS TEXT)) LIKE '%reasoning%')")


def _apart(version: dict, read) -> bool:
    """Move the reasoning in a version's text into its `reasoning`; whether anything changed."""
    text = version.get("content")
    if not isinstance(text, str):
        return False
    answer = read(text)
    if not answer.had_reasoning:
        return False
    before = version.get("reasoning") if isinstance(version.get("reasoning"), str) else ""
    version["content"] = answer.text
    version["reasoning"] = "\n\n".join(t for t in (before, answer.reasoning) if t)
    if not answer.text and version.get("status", "ok") == "ok":
        version["status"], version["error"] = "error", ONLY_THINKING
    return True


def upgrade() -> None:
    from app.connections.core.answers import read_answer

    bind = op.get_bind()
    last = 0
    while True:
        rows = bind.execute(sa.text(f"SELECT id, content, swipes, active_swipe, status, error FROM message WHERE id > :last"
                                    f" AND role = 'assistant' AND {_MAYBE} ORDER BY id LIMIT :n"),
                            {"last": last, "n": BATCH}).all()  # fmt: skip
        if not rows:
            return
        for id_, content, raw_swipes, active, status, error in rows:
            swipes = json.loads(raw_swipes) if isinstance(raw_swipes, str) else (raw_swipes or [])
            versions = [v for v in swipes if isinstance(v, dict)]
            changed = any([_apart(v, read_answer) for v in versions])
            if 0 <= active < len(swipes) and isinstance(swipes[active], dict):
                shown = swipes[active]
                content, status, error = shown.get("content", ""), shown.get("status", "ok"), shown.get("error")
            elif not swipes:
                lone = {"content": content, "status": status, "error": error}
                if _apart(lone, read_answer):  # the reasoning needs a version to live in
                    changed, swipes = True, [lone]
                    content, status, error = lone["content"], lone["status"], lone["error"]
            if changed:
                bind.execute(sa.text("UPDATE message SET content = :c, swipes = :s, status = :st, error = :e WHERE id = :id"),
                             {"c": content, "s": json.dumps(swipes), "st": status, "e": error, "id": id_})  # fmt: skip
        last = rows[-1][0]


def downgrade() -> None:
    pass

"""Memory Recall's word index with Snowball stems.

The full-text index (fts_memory_chunk) holds each memory's words as lexical.index_text gives them;
the words are now stemmed with Snowball (adoption, adopted and adopting meet on "adopt", where the
light stemmer before left "adoption" apart), so every memory's words are written again. A query is
stemmed the same way, so words indexed the old way would no longer be found.

Downgrade writes them again with the light stemmer the older code reads, kept here (a migration is
a snapshot: the app no longer has it).

Revision ID: 5b7d9f1a3c6e
Revises: 9a3b5c7d1e2f
Create Date: 2026-12-01
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "5b7d9f1a3c6e"
down_revision = "9a3b5c7d1e2f"
branch_labels = None
depends_on = None

BATCH = 2_000


def _write_again(words: Callable[[str, int], str]) -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        return  # the FTS5 index is SQLite's; PostgreSQL's word index is not made by these revisions
    # 'delete-all' empties a contentless index in one step; the rows are then written in batches.
    bind.execute(sa.text("INSERT INTO fts_memory_chunk (fts_memory_chunk) VALUES ('delete-all')"))
    last = 0
    while True:
        rows = bind.execute(sa.text("SELECT id, chat_id, content FROM memory_chunk WHERE id > :last ORDER BY id LIMIT :n"),
                            {"last": last, "n": BATCH}).all()  # fmt: skip
        if not rows:
            return
        bind.execute(sa.text("INSERT INTO fts_memory_chunk (rowid, body) VALUES (:id, :body)"),
                     [{"id": i, "body": words(content, chat_id)} for i, chat_id, content in rows])  # fmt: skip
        last = rows[-1][0]


def upgrade() -> None:
    from app.memory.recall.core.lexical import index_text

    _write_again(index_text)


def downgrade() -> None:
    _write_again(_light_index_text)


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _light_index_text(content: str, chat_id: int) -> str:
    from app.memory.recall.core.lexical import STOPWORDS

    folded = content.lower()
    if not folded.isascii():
        folded = "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))
    words = [_light_stem(w) for w in _WORD.findall(folded) if w not in STOPWORDS and len(w) > 1]
    return " ".join(f"c{chat_id}q{w}" for w in words)


def _light_stem(word: str) -> str:
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "zes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ingly", "edly", "ing", "ed", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word

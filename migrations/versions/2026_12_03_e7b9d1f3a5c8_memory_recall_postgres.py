"""memory recall on PostgreSQL: a word index for BM25 beside FTS5's, and pgvector vectors

Revision ID: e7b9d1f3a5c8
Revises: d4f6a8c0e2b4
Create Date: 2026-12-03 03:20:00

SQLite keeps FTS5 and its sign-bit index (nothing changes there). PostgreSQL gets:
- memory_words: each chunk's words as lexical.index_text gives them, as a tsvector of its distinct
  terms (GIN-indexed: which chunks hold a word), their counts (jsonb) and the chunk's length in
  words, so BM25 is computed exactly as FTS5's bm25() computes it (index.py). The app writes a row
  when it inserts a chunk (Python stems the words); the foreign key removes it with the chunk.
- memory_word_total: per chat, how many chunks and words memory_words holds (FTS5's own totals:
  its average chunk length), kept by a trigger. How many chunks hold a word is counted through the
  GIN index instead (index.py): a table of counts per word, kept by a trigger, updated the same
  common words' rows once per chunk, and PostgreSQL follows every version of a row updated within
  one transaction: filling 100,000 memories did not end in 10 minutes.
- memory_embedding: each memory_vector row's float32 blob as a pgvector `vector`, written by a
  trigger from the blob (so every writer, the copy to PostgreSQL included, fills it), removed by
  the foreign key. Untyped, as spaces differ in size: each space gets a partial HNSW index over
  `embedding::vector(dims)` when its first vectors are stored (vectors.ensure_space_index).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "e7b9d1f3a5c8"
down_revision: str | None = "d4f6a8c0e2b4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A float32 (little-endian) blob as a vector, bit for bit: sign, exponent and mantissa read from the
# bytes and put together in double precision, where every float32 is exact.
FLOAT32_VECTOR = """
CREATE FUNCTION memory_float32_vector(blob bytea) RETURNS vector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT (array_agg(
    (CASE WHEN e = 0 THEN m::float8 * 2::float8 ^ (-149)
          ELSE (m + 8388608)::float8 * 2::float8 ^ (e - 150) END)
    * (CASE WHEN s = 1 THEN -1 ELSE 1 END) ORDER BY i))::vector
FROM (SELECT i,
             get_byte(blob, 4 * i + 3) >> 7 AS s,
             ((get_byte(blob, 4 * i + 3) & 127) << 1) | (get_byte(blob, 4 * i + 2) >> 7) AS e,
             ((get_byte(blob, 4 * i + 2) & 127) << 16) | (get_byte(blob, 4 * i + 1) << 8)
               | get_byte(blob, 4 * i) AS m
      FROM generate_series(0, length(blob) / 4 - 1) AS i) AS parts
$$
"""


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return  # SQLite's word index is FTS5 and its vectors are searched by sign bits (index.py)
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute(FLOAT32_VECTOR)
    op.execute(
        "CREATE TABLE memory_embedding (vector_id INTEGER PRIMARY KEY "
        "REFERENCES memory_vector (id) ON DELETE CASCADE, chat_id INTEGER NOT NULL, "
        "chunk_id INTEGER NOT NULL, space_id VARCHAR NOT NULL, embedding vector)"
    )
    op.execute("CREATE INDEX ix_memory_embedding_chat_space ON memory_embedding (chat_id, space_id)")
    op.execute("CREATE INDEX ix_memory_embedding_chunk ON memory_embedding (chunk_id)")
    op.execute(
        "CREATE FUNCTION memory_embedding_follow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "INSERT INTO memory_embedding (vector_id, chat_id, chunk_id, space_id, embedding) "
        "VALUES (NEW.id, NEW.chat_id, NEW.chunk_id, NEW.space_id, memory_float32_vector(NEW.embedding)) "
        "ON CONFLICT (vector_id) DO UPDATE SET chat_id = EXCLUDED.chat_id, chunk_id = EXCLUDED.chunk_id, "
        "space_id = EXCLUDED.space_id, embedding = EXCLUDED.embedding; RETURN NULL; END $$"
    )
    op.execute(
        "CREATE TRIGGER memory_embedding_follow AFTER INSERT OR UPDATE ON memory_vector "
        "FOR EACH ROW EXECUTE FUNCTION memory_embedding_follow()"
    )
    op.execute(
        "INSERT INTO memory_embedding (vector_id, chat_id, chunk_id, space_id, embedding) "
        "SELECT id, chat_id, chunk_id, space_id, memory_float32_vector(embedding) FROM memory_vector"
    )

    op.execute(
        "CREATE TABLE memory_words (chunk_id INTEGER PRIMARY KEY "
        "REFERENCES memory_chunk (id) ON DELETE CASCADE, chat_id INTEGER NOT NULL, "
        "words tsvector NOT NULL, counts jsonb NOT NULL, length INTEGER NOT NULL)"
    )
    op.execute("CREATE INDEX ix_memory_words_words ON memory_words USING gin (words)")
    op.execute(
        "CREATE TABLE memory_word_total (chat_id INTEGER PRIMARY KEY, chunks BIGINT NOT NULL, "
        "words BIGINT NOT NULL)"
    )
    op.execute(
        "CREATE FUNCTION memory_words_follow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF TG_OP = 'DELETE' THEN "
        "UPDATE memory_word_total SET chunks = chunks - 1, words = words - OLD.length "
        "WHERE chat_id = OLD.chat_id; "
        "ELSE "
        "INSERT INTO memory_word_total (chat_id, chunks, words) VALUES (NEW.chat_id, 1, NEW.length) "
        "ON CONFLICT (chat_id) DO UPDATE SET chunks = memory_word_total.chunks + 1, "
        "words = memory_word_total.words + EXCLUDED.words; "
        "END IF; RETURN NULL; END $$"
    )
    op.execute(
        "CREATE TRIGGER memory_words_follow AFTER INSERT OR DELETE ON memory_words "
        "FOR EACH ROW EXECUTE FUNCTION memory_words_follow()"
    )
    from app.memory.recall.index import fill_postgres_index

    fill_postgres_index(bind, spaces=True)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TABLE IF EXISTS memory_words")
    op.execute("DROP TABLE IF EXISTS memory_word_total")
    op.execute("DROP FUNCTION IF EXISTS memory_words_follow()")
    op.execute("DROP TRIGGER IF EXISTS memory_embedding_follow ON memory_vector")
    op.execute("DROP FUNCTION IF EXISTS memory_embedding_follow()")
    op.execute("DROP TABLE IF EXISTS memory_embedding")
    op.execute("DROP FUNCTION IF EXISTS memory_float32_vector(bytea)")
    # The vector extension stays: it may serve other objects, and dropping it needs more rights.

"""Copy a SQLite data folder's database into an empty PostgreSQL database (`python -m app
copy-to-postgres URL`): the schema through the same Alembic upgrade the app runs, then every table of
the models in foreign-key order, in batches, all inside ONE PostgreSQL transaction, so a refusal or a
failure half-way leaves the target as it was. SQL only PostgreSQL understands lives here.

Rows are read and written through the models' column types, so JSON, booleans, dates and times
(text in SQLite, timestamps in PostgreSQL) and vector blobs arrive as the same values. What is
SQLite's alone is not copied: the FTS5 word index (fts_memory_chunk and its vocabulary tables) and
the triggers that keep it; memory_chunk_count is refilled by PostgreSQL's own triggers as the
memories are copied, and the recall index's deletion log (memory_tombstone) starts empty."""

from __future__ import annotations

from dataclasses import dataclass, field

from alembic import command
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import JSON, Integer, inspect, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.schema import MetaData, Table

from app.platform.db import make_engine
from app.platform.migrate import alembic_config

# Rows read from SQLite and written to PostgreSQL at a time: a 20,000-message chat is never held
# in memory at once.
BATCH_ROWS = 1000

NOT_COPIED = (
    "SQLite's word-search index (fts_memory_chunk and its vocabulary tables) and its triggers are "
    "not copied: they are SQLite's alone."
)


class CopyRefused(Exception):
    """The copy did not happen (one sentence saying why); nothing was written to PostgreSQL."""


@dataclass
class CopyResult:
    rows: list[tuple[str, int]] = field(default_factory=list)  # (table, rows copied), in copy order

    @property
    def total(self) -> int:
        return sum(n for _, n in self.rows)


def copy_to_postgres(
    source: Engine,
    target_url: str,
    metadata: MetaData,
    *,
    batch_rows: int = BATCH_ROWS,
) -> CopyResult:
    """Copy every table of `metadata` (app.models': this module sits below the domains that own
    them) from the SQLite `source` into the PostgreSQL database at `target_url`, which must hold no
    rows in those tables. Raises CopyRefused (nothing written) otherwise."""
    source_revision = _revision(source)
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if source_revision != head:
        raise CopyRefused(
            f"The data folder's database is at schema revision {source_revision or 'none'}, not this "
            f"Sugo's newest ({head}): start Sugo once on the data folder so it upgrades the database, "
            "stop it, then copy."
        )
    target = make_engine(target_url)
    try:
        return _copy(source, target, metadata, source_revision, batch_rows)
    finally:
        target.dispose()


def _copy(source, target, metadata, source_revision, batch_rows) -> CopyResult:
    result = CopyResult()
    with target.connect() as conn, conn.begin():  # one transaction: all of it or nothing
        _refuse_rows(conn, metadata)
        _upgrade(conn)
        target_revision = MigrationContext.configure(conn).get_current_revision()
        if target_revision != source_revision:
            raise CopyRefused(
                f"The PostgreSQL database is at schema revision {target_revision}, the data folder's at "
                f"{source_revision}: nothing was copied."
            )
        with source.connect() as src:
            # One read snapshot of every table (SQLite's WAL): a Sugo still writing cannot tear the copy.
            src.exec_driver_sql("BEGIN")
            for table in metadata.sorted_tables:
                copied = _copy_table(src, conn, table, batch_rows)
                result.rows.append((table.name, copied))
        _advance_sequences(conn, metadata)
    return result


def _revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def _refuse_rows(conn: Connection, metadata: MetaData) -> None:
    present = set(inspect(conn).get_table_names())
    for table in metadata.sorted_tables:
        if table.name in present and conn.execute(select(1).select_from(table).limit(1)).first():
            raise CopyRefused(
                f"The PostgreSQL database already holds Sugo's rows (table {table.name}): copy only into "
                "an empty database; nothing was written."
            )


def _upgrade(conn: Connection) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = conn  # inside the copy's transaction (PostgreSQL's DDL is transactional)
    try:
        command.upgrade(cfg, "head")
    except CommandError as err:  # a revision this Sugo does not know: a newer Sugo made it
        raise CopyRefused(
            f"The PostgreSQL database's schema is not one this Sugo knows ({err}); nothing was written."
        ) from err


def _copy_table(src: Connection, conn: Connection, table: Table, batch_rows: int) -> int:
    keys = list(table.primary_key.columns)
    texts = [c.key for c in table.columns if not isinstance(c.type, JSON)]
    rows = src.execution_options(yield_per=batch_rows).execute(select(table).order_by(*keys))
    copied = 0
    for batch in rows.partitions():
        values = [dict(row._mapping) for row in batch]
        for row in values:
            for key in texts:
                if isinstance(row[key], str) and "\x00" in row[key]:
                    raise CopyRefused(
                        f"Table {table.name}, column {key}, row {_row_id(table, row)} holds a NUL character, "
                        "which PostgreSQL refuses in text: remove it in Sugo, then copy again; nothing was "
                        "written."
                    )
        try:
            conn.execute(table.insert(), values)
        except DBAPIError as err:
            orig = str(err.orig).strip().splitlines()[0] if err.orig is not None else str(err)
            raise CopyRefused(
                f"PostgreSQL refused a row of table {table.name} ({orig}); nothing was written."
            ) from err
        copied += len(values)
    return copied


def _row_id(table: Table, row: dict) -> str:
    return ", ".join(f"{c.key}={row[c.key]}" for c in table.primary_key.columns)


def _advance_sequences(conn: Connection, metadata: MetaData) -> None:
    """Set every serial/identity sequence past the largest copied id, so the next row the app
    inserts gets a new one (the copy wrote the ids itself; the sequences never moved)."""
    for table in metadata.sorted_tables:
        keys = list(table.primary_key.columns)
        if len(keys) != 1 or not isinstance(keys[0].type, Integer):
            continue
        column = keys[0].name
        sequence = conn.execute(
            text("SELECT pg_get_serial_sequence(:table, :column)"), {"table": table.name, "column": column}
        ).scalar_one()
        if sequence is None:
            continue
        conn.execute(
            text(
                f'SELECT setval(:sequence, COALESCE((SELECT MAX("{column}") FROM "{table.name}"), 0) + 1, false)'
            ),
            {"sequence": sequence},
        )

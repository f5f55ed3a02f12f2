"""The engine: SQLite through pysqlite3 (it can load extensions), sqlite-vec on every connection,
WAL and foreign keys; or, given SUGO_DATABASE_URL, PostgreSQL through psycopg 3. SQLite-specific SQL
stays in this module."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pysqlite3.dbapi2 as sqlite3
import sqlite_vec
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

from app.platform.settings import POSTGRES_URL_PREFIX

log = logging.getLogger(__name__)
MMAP_SIZE = 2**31 - 2**16  # SQLite's default ceiling (SQLITE_MAX_MMAP_SIZE)


def _on_connect(dbapi_conn, _record) -> None:
    dbapi_conn.enable_load_extension(True)
    sqlite_vec.load(dbapi_conn)
    dbapi_conn.enable_load_extension(False)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=5000")
    # Reads go straight to the operating system's file cache instead of being copied into each
    # connection's own small page cache: a search's full-text postings and vectors are read on
    # whichever pooled connection its thread gets, and no longer evicted from it by the others'.
    # (The most a build allows; a bigger database is mapped in part, the rest read as before.)
    cur.execute(f"PRAGMA mmap_size={MMAP_SIZE}")
    cur.close()


def _owner_only(database_path: Path) -> None:
    # The database holds chats and sealed keys: owner-only, created so from the start. SQLite
    # gives its -wal and -shm files the database file's mode.
    os.close(os.open(database_path, os.O_WRONLY | os.O_CREAT, 0o600))
    for path in (database_path, *(database_path.with_name(database_path.name + s) for s in ("-wal", "-shm"))):
        if path.exists():
            path.chmod(0o600)


class DataFolderError(RuntimeError):
    """The data folder cannot be written: one sentence naming it, for the console at start."""


_WHY = {
    errno.EACCES: "permission denied", errno.EPERM: "permission denied", errno.EROFS: "read-only file system",
    errno.ENOTDIR: "a part of the path is a file", errno.EEXIST: "a part of the path is a file",
    errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
}  # fmt: skip # a table: errno to the words the console shows, in rows


def check_data_folder(data_dir: Path, database_name: str = "sugo.db") -> None:
    """Make the data folder if it is missing (owner-only, 0700: the avatars in it are as private as the
    chats; a folder the owner made, such as a Docker volume, keeps its permissions), then make sure Sugo
    can write there and to its database: checked before anything else, so a read-only folder stops the
    start with a sentence instead of a traceback from deep inside SQLite."""
    try:
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            data_dir.mkdir(mode=0o700)
        probe = data_dir / f".sugo-write-check-{os.getpid()}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
        if (data_dir / database_name).exists():
            os.close(os.open(data_dir / database_name, os.O_RDWR))
    except OSError as err:
        why = _WHY.get(err.errno or 0, err.strerror or str(err)).lower()
        raise DataFolderError(
            f"Sugo cannot write to its data folder {data_dir} ({why}): let the user running Sugo "
            "write there, or point SUGO_DATA_DIR at another folder."
        ) from err


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_text(value: Any) -> str:
    """JSON columns' text on both databases. JSON has no Infinity or NaN: PostgreSQL refuses them and
    SQLite's JSON functions cannot read them, yet an imported file may carry one in a field kept for
    the round trip (a SillyTavern swipe_id of 1e999): such a number is stored as null."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False)


def make_engine(database: Path | str, *, pool_size: int = 5, max_overflow: int = 10) -> Engine:
    """The SQLite file at a path, or the PostgreSQL database a postgresql+psycopg:// URL names; its
    pool keeps `pool_size` connections and opens up to `max_overflow` more at busy times."""
    pool = {"pool_size": pool_size, "max_overflow": max_overflow}
    if isinstance(database, str):
        return _postgres_engine(database, pool)
    database_path = database
    database_path.parent.mkdir(parents=True, exist_ok=True)
    _owner_only(database_path)
    engine = create_engine(
        f"sqlite:///{database_path}",
        module=sqlite3,
        connect_args={"check_same_thread": False, "timeout": 30},
        json_serializer=json_text,
        **pool,
    )
    event.listen(engine, "connect", _on_connect)
    return engine


def _postgres_engine(url: str, pool: dict[str, int]) -> Engine:
    if not url.startswith(POSTGRES_URL_PREFIX):
        raise ValueError(
            f"A database URL starts with {POSTGRES_URL_PREFIX}; a SQLite database is given as a path."
        )
    # pool_pre_ping: a connection the server closed (a restart, a failover) is replaced, not handed
    # out. Sessions run in UTC, as SQLite stores every time: a timestamp column without a zone
    # reads back the instant that was written whatever the server's own time zone.
    return create_engine(
        url,
        pool_pre_ping=True,
        connect_args={"options": "-c timezone=UTC"},
        json_serializer=json_text,
        **pool,
    )


def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits on success and rolls back on error (the request owns the transaction)."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except Exception:
            session.rollback()
            raise


def lock_for_write(session: Session, scope: tuple[int, int] | None = None) -> None:
    """Take the write lock now, before reading what this transaction will change: SQLite's driver
    opens a transaction only at the first write, so a row read before it could change underneath (a
    reply's version list, rewritten by the stream's writer and by the user's swipe actions). A no-op
    when the transaction already writes.

    On PostgreSQL, transaction-scoped advisory locks, held until commit or rollback (its reads after
    them see every commit made before, read committed), across every server. A write about one thing,
    `scope` (`chat_scope(chat_id)`: the rows of one chat), waits only for writes about the same thing
    and for the unscoped ones; an unscoped write waits for every other. One lock for all (as SQLite's
    one writer) made every reply's stored partial text wait for every other chat's, on every server:
    under a load of 100 users, the writers queued on it and held their pool's connections meanwhile.
    A transaction takes one kind: scoped locks, or the unscoped one (holding a scoped lock, asking for
    the unscoped one could deadlock against another doing the same)."""
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        if scope is None:
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
        else:  # shared on the unscoped key (which waits for none of these), then the scope's own
            conn.exec_driver_sql(
                "SELECT pg_advisory_xact_lock_shared(%s), pg_advisory_xact_lock(%s, %s)",
                (WRITE_LOCK_KEY, *scope),
            )
        return
    if not conn.connection.driver_connection.in_transaction:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def chat_scope(chat_id: int) -> tuple[int, int]:
    """`lock_for_write`'s scope for the rows of one chat (its messages and what hangs off them)."""
    return (CHAT_WRITE_LOCK_CLASS, chat_id)


@contextlib.contextmanager
def contained(session: Session) -> Iterator[None]:
    """Work whose failure is caught and passed over (a prompt source that fails is left out of the
    prompt) keeps the rest of the transaction usable: on PostgreSQL a failed statement aborts the
    whole transaction, so the work runs in a savepoint, rolled back on error. SQLite fails only the
    statement, and the savepoint would open a transaction its driver does not expect: nothing there."""
    if session.get_bind().dialect.name != "postgresql":
        yield
        return
    with session.begin_nested():
        yield


# The advisory lock keys lock_for_write takes on PostgreSQL (any numbers; other locks use other keys):
# the unscoped key (one 64-bit key), and the first halves of its scopes' two 32-bit keys (a key space
# apart from the 64-bit one).
WRITE_LOCK_KEY = 0x5760_0001
CHAT_WRITE_LOCK_CLASS = 0x5760_0002
LONG_TERM_MEMORY_LOCK_CLASS = 0x5760_0003


def vec_version(engine: Engine) -> str:
    with engine.connect() as conn:
        return conn.exec_driver_sql("select vec_version()").scalar_one()


def is_disk_full(exc: BaseException) -> bool:
    """Whether a database error means the disk (or the database's size limit) is full: SQLite's
    SQLITE_FULL, "database or disk is full", or PostgreSQL's disk_full (53100). The transaction was
    rolled back; nothing changed."""
    orig = getattr(exc, "orig", exc)
    if getattr(orig, "sqlstate", None) == PG_DISK_FULL:
        return True
    if not isinstance(orig, sqlite3.OperationalError):
        return False
    return getattr(orig, "sqlite_errorcode", None) == SQLITE_FULL or "disk is full" in str(orig).lower()


SQLITE_FULL = 13
PG_DISK_FULL = "53100"
# PostgreSQL's "another writer was in the way": lock_not_available, deadlock_detected, serialization_failure.
PG_BUSY = frozenset({"55P03", "40P01", "40001"})


def is_busy(exc: BaseException) -> bool:
    """Whether a database error means only that another writer held the lock past the busy timeout
    (a long import): worth a "try again", not an internal error."""
    orig = getattr(exc, "orig", exc)
    if getattr(orig, "sqlstate", None) in PG_BUSY:
        return True
    return isinstance(orig, sqlite3.OperationalError) and "locked" in str(orig).lower()

"""Sugo serving from PostgreSQL (issue 26): the app starts on a migrated PostgreSQL database, and the
storage helpers every module uses behave there as on SQLite."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from app.platform.db import chat_scope, is_busy, is_disk_full, lock_for_write, make_engine
from tests.conftest import add_character, new_chat
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres


def test_a_chat_is_made_and_read_back_from_postgresql(postgres_sugo):
    with postgres_sugo.client() as api:
        character = add_character(api, "Aria")
        chat = new_chat(api, [character["id"]])
        read = api.get(f"/api/chats/{chat['id']}")
        assert read.status_code == 200, read.text
        assert postgres_sugo.engine.dialect.name == "postgresql"


def test_lock_for_write_makes_a_second_writer_wait_for_the_first_on_postgresql(migrated_postgres_url):
    """Two servers' transactions that each read, then write what they read, take turns: the second
    waits in lock_for_write until the first commits, then reads what the first wrote."""
    engine = make_engine(migrated_postgres_url)
    seen: list[int] = []
    try:
        with Session(engine) as first:
            lock_for_write(first)
            first.connection().exec_driver_sql("CREATE TABLE counter (n INTEGER)")
            first.connection().exec_driver_sql("INSERT INTO counter VALUES (1)")

            def second_writer() -> None:
                with Session(engine) as second:
                    lock_for_write(second)
                    seen.append(
                        second.connection().exec_driver_sql("SELECT count(*) FROM counter").scalar_one()
                    )
                    second.commit()

            thread = threading.Thread(target=second_writer)
            thread.start()
            with engine.connect() as watcher:
                wait_for(
                    lambda: watcher.exec_driver_sql(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    ).scalar_one(),
                    what="the second writer waiting for the lock",
                )
            assert seen == []
            first.commit()
        thread.join(30)
        assert seen == [1]
    finally:
        engine.dispose()


def _waits(engine, holder_scope, asker_scope) -> bool:
    """Whether a transaction asking lock_for_write(asker_scope) waits while another holds
    lock_for_write(holder_scope); it always gets it once the holder commits."""
    got = threading.Event()
    with Session(engine) as holder:
        lock_for_write(holder, holder_scope)

        def ask() -> None:
            with Session(engine) as asker:
                lock_for_write(asker, asker_scope)
                got.set()
                asker.commit()

        thread = threading.Thread(target=ask)
        thread.start()
        with engine.connect() as watcher:  # the asker got it, or is seen waiting for it
            state = wait_for(
                lambda: (
                    "got it"
                    if got.is_set()
                    else "waits"
                    if watcher.exec_driver_sql(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                    ).scalar_one()
                    else None
                ),
                what="the second writer to get the lock or wait for it",
            )
        holder.commit()
    thread.join(30)
    assert got.is_set()
    return state == "waits"


def test_writes_about_two_chats_do_not_wait_for_each_other_on_postgresql(migrated_postgres_url):
    """A reply stored in one chat does not wait for another chat's (every server's replies store their
    partial text as they stream); the same chat's writes take turns, and an unscoped write (the login
    throttle, the replies a dead server left) waits for every scoped one, and they for it."""
    engine = make_engine(migrated_postgres_url)
    try:
        assert not _waits(engine, chat_scope(1), chat_scope(2))
        assert _waits(engine, chat_scope(1), chat_scope(1))
        assert _waits(engine, chat_scope(1), None)
        assert _waits(engine, None, chat_scope(2))
        assert _waits(engine, None, None)
    finally:
        engine.dispose()


def test_busy_and_disk_full_are_recognised_on_postgresql(migrated_postgres_url):
    engine = make_engine(migrated_postgres_url)
    try:
        with engine.connect() as holder, engine.connect() as other:
            holder.exec_driver_sql("CREATE TABLE t (n INTEGER)")
            holder.commit()
            holder.exec_driver_sql("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
            other.exec_driver_sql("SET lock_timeout = '50ms'")
            with pytest.raises(OperationalError) as caught:
                other.exec_driver_sql("SELECT * FROM t")
            assert is_busy(caught.value) and not is_disk_full(caught.value)
            holder.rollback()
    finally:
        engine.dispose()

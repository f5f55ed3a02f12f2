"""Chat Settings asks for the connections from half a dozen sections: they are read once per session
(issue 23), and the list is never stale: a connection added, changed, made default or deleted in the
session is seen at once, and a commit or rollback reads them again."""

from __future__ import annotations

import pytest
from sqlalchemy import event
from sqlmodel import Session

from app.chats.models import Chat
from app.chats.service import chat_connection
from app.connections.models import Connection
from app.connections.service import default_connection, list_connections, set_default
from app.platform.db import make_engine
from app.platform.migrate import upgrade_database


@pytest.fixture
def engine(tmp_path):
    engine = make_engine(tmp_path / "sugo.db")
    upgrade_database(engine)
    return engine


@pytest.fixture
def reads(engine) -> list[str]:
    """The statements that read the connection table."""
    seen: list[str] = []

    def statement(conn, cursor, sql, params, context, executemany) -> None:
        if sql.lstrip().upper().startswith("SELECT") and "FROM connection" in sql:
            seen.append(sql)

    event.listen(engine, "before_cursor_execute", statement)
    return seen


def _names(session: Session) -> list[str]:
    return [c.name for c in list_connections(session)]


def test_one_read_answers_every_ask_of_a_session(engine, reads):
    with Session(engine) as s:
        s.add_all([Connection(name="B", base_url="http://b"), Connection(name="A", base_url="http://a")])
        s.add(Chat(name="c"))
        s.commit()
        reads.clear()
        chat = s.get(Chat, 1)
        for _ in range(3):
            assert _names(s) == ["A", "B"]
            assert default_connection(s).name == "B"  # none marked default: the oldest
            assert chat_connection(s, chat).name == "B"
        assert len(reads) == 1


def test_the_list_follows_what_the_session_changes(engine, reads):
    with Session(engine) as s:
        s.add(Connection(name="B", base_url="http://b"))
        s.commit()
        assert _names(s) == ["B"]
        s.add(Connection(name="A", base_url="http://a"))  # not flushed yet
        assert _names(s) == ["A", "B"]
        c = Connection(name="C", base_url="http://c")
        s.add(c)
        s.flush()
        assert _names(s) == ["A", "B", "C"]
        set_default(s, c.id)
        assert _names(s) == ["C", "A", "B"] and default_connection(s).name == "C"
        s.delete(c)
        assert _names(s) == ["A", "B"]
        s.rollback()
        assert _names(s) == ["B"]
    with Session(engine) as other:
        other.add(Connection(name="D", base_url="http://d"))
        other.commit()
    with Session(engine) as s:
        assert _names(s) == ["B", "D"]

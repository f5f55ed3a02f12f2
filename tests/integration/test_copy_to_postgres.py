"""`python -m app copy-to-postgres URL` (issue 26): a real data folder, filled through a live Sugo's
API and the test model server, copied into a real PostgreSQL (tests/support/postgres.py) by the real
entry point in a process of its own, then every table of the models compared row by row. A target
that holds rows, a row PostgreSQL refuses and a NUL character each leave the target as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, select, text, update
from sqlalchemy.engine import make_url
from sqlmodel import Session
from sqlmodel import select as sqlmodel_select

from app.characters.models import Character
from app.chats.models import Message
from app.memory.recall.jobs import embed_chat
from app.memory.recall.models import MemoryChunk
from app.models import metadata
from app.platform.copy_to_postgres import copy_to_postgres
from app.platform.db import make_engine
from app.platform.migrate import alembic_config, upgrade_database
from app.tools.registry import ToolContext
from tests.conftest import SERAPHINA_PNG, add_character, add_connection, new_chat, read_sse
from tests.integration.test_memory_recall import _fill
from tests.support.live import LiveSugo

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-Pw-never-shown"
# Tables a folder filled as below holds rows in: the comparison must not pass on empty tables.
FILLED = {
    "connection", "app_default", "image", "persona", "character", "chat", "chat_character", "message", "lorebook",
    "lorebook_entry", "lorebook_link", "memory_chunk", "memory_vector", "summary_entry", "task",
    "long_term_memory", "chat_memory",
}  # fmt: skip


@pytest.fixture(scope="module")
def filled_folder(tmp_path_factory, model_server) -> Path:
    """A data folder with rows in as many tables as the API reaches, Sugo stopped."""
    data_dir = tmp_path_factory.mktemp("source") / "data"
    model_server.reset()
    model_server.new_epoch()
    with LiveSugo(data_dir) as sugo, sugo.client() as api:
        add_connection(api, model_server, api_key="sk-test-key-123")
        r = api.put("/api/connections/defaults", json={"embeddings": "builtin:all-MiniLM-L6-v2"})
        assert r.status_code == 200, r.text
        r = api.post("/api/personas", json={"name": "Rowan", "description": "A walker."})
        assert r.status_code == 201, r.text
        avatar = {"file": ("rowan.png", SERAPHINA_PNG.read_bytes())}  # an image's bytes: a blob
        assert api.post(f"/api/personas/{r.json()['id']}/avatar", files=avatar).status_code == 200
        char = add_character(api, tags=["bard", "wanderer"])
        chat = new_chat(api, [char["id"]], name="On the road")
        model_server.script("Hello, traveller — «café» 🎻", "A second hello.")
        events = read_sse(
            api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Hi!"})
        )
        assert events[-1][0] == "done", events
        events = read_sse(api.post(f"/api/chats/{chat['id']}/generate", json={"action": "swipe"}))
        assert events[-1][0] == "done", events
        book = api.post("/api/lorebooks", json={"name": "The coast"}).json()
        for key in ("lighthouse", "dunes"):
            r = api.post(
                f"/api/lorebooks/{book['id']}/entries", json={"keys": [key], "content": f"The {key}."}
            )
            assert r.status_code == 201, r.text
        r = api.put(f"/api/chats/{chat['id']}/lorebooks", json={"book_ids": [book["id"]]})
        assert r.status_code == 200, r.text
        r = api.post(
            f"/api/chats/{chat['id']}/summaries", json={"content": "They met on the road.", "last": 2}
        )
        assert r.status_code == 201, r.text
        r = api.post("/api/memories", json={"content": "Rowan likes tea.", "character_id": char["id"]})
        assert r.status_code == 201, r.text
        r = api.post(f"/api/chats/{chat['id']}/memory/notes", json={"text": "Aria owes Rowan a song."})
        assert r.status_code == 201, r.text
        tool = sugo.services.tools.get("create_task")
        ctx = ToolContext(sugo.services, chat["id"], char["id"], None, None, sugo.services.clock.now())
        tool.run(ctx, tool.args.model_validate({"purpose": "Remind Rowan to rest.", "hours_from_now": 2}))
        # A chat past its first memories: the messages, then the memory job run to its end.
        memories = new_chat(api, [char["id"]], name="Long walk")
        _fill(sugo, memories["id"], char["id"], n=30, fact_at=10)
        embed_chat(sugo.services, memories["id"])  # a sweep may have done part of it: both count
        with Session(sugo.engine) as s:
            chunks = s.exec(sqlmodel_select(MemoryChunk).where(MemoryChunk.chat_id == memories["id"])).all()
        assert chunks and all(c.status == "vectorized" for c in chunks)
    return data_dir


def _folder_copy(filled_folder: Path, tmp_path: Path) -> Path:
    data_dir = tmp_path / "data"
    shutil.copytree(filled_folder, data_dir)
    return data_dir


def _with_password(url: str) -> str:
    # The test server trusts its socket and ignores the password; the command must not show it.
    return make_url(url).set(password=PASSWORD).render_as_string(hide_password=False)


def _run_command(data_dir: Path, url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUGO_")}
    env.update(SUGO_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-m", "app", "copy-to-postgres", _with_password(url)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert PASSWORD not in done.stdout + done.stderr
    return done


def _normal(value):
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _rows(engine, table) -> list[dict]:
    with engine.connect() as conn:
        rows = conn.execute(select(table).order_by(*table.primary_key.columns))
        return [{k: _normal(v) for k, v in row._mapping.items()} for row in rows]


def _counts(engine) -> dict[str, int]:
    present = set(inspect(engine).get_table_names())
    with engine.connect() as conn:
        return {
            t.name: conn.execute(select(text("count(*)")).select_from(t)).scalar_one()
            for t in metadata.sorted_tables
            if t.name in present
        }


@pytest.fixture
def target(postgres_url):
    engine = make_engine(postgres_url)
    yield postgres_url, engine
    engine.dispose()


def test_every_table_arrives_equal(filled_folder, tmp_path, target):
    url, pg = target
    data_dir = _folder_copy(filled_folder, tmp_path)
    done = _run_command(data_dir, url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    source = make_engine(data_dir / "sugo.db")
    try:
        counts = _counts(source)
        assert lines[:-1] == [f"{t.name}={counts[t.name]}" for t in metadata.sorted_tables]
        assert lines[-1].startswith(f"Copied {sum(counts.values())} rows in {len(counts)} tables")
        assert "fts_memory_chunk" in lines[-1] and "not copied" in lines[-1]
        filled = {name for name, n in counts.items() if n}
        assert FILLED <= filled, FILLED - filled
        empty = set(counts) - filled
        assert empty, "a table with no rows in the source is compared too"
        compared = set()
        for table in metadata.sorted_tables:
            assert _rows(pg, table) == _rows(source, table), table.name
            compared.add(table.name)
        assert compared == set(metadata.tables) and empty <= compared
        # memory_chunk_count has no model: PostgreSQL's triggers counted the memories as they arrived.
        counted = "SELECT chat_id, chunks FROM memory_chunk_count WHERE chunks > 0 ORDER BY chat_id"
        with source.connect() as lite, pg.connect() as conn:
            assert list(conn.execute(text(counted))) == list(lite.execute(text(counted))) != []
        # The values whose types differ between the two databases came through as values.
        with Session(pg) as session:
            message = session.exec(sqlmodel_select(Message).where(Message.content == "A second hello.")).one()
            assert [s["content"] for s in message.swipes] == [
                "Hello, traveller — «café» 🎻",
                "A second hello.",
            ]
            assert message.active_swipe == 1
            assert isinstance(message.created_at, datetime) and isinstance(message.hidden, bool)
            vector = session.execute(text("SELECT embedding FROM memory_vector LIMIT 1")).scalar_one()
            assert isinstance(vector, bytes) and len(vector) == 384 * 4
    finally:
        source.dispose()


def test_the_next_row_gets_a_new_id_after_the_copy(filled_folder, tmp_path, target):
    url, pg = target
    source = make_engine(_folder_copy(filled_folder, tmp_path) / "sugo.db")
    try:
        result = copy_to_postgres(source, url, metadata, batch_rows=7)  # several batches per table
        highest = {
            t: max((r["id"] for r in _rows(source, metadata.tables[t])), default=0)
            for t in ("character", "message")
        }
    finally:
        source.dispose()
    assert dict(result.rows)["message"] > 7
    with Session(pg) as session:
        character = Character(name="Newcomer")
        session.add(character)
        session.commit()
        assert character.id == highest["character"] + 1
        chat_id = session.execute(text("SELECT min(id) FROM chat")).scalar_one()
        message = Message(chat_id=chat_id, role="user", name="U", content="After the move.")
        session.add(message)
        session.commit()
        assert message.id == highest["message"] + 1


def test_a_target_that_holds_rows_is_refused_and_left_as_it_was(filled_folder, tmp_path, target):
    url, pg = target
    upgrade_database(pg)
    with Session(pg) as session:
        session.add(Character(name="Already here"))
        session.commit()
    before = {t.name: _rows(pg, t) for t in metadata.sorted_tables}
    done = _run_command(_folder_copy(filled_folder, tmp_path), url)
    assert done.returncode == 1 and done.stdout == ""
    assert "already holds Sugo's rows (table character)" in done.stderr
    assert "nothing was written" in done.stderr
    assert {t.name: _rows(pg, t) for t in metadata.sorted_tables} == before


def _change_source(data_dir: Path, statement) -> None:
    engine = make_engine(data_dir / "sugo.db")
    try:
        with engine.begin() as conn:
            assert conn.execute(statement).rowcount == 1
    finally:
        engine.dispose()


def test_a_row_postgresql_refuses_half_way_leaves_the_target_as_it_was(filled_folder, tmp_path, target):
    url, pg = target
    data_dir = _folder_copy(filled_folder, tmp_path)
    # SQLite keeps any integer; PostgreSQL's integer column stops at 2**31 - 1. The message table is
    # copied after the connections, characters and chats: those were written, then undone.
    last = select(text("max(id)")).select_from(metadata.tables["message"]).scalar_subquery()
    _change_source(
        data_dir,
        update(metadata.tables["message"])
        .where(metadata.tables["message"].c.id == last)
        .values(active_swipe=2**40),
    )
    done = _run_command(data_dir, url)
    assert done.returncode == 1 and done.stdout == ""
    assert "refused a row of table message" in done.stderr, done.stderr
    assert "nothing was written" in done.stderr
    # Not even the schema stayed: the database is as empty as it was given.
    assert inspect(pg).get_table_names() == []


def test_a_nul_character_is_refused_naming_its_table_column_and_row(filled_folder, tmp_path, target):
    url, pg = target
    data_dir = _folder_copy(filled_folder, tmp_path)
    characters = metadata.tables["character"]
    _change_source(
        data_dir, update(characters).where(text("name = 'Aria'")).values(description="A bard\x00.")
    )
    source = make_engine(data_dir / "sugo.db")
    with source.connect() as conn:
        aria = conn.execute(text("SELECT id FROM character WHERE name = 'Aria'")).scalar_one()
    source.dispose()
    done = _run_command(data_dir, url)
    assert done.returncode == 1 and done.stdout == ""
    assert f"Table character, column description, row id={aria} holds a NUL character" in done.stderr
    assert inspect(pg).get_table_names() == []


def test_a_data_folder_behind_this_sugos_schema_is_refused(filled_folder, tmp_path, target):
    url, pg = target
    data_dir = _folder_copy(filled_folder, tmp_path)
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    older = ScriptDirectory.from_config(alembic_config()).get_revision(head).down_revision
    _change_source(data_dir, text(f"UPDATE alembic_version SET version_num = '{older}'"))
    done = _run_command(data_dir, url)
    assert done.returncode == 1 and done.stdout == ""
    assert f"at schema revision {older}, not this Sugo's newest ({head}): start Sugo once" in done.stderr
    assert inspect(pg).get_table_names() == []

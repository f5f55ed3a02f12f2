"""A reply being written while the user changes its message's versions, over real HTTP with the
test model server streaming slowly."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3
from sqlalchemy import select, text
from sqlmodel import Session

from app.chats.models import Message
from app.chats.service import INTERRUPTED
from app.models import metadata
from app.platform.db import lock_for_write, make_engine
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.live import LiveSugo
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

LONG = "word " * 150  # about 3 s at 5 characters every 20 ms


def _chat_with_a_reply(api, models) -> tuple[dict, dict]:
    add_connection(api, models)
    chat = new_chat(api, [add_character(api)["id"]])
    models.script("First answer", Reply(text=LONG, chunk_size=5, delay_s=0.02))
    r = api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Question"})
    assert read_sse(r)[-1][0] == "done"
    return chat, api.get(f"/api/chats/{chat['id']}/messages").json()[-1]


def _start_new_version(sugo, chat_id: int, message_id: int) -> tuple[threading.Thread, dict]:
    result: dict = {}

    def run() -> None:
        with sugo.client() as client:
            r = client.post(
                f"/api/chats/{chat_id}/generate", json={"action": "swipe", "message_id": message_id}
            )
            result["events"] = read_sse(r)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def _second_version(api, chat_id: int) -> dict:
    swipes = api.get(f"/api/chats/{chat_id}/messages").json()[-1]["swipes"]
    return swipes[1] if len(swipes) > 1 else {}


def test_deleting_an_earlier_version_while_a_reply_streams_keeps_the_reply(api, sugo, models):
    chat, reply = _chat_with_a_reply(api, models)
    thread, result = _start_new_version(sugo, chat["id"], reply["id"])
    wait_for(lambda: _second_version(api, chat["id"]).get("content"), what="the new version's first words")
    r = api.delete(f"/api/chats/{chat['id']}/messages/{reply['id']}/swipes/0")
    assert r.status_code == 200, r.text
    assert [s["content"] for s in r.json()["swipes"]] != ["First answer"]
    thread.join(20)
    assert result["events"][-1][0] == "done"
    last = api.get(f"/api/chats/{chat['id']}/messages").json()[-1]
    assert [(s["content"], s["status"]) for s in last["swipes"]] == [(LONG, "ok")]
    assert last["active_swipe"] == 0 and last["content"] == LONG and last["status"] == "ok"


def test_a_version_deleted_while_the_writer_holds_the_message_is_deleted_from_what_it_wrote(
    api, sugo, models
):
    """The stream's writer and a swipe action both rewrite the message's versions: the action waits
    for the writer's transaction and reads what it wrote, so neither undoes the other."""
    chat, reply = _chat_with_a_reply(api, models)
    models.script("Second answer")
    assert read_sse(api.post(f"/api/chats/{chat['id']}/generate", json={"action": "swipe"}))[-1][0] == "done"
    result: dict = {}
    with Session(sugo.engine) as writer:
        lock_for_write(writer)  # as ReplyWriter.write does
        msg = writer.get(Message, reply["id"])
        deleting = threading.Thread(
            target=lambda: result.setdefault(
                "r", api.delete(f"/api/chats/{chat['id']}/messages/{reply['id']}/swipes/0")
            )
        )
        deleting.start()
        time.sleep(0.3)  # the delete has arrived and waits for the lock (were it late, nothing fails)
        msg.swipes = [msg.swipes[0], {**msg.swipes[1], "content": "Second answer, continued"}]
        writer.add(msg)
        writer.commit()
    deleting.join(10)
    assert result["r"].status_code == 200, result["r"].text
    assert [s["content"] for s in result["r"].json()["swipes"]] == ["Second answer, continued"]
    last = api.get(f"/api/chats/{chat['id']}/messages").json()[-1]
    assert [s["content"] for s in last["swipes"]] == ["Second answer, continued"]


def _crash_copy(live: LiveSugo, to: Path, request) -> str | None:
    """The data folder as a crash at this moment would leave it: what the database has committed
    (SQLite's online backup reads one consistent snapshot), and the key files. On PostgreSQL the
    committed rows go to a new database (one repeatable-read snapshot), whose URL is returned."""
    shutil.copytree(live.settings.data_dir, to, ignore=shutil.ignore_patterns("sugo.db*"))
    if live.engine.dialect.name == "postgresql":
        server = request.getfixturevalue("postgres_server")
        name = server.migrated_database()
        request.addfinalizer(lambda: server.drop_database(name))
        return _postgres_crash_copy(live, server.url(name))
    source, copy = sqlite3.connect(live.settings.database_path), sqlite3.connect(to / "sugo.db")
    try:
        source.backup(copy)
    finally:
        source.close()
        copy.close()
    return None


def _postgres_crash_copy(live: LiveSugo, url: str) -> str:
    target = make_engine(url)
    try:
        with live.engine.connect() as source, target.begin() as copy:
            source = source.execution_options(isolation_level="REPEATABLE READ")
            for table in metadata.sorted_tables:
                rows = [dict(row._mapping) for row in source.execute(select(table))]
                if rows:
                    copy.execute(table.insert(), rows)
            for table in metadata.sorted_tables:  # the next row gets a new id, as after a real restart
                if "id" in table.c and table.c.id.primary_key and table.c.id.autoincrement:
                    copy.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                            f'COALESCE((SELECT max(id) FROM "{table.name}"), 0) + 1, false)'
                        )
                    )
    finally:
        target.dispose()
    return url


def test_a_version_cut_off_by_a_crash_after_switching_away_from_it_is_marked_at_start(
    tmp_path, api, sugo, models, request
):
    chat, reply = _chat_with_a_reply(api, models)
    thread, _ = _start_new_version(sugo, chat["id"], reply["id"])
    wait_for(lambda: _second_version(api, chat["id"]).get("content"), what="the new version's first words")
    shown = api.post(f"/api/chats/{chat['id']}/messages/{reply['id']}/swipe", json={"index": 0}).json()
    assert shown["content"] == "First answer" and shown["status"] == "ok"
    # Some more of the new version is stored after the switch, then the server "crashes".
    written = len(_second_version(api, chat["id"])["content"])
    wait_for(
        lambda: len(_second_version(api, chat["id"])["content"]) > written, what="more of the new version"
    )
    copied_url = _crash_copy(sugo, tmp_path / "after-crash", request)
    assert _second_version(api, chat["id"])["status"] == "streaming"
    api.post(f"/api/chats/{chat['id']}/stop")
    thread.join(20)

    with (
        # The same server started again (its name: its claims copied with the database are its own).
        LiveSugo(
            tmp_path / "after-crash", database_url=copied_url, server_name=sugo.settings.server
        ) as restarted,
        restarted.client() as client,
    ):
        last = client.get(f"/api/chats/{chat['id']}/messages").json()[-1]
    assert last["active_swipe"] == 0 and last["content"] == "First answer" and last["status"] == "ok"
    cut = last["swipes"][1]
    assert (
        cut["status"] == "partial"
        and cut["error"] == INTERRUPTED
        and LONG.startswith(cut["content"])
        and cut["content"]
    )

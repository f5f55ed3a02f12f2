"""Storage facts: migrations at start, WAL, foreign keys, sqlite-vec on the app's own engine."""

import json
import struct

import pytest
from sqlalchemy import text


def test_healthz(api):
    health = api.get("/healthz").json()
    assert health["status"] == "ok" and health["embedder"] in ("loading", "ready")


@pytest.mark.sqlite_only
def test_sqlite_vec_runs_a_vec0_query_through_the_apps_engine(sugo):
    with sugo.engine.begin() as conn:
        conn.execute(text("create virtual table vec_probe using vec0(embedding float[4])"))
        for rowid, vec in [(1, [1, 0, 0, 0]), (2, [0, 1, 0, 0]), (3, [0.9, 0.1, 0, 0])]:
            conn.execute(
                text("insert into vec_probe(rowid, embedding) values (:r, :v)"),
                {"r": rowid, "v": struct.pack("4f", *vec)},
            )
        rows = conn.execute(
            text(
                "select rowid, distance from vec_probe where embedding match :q and k = 2 order by distance"
            ),
            {"q": json.dumps([1, 0, 0, 0])},
        ).all()
    assert [r[0] for r in rows] == [1, 3]


@pytest.mark.sqlite_only
def test_wal_and_foreign_keys_are_on_for_every_connection(sugo):
    with sugo.engine.connect() as conn:
        assert conn.exec_driver_sql("pragma journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("pragma foreign_keys").scalar() == 1


@pytest.mark.sqlite_only
def test_migrations_are_applied_at_start(sugo):
    with sugo.engine.connect() as conn:
        version = conn.exec_driver_sql("select version_num from alembic_version").scalar()
        tables = {r[0] for r in conn.exec_driver_sql("select name from sqlite_master where type='table'")}
    assert version
    assert {"chat", "message", "character", "persona", "connection", "image", "chat_character"} <= tables


@pytest.mark.sqlite_only
def test_data_folder_is_where_settings_say(sugo):
    assert (sugo.settings.data_dir / "sugo.db").exists()
    assert (sugo.settings.data_dir / "secret.key").exists()


def test_openapi_docs_work_offline(api):
    page = api.get("/docs").text
    assert "/static/swagger-ui-5.35.0/swagger-ui-bundle.js" in page and "cdn" not in page.lower()
    assert api.get("/static/swagger-ui-5.35.0/swagger-ui-bundle.js").status_code == 200
    paths = api.get("/openapi.json").json()["paths"]
    assert {
        "/api/chats",
        "/api/characters",
        "/api/personas",
        "/api/connections",
        "/api/chats/{chat_id}/generate",
    } <= set(paths)

"""Secrets the servers of one database share (app/platform/shared_secrets.py): the login session's
secret lives in the database, so logging out through one server ends the session on the other; an
older Sugo's session.key is carried over once; a server whose API-key file differs from the first
server's refuses to start on a shared database, and a single SQLite server carries on."""

from __future__ import annotations

import hashlib
import hmac
import re

import pytest
from itsdangerous import URLSafeTimedSerializer
from sqlalchemy import text

from app.connections.crypto import KeyFileMismatch
from app.main import build_services
from app.platform.settings import Settings
from app.web.auth import SESSION_COOKIE
from tests.support.live import LiveSugo
from tests.support.waiting import wait_for

PASSWORD = "correct horse"


def _log_in(client) -> None:
    r = client.post(
        "/login", data={"password": PASSWORD, "next": "/"}, headers={"Origin": str(client.base_url)}
    )
    assert r.status_code == 303, r.text


def _csrf(client) -> str:
    found = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/").text)
    assert found, "no CSRF token on the page"
    return found.group(1)


@pytest.mark.postgres
def test_logging_out_through_one_server_ends_the_session_on_the_other(tmp_path, migrated_postgres_url):
    data = tmp_path / "data"
    with (
        LiveSugo(data, password=PASSWORD, database_url=migrated_postgres_url, server_name="one") as one,
        LiveSugo(data, password=PASSWORD, database_url=migrated_postgres_url, server_name="two") as two,
        one.client() as on_one,
    ):
        _log_in(on_one)
        cookie = {SESSION_COOKIE: on_one.cookies[SESSION_COOKIE]}
        with two.client(cookies=cookie) as on_two:
            assert on_two.get("/api/chats").status_code == 200  # one secret: a login counts on both
            r = on_two.post("/logout", headers={"X-CSRF-Token": _csrf(on_two), "Origin": two.url})
            assert r.status_code == 303
        with one.client(cookies=cookie) as replay:
            wait_for(lambda: replay.get("/api/chats").status_code == 401, timeout=3)


@pytest.mark.postgres
def test_wrong_passwords_through_both_servers_add_up(tmp_path, migrated_postgres_url):
    data = tmp_path / "data"
    with (
        LiveSugo(data, password=PASSWORD, database_url=migrated_postgres_url, server_name="one") as one,
        LiveSugo(data, password=PASSWORD, database_url=migrated_postgres_url, server_name="two") as two,
        one.client() as a,
        two.client() as b,
    ):
        codes = [
            (a if i % 2 else b).get("/api/chats", headers={"Authorization": "Bearer guess"}).status_code
            for i in range(7)
        ]
        assert codes == [401] * 5 + [429] * 2


def test_an_older_session_key_file_is_carried_over_and_removed(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "session.key").write_text("the-secret-an-older-sugo-made\n")
    # A cookie as the older Sugo signed it, from the file and the password.
    key = hmac.new(b"the-secret-an-older-sugo-made", PASSWORD.encode(), hashlib.sha256).hexdigest()
    cookie = URLSafeTimedSerializer(key, salt="sugo-session").dumps({"auth": True, "csrf": "t"})
    with LiveSugo(data, password=PASSWORD) as live, live.client(cookies={SESSION_COOKIE: cookie}) as c:
        assert c.get("/api/chats").status_code == 200
        assert not (data / "session.key").exists()
        with live.engine.connect() as conn:
            stored = conn.execute(text("SELECT value FROM shared_secret WHERE name = 'session'")).scalar()
        assert stored == "the-secret-an-older-sugo-made"


@pytest.mark.postgres
def test_a_server_with_another_api_key_file_refuses_a_shared_database(tmp_path, migrated_postgres_url):
    data = tmp_path / "data"
    with LiveSugo(data, database_url=migrated_postgres_url, server_name="one"):
        pass
    other = Settings(
        data_dir=tmp_path / "other",
        database_url=migrated_postgres_url,
        start_scheduler=False,
        secret_key_file=tmp_path / "another.key",
    )
    with pytest.raises(KeyFileMismatch, match="needs the same key"):
        build_services(other)
    same = Settings(
        data_dir=tmp_path / "other",
        database_url=migrated_postgres_url,
        start_scheduler=False,
        secret_key_file=data / "secret.key",
    )
    services = build_services(same)  # a copy of the first server's key: accepted
    services.engine.dispose()


def test_a_single_server_whose_key_file_was_replaced_carries_on(tmp_path):
    data = tmp_path / "data"
    with LiveSugo(data):
        pass
    (data / "secret.key").unlink()
    with LiveSugo(data) as live, live.client() as c:  # a new key; saved API keys ask to be entered again
        assert c.get("/api/chats").status_code == 200
    with LiveSugo(data) as live, live.client() as c:  # and the new key is the one checked from now on
        assert c.get("/api/chats").status_code == 200

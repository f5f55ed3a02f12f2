"""Issue 10, findings 3, 6 and 10: no saved key leaves for another server (DNS rebinding, a local
process), password guessing is slowed and sessions can be ended, secrets are sealed at rest and
never shown."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sqlalchemy import text

from app.memory.recall.embedders import EmbeddingError, OpenAICompatible
from app.web import auth
from tests.conftest import add_connection
from tests.support.live import LiveSugo

SECRET = "sk-saved-secret-0123456789"
AZURE_KEY = "azure-secret-9876543210"


class Catcher:
    """A second HTTP server on loopback, standing for the attacker's: it records the headers of
    every request and answers 401 quoting the Authorization it got (as some servers do)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        catcher = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                catcher.seen.append({k.lower(): v for k, v in self.headers.items()})
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                quoted = f"{self.headers.get('authorization')} {self.headers.get('api-key')}"
                body = json.dumps({"error": {"message": f"Incorrect API key provided: {quoted}"}})
                self.send_response(401)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> Catcher:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def keys_received(self) -> list[str]:
        return [h[name] for h in self.seen for name in ("authorization", "api-key", "x-api-key") if name in h]


@pytest.fixture
def catcher():
    with Catcher() as c:
        yield c


def _netloc(live: LiveSugo, host: str) -> str:
    return f"{host}:{live.port}"


class TestRebinding:
    def test_a_rebinding_page_gets_no_saved_key(self, sugo, api, models, catcher):
        conn = add_connection(api, models, api_key=SECRET)
        evil = _netloc(sugo, "evil.example")
        r = api.post(
            "/connections/test",
            headers={"Host": evil, "Origin": f"http://{evil}"},
            data={"name": "x", "base_url": catcher.url, "connection_id": conn["id"]},
        )
        assert catcher.keys_received() == []
        assert r.status_code == 400
        assert "SUGO_ALLOWED_HOSTS" in r.json()["detail"]

    def test_a_local_process_gets_no_saved_key_for_another_address(self, api, models, catcher):
        conn = add_connection(api, models, api_key=SECRET)
        r = api.post(
            "/connections/test", data={"name": "x", "base_url": catcher.url, "connection_id": conn["id"]}
        )
        assert r.status_code == 200
        assert "type the key" in r.text
        assert catcher.seen == []
        # Typed again, the key goes where the user says.
        r = api.post(
            "/connections/test",
            data={"name": "x", "base_url": catcher.url, "connection_id": conn["id"], "api_key": "typed-key"},
        )
        assert catcher.keys_received() == ["Bearer typed-key"]

    def test_saving_another_address_needs_the_key_again(self, api, models, catcher):
        conn = add_connection(api, models, api_key=SECRET)
        body = {"name": "Test model", "base_url": catcher.url, "model": "test-model"}
        r = api.put(f"/api/connections/{conn['id']}", json=body)
        assert r.status_code == 400 and "type the key" in r.json()["detail"]
        r = api.post(f"/connections/{conn['id']}", data=body)
        assert r.status_code == 400 and "type the key" in r.json()["detail"]
        r = api.put(
            f"/api/connections/{conn['id']}",
            json={**body, "embedding_url": catcher.url, "base_url": models.base_url},
        )
        assert r.status_code == 400
        assert api.get(f"/api/connections/{conn['id']}").json()["base_url"] == models.base_url
        assert api.post(f"/api/connections/{conn['id']}/test").json()  # still the saved address
        assert catcher.seen == []
        # With the key typed again (or removed) the change is saved.
        r = api.put(f"/api/connections/{conn['id']}", json={**body, "api_key": "new-key"})
        assert r.status_code == 200 and r.json()["base_url"] == catcher.url
        api.post(f"/api/connections/{conn['id']}/test")
        assert catcher.keys_received() == ["Bearer new-key"]
        r = api.put(
            f"/api/connections/{conn['id']}", json={**body, "base_url": models.base_url, "clear_key": True}
        )
        assert r.status_code == 200 and r.json()["has_key"] is False

    def test_foreign_hosts_get_400_and_loopback_names_work(self, sugo, api):
        for host in ("evil.example", "127.0.0.1.evil.example", "localhost@evil.example", ""):
            r = api.get("/api/personas", headers={"Host": _netloc(sugo, host) if host else ""})
            assert r.status_code == 400, host
        for host in ("127.0.0.1", "localhost", "LOCALHOST", "[::1]"):
            assert api.get("/api/personas", headers={"Host": _netloc(sugo, host)}).status_code == 200, host
        assert api.get("/healthz", headers={"Host": "localhost"}).status_code == 200

    def test_sugo_allowed_hosts_adds_names(self, tmp_path):
        with LiveSugo(tmp_path / "d", allowed_hosts=("sugo.lan", "192.168.1.20")) as live, live.client() as c:
            assert c.get("/api/personas", headers={"Host": _netloc(live, "sugo.lan")}).status_code == 200
            assert c.get("/api/personas", headers={"Host": "192.168.1.20"}).status_code == 200
            assert c.get("/api/personas", headers={"Host": "evil.example"}).status_code == 400
            # The page at http://sugo.lan:8000 posts to itself (Host and Origin agree); another origin is refused.
            r = c.post(
                "/api/personas",
                json={"name": "Phone"},
                headers={"Host": "sugo.lan:8000", "Origin": "http://sugo.lan:8000"},
            )
            assert r.status_code == 201
            r = c.post("/api/personas", json={"name": "Evil"}, headers={"Origin": "http://sugo.lan:8000"})
            assert r.status_code == 403

    def test_origin_is_checked_against_the_allowed_names_not_the_host_header(self, sugo, api):
        evil = "http://evil.example"
        r = api.post("/api/personas", json={"name": "Evil"}, headers={"Origin": evil, "Host": "evil.example"})
        assert r.status_code in (400, 403)
        r = api.post("/api/personas", json={"name": "Evil"}, headers={"Origin": evil})
        assert r.status_code == 403
        # A page at localhost is another origin than 127.0.0.1; Sugo reached as localhost accepts its own.
        r = api.post(
            "/api/personas", json={"name": "Me"}, headers={"Origin": f"http://localhost:{sugo.port}"}
        )
        assert r.status_code == 403
        r = api.post(
            "/api/personas",
            json={"name": "Me"},
            headers={"Origin": f"http://localhost:{sugo.port}", "Host": f"localhost:{sugo.port}"},
        )
        assert r.status_code == 201


def _run_sugo(tmp_path, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SUGO_")}
    environ.update(SUGO_DATA_DIR=str(tmp_path / "d"), **env)
    return subprocess.run(
        [sys.executable, "-m", "app", "--host", "0.0.0.0", "--port", "1"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_refuses_to_listen_openly_without_a_password(tmp_path):
    done = _run_sugo(tmp_path)
    assert done.returncode != 0
    assert "Refusing to listen on 0.0.0.0 without a password" in done.stderr
    assert "SUGO_ALLOW_OPEN=1" in done.stderr
    assert not (tmp_path / "d").exists()  # refused before anything was written


def test_open_listening_rules():
    open_listening_refusal = auth.open_listening_refusal
    assert open_listening_refusal("127.0.0.1", password=None, allow_open=False) is None
    assert open_listening_refusal("::1", password=None, allow_open=False) is None
    assert open_listening_refusal("localhost", password=None, allow_open=False) is None
    assert open_listening_refusal("0.0.0.0", password="pw", allow_open=False) is None
    assert open_listening_refusal("0.0.0.0", password=None, allow_open=True) is None
    assert open_listening_refusal("192.168.1.20", password=None, allow_open=False)


# --- finding 6: guessing and sessions -------------------------------------------------------------


@pytest.fixture
def locked(tmp_path):
    with LiveSugo(tmp_path / "locked", password="open sesame") as live:
        yield live


def _log_in(client, password: str = "open sesame"):
    return client.post("/login", data={"password": password, "next": "/"}, follow_redirects=False)


def _csrf(client) -> str:
    return re.search(r'name="csrf-token" content="([^"]+)"', client.get("/").text).group(1)


class TestGuessing:
    def test_login_refuses_after_five_wrong_passwords(self, locked):
        with locked.client() as c:
            for _ in range(5):
                assert _log_in(c, "guess").status_code == 401
            r = _log_in(c)  # even the right one: otherwise guessing would go on at full speed
            assert r.status_code == 429
            assert int(r.headers["retry-after"]) >= 1
            assert "Too many wrong passwords" in r.text
            assert c.get("/api/chats").status_code == 401

    def test_bearer_tokens_are_throttled_too(self, locked):
        with locked.client() as c:
            for _ in range(5):
                assert c.get("/api/chats", headers={"Authorization": "Bearer guess"}).status_code == 401
            r = c.get("/api/chats", headers={"Authorization": "Bearer open sesame"})
            assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
            assert "Too many wrong passwords" in r.json()["detail"]
            assert _log_in(c).status_code == 429  # one count per address, whichever door

    def test_a_right_password_resets_the_count(self, locked):
        with locked.client() as c:
            for _ in range(4):
                assert _log_in(c, "guess").status_code == 401
            assert _log_in(c).status_code == 303
            c.cookies.clear()
            for _ in range(4):
                assert _log_in(c, "guess").status_code == 401
            assert _log_in(c).status_code == 303


class TestSessions:
    def test_old_cookie_stops_working_after_logout(self, locked):
        with locked.client() as c, locked.client() as other_device:
            assert _log_in(c).status_code == 303
            assert _log_in(other_device).status_code == 303
            old = dict(c.cookies)
            assert c.get("/api/chats").status_code == 200
            assert c.post("/logout", headers={"X-CSRF-Token": _csrf(c)}).status_code == 303
            assert other_device.get("/api/chats").status_code == 401  # logging out ends every session
        with locked.client(cookies=old) as replay:
            assert replay.get("/api/chats").status_code == 401

    def test_old_cookie_stops_working_after_the_password_changes(self, tmp_path):
        data = tmp_path / "d"
        with LiveSugo(data, password="first") as live, live.client() as c:
            assert _log_in(c, "first").status_code == 303
            old = dict(c.cookies)
        with LiveSugo(data, password="first") as live, live.client(cookies=old) as c:
            assert c.get("/api/chats").status_code == 200  # a restart alone keeps the session
        with LiveSugo(data, password="second") as live, live.client(cookies=old) as c:
            assert c.get("/api/chats").status_code == 401


# --- finding 10: secrets at rest and in answers ---------------------------------------------------


def _raw_headers(live: LiveSugo) -> str:
    with live.engine.connect() as db:
        return db.execute(text("select extra_headers from connection")).scalar_one()


class TestExtraHeaders:
    def test_sealed_at_rest_and_only_names_shown(self, sugo, api, models):
        conn = add_connection(api, models, extra_headers={"api-key": AZURE_KEY, "X-Title": "title-value-xyz"})
        assert AZURE_KEY not in _raw_headers(sugo) and "api-key" in _raw_headers(sugo)
        for r in (
            api.get("/api/connections"),
            api.get(f"/api/connections/{conn['id']}"),
            api.get(f"/connections/{conn['id']}"),
        ):
            assert r.status_code == 200 and AZURE_KEY not in r.text and "title-value-xyz" not in r.text
            assert "api-key" in r.text
        assert api.get(f"/api/connections/{conn['id']}").json()["extra_header_names"] == [
            "api-key",
            "X-Title",
        ]
        assert api.post(f"/api/connections/{conn['id']}/test").json()["ok"]
        assert models.last_request.headers["api-key"] == AZURE_KEY

    def test_editing_keeps_values_left_empty_and_takes_new_ones(self, api, models):
        conn = add_connection(api, models, extra_headers={"api-key": AZURE_KEY, "X-Title": "title-value-xyz"})
        form = {
            "name": "Test model",
            "base_url": models.base_url,
            "model": "test-model",
            "extra_headers": json.dumps({"api-key": "", "X-Title": "Renamed"}),
        }
        assert api.post(f"/connections/{conn['id']}", data=form).status_code == 200
        models.reset()
        api.post(f"/api/connections/{conn['id']}/test")
        assert models.last_request.headers["api-key"] == AZURE_KEY
        assert models.last_request.headers["x-title"] == "Renamed"
        # The form's Test button fills the empty value the same way.
        models.reset()
        r = api.post("/connections/test", data={**form, "connection_id": conn["id"]})
        assert "Connected" in r.text or "test-model" in r.text
        assert models.last_request.headers["api-key"] == AZURE_KEY
        # The JSON API: omitted keeps them all; a name left out is removed.
        body = {"name": "Test model", "base_url": models.base_url, "model": "test-model"}
        assert api.put(f"/api/connections/{conn['id']}", json=body).json()["extra_header_names"] == [
            "api-key",
            "X-Title",
        ]
        r = api.put(f"/api/connections/{conn['id']}", json={**body, "extra_headers": {"api-key": "new"}})
        assert r.json()["extra_header_names"] == ["api-key"]
        models.reset()
        api.post(f"/api/connections/{conn['id']}/test")
        assert models.last_request.headers["api-key"] == "new"

    def test_saved_header_values_are_not_sent_to_a_new_address(self, api, models, catcher):
        conn = add_connection(api, models, extra_headers={"api-key": AZURE_KEY})
        form = {
            "name": "x",
            "base_url": catcher.url,
            "extra_headers": json.dumps({"api-key": ""}),
            "connection_id": conn["id"],
        }
        assert "type the key" in api.post("/connections/test", data=form).text
        r = api.put(f"/api/connections/{conn['id']}", json={"name": "x", "base_url": catcher.url})
        assert r.status_code == 400
        assert catcher.seen == []

    def test_plain_text_headers_saved_before_keep_working_and_get_sealed(self, tmp_path, models):
        data = tmp_path / "d"
        with LiveSugo(data) as live, live.client() as c:
            conn = add_connection(c, models)
        with LiveSugo(data) as live:
            with live.engine.begin() as db:
                db.execute(
                    text("update connection set extra_headers = :h"),
                    {"h": json.dumps({"api-key": AZURE_KEY})},
                )
        with LiveSugo(data) as live, live.client() as c:
            assert AZURE_KEY not in _raw_headers(live)
            assert c.post(f"/api/connections/{conn['id']}/test").json()["ok"]
            assert models.last_request.headers["api-key"] == AZURE_KEY


def test_embedding_errors_never_show_the_key(catcher):
    embedder = OpenAICompatible(catcher.url, "embed-model", api_key=SECRET)
    with pytest.raises(EmbeddingError) as caught:
        embedder.embed_passages(["hello"])
    assert catcher.keys_received() == [f"Bearer {SECRET}"]  # the server did quote it back
    assert "401" in str(caught.value) and SECRET not in str(caught.value)


def test_provider_errors_never_show_header_values(api, catcher):
    body = {
        "name": "Azure",
        "base_url": catcher.url,
        "api_key": SECRET,
        "extra_headers": {"api-key": AZURE_KEY},
    }
    conn = api.post("/api/connections", json=body).json()
    message = api.post(f"/api/connections/{conn['id']}/test").json()["message"]
    assert catcher.keys_received() == [f"Bearer {SECRET}", AZURE_KEY]
    assert "Incorrect API key" in message and SECRET not in message and AZURE_KEY not in message


def test_secret_files_are_owner_only(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    (data / "sugo.db").touch(mode=0o644)
    (data / "sugo.db").chmod(0o644)  # an old database, made before this rule
    with LiveSugo(data, password="pw") as live, live.client() as c:
        assert c.get("/api/chats", headers={"Authorization": "Bearer pw"}).status_code == 200
        for name in ("sugo.db", "sugo.db-wal", "sugo.db-shm", "secret.key"):
            assert (data / name).stat().st_mode & 0o777 == 0o600, name
    fresh = tmp_path / "fresh"
    with LiveSugo(fresh, password="pw"):
        assert fresh.stat().st_mode & 0o777 == 0o700
        for name in ("sugo.db", "secret.key"):
            assert (fresh / name).stat().st_mode & 0o777 == 0o600, name


def test_prompt_snapshot_survives_a_replaced_secret_key(tmp_path, models):
    data = tmp_path / "d"
    with LiveSugo(data) as live, live.client() as c:
        add_connection(c, models, api_key=SECRET, extra_headers={"api-key": AZURE_KEY})
        char = c.post("/api/characters", json={"name": "Nox", "first_mes": "Hi."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    (data / "secret.key").unlink()  # the data folder restored without its key file
    with LiveSugo(data) as live, live.client() as c:
        r = c.get(f"/api/chats/{chat['id']}/prompt/snapshot", params={"format": "json"})
        assert r.status_code == 200 and r.json()["body"]["model"] == "test-model"
        assert "could not be decrypted" in c.post("/api/connections/1/test").json()["message"]

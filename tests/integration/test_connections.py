"""Connections over the API and the pages: keys encrypted at rest and never sent back."""

import re

from markupsafe import escape
from sqlalchemy import text

from app.connections.core.presets import PRESETS
from tests.conftest import add_connection
from tests.support.model_server import ModelServer

SECRET = "sk-test-very-secret-123"


def _everything_stored(sugo) -> str:
    """The database as stored: the SQLite file's bytes, or on PostgreSQL every row of every table as text."""
    if sugo.engine.dialect.name == "sqlite":
        return (sugo.settings.data_dir / "sugo.db").read_bytes().decode("latin-1")
    with sugo.engine.connect() as db:
        tables = (
            db.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars().all()
        )
        return "\n".join(
            str(row)
            for table in tables
            for row in db.execute(text(f'SELECT t::text FROM "{table}" t')).scalars()
        )


class TestConnectionKeys:
    def test_key_is_encrypted_at_rest_and_never_returned(self, api, sugo, models):
        conn = add_connection(api, models, api_key=SECRET)
        assert conn["has_key"] is True
        assert SECRET not in api.get("/api/connections").text
        assert SECRET not in api.get(f"/api/connections/{conn['id']}").text
        assert SECRET not in api.get(f"/connections/{conn['id']}").text
        assert SECRET not in api.get("/connections").text
        with sugo.engine.connect() as db:
            stored = db.execute(text("select api_key_encrypted from connection")).scalar_one()
        assert stored and SECRET not in stored
        assert SECRET not in _everything_stored(sugo)

    def test_empty_key_keeps_the_saved_one_and_clear_key_removes_it(self, api, models):
        conn = add_connection(api, models, api_key=SECRET)
        body = {"name": "Renamed", "base_url": models.base_url, "model": "test-model", "api_key": ""}
        assert api.put(f"/api/connections/{conn['id']}", json=body).json()["has_key"] is True
        body["clear_key"] = True
        assert api.put(f"/api/connections/{conn['id']}", json=body).json()["has_key"] is False

    def test_saved_key_is_sent_to_the_provider(self, api, models):
        models.api_key = SECRET
        conn = add_connection(api, models, api_key=SECRET)
        result = api.post(f"/api/connections/{conn['id']}/test").json()
        assert result["ok"] is True, result
        assert models.last_request.headers["authorization"] == f"Bearer {SECRET}"


class TestTestConnection:
    def test_reports_model_name(self, api, models):
        conn = add_connection(api, models)
        result = api.post(f"/api/connections/{conn['id']}/test").json()
        assert result == {"ok": True, "model": "test-model", "message": result["message"]}
        assert "test-model" in result["message"]

    def test_reports_bad_key(self, api, models):
        models.api_key = "right"
        conn = add_connection(api, models, api_key="wrong")
        result = api.post(f"/api/connections/{conn['id']}/test").json()
        assert result["ok"] is False
        assert "API key" in result["message"]

    def test_reports_unknown_model(self, api, models):
        conn = add_connection(api, models, model="no-such-model")
        result = api.post(f"/api/connections/{conn['id']}/test").json()
        assert result["ok"] is False and "no-such-model" in result["message"]

    def test_reports_refused_connection(self, api, models):
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        conn = add_connection(api, models, base_url=f"http://127.0.0.1:{port}/v1")
        result = api.post(f"/api/connections/{conn['id']}/test").json()
        assert result["ok"] is False and "connect" in result["message"].lower()

    def test_form_test_before_saving(self, api, models):
        r = api.post(
            "/connections/test",
            data={
                "name": "x",
                "kind": "openai",
                "base_url": models.base_url,
                "model": "test-model",
                "max_tokens": "64",
                "context_size": "4096",
            },
            headers={"HX-Request": "true"},
        )
        assert r.status_code == 200 and "notice-ok" in r.text and "<html" not in r.text

    def test_anthropic_connection_probe(self, api, models):
        conn = add_connection(api, models, kind="anthropic", base_url=models.anthropic_base_url)
        assert api.post(f"/api/connections/{conn['id']}/test").json()["ok"] is True


class TestDefaults:
    def test_first_connection_is_default_and_default_moves(self, api, models):
        a = add_connection(api, models, name="A")
        b = add_connection(api, models, name="B")
        assert api.get(f"/api/connections/{a['id']}").json()["is_default"] is True
        api.post(f"/api/connections/{b['id']}/default")
        assert api.get(f"/api/connections/{a['id']}").json()["is_default"] is False
        assert api.get(f"/api/connections/{b['id']}").json()["is_default"] is True
        api.delete(f"/api/connections/{b['id']}")
        assert api.get(f"/api/connections/{a['id']}").json()["is_default"] is True

    def test_bad_base_url_is_refused(self, api):
        r = api.post("/api/connections", json={"name": "x", "base_url": "ftp://nope"})
        assert r.status_code == 422


def test_first_run_offers_add_connection_and_local_servers(tmp_path, models: ModelServer):
    from tests.support.live import LiveSugo

    with (
        LiveSugo(tmp_path / "d", discovery_ports={"KoboldCpp": models.port, "Nothing": 9}) as live,
        live.client() as c,
    ):
        page = c.get("/").text
        assert "Add a connection" in page
        assert "Found on this computer" in page and models.bare_url in page
        assert "Ollama" in page and "OpenRouter" in page and "LM Studio" in page
        found = c.get("/api/connections/discover").json()
        assert [f["port"] for f in found] == [models.port]
        assert found[0]["models"] == ["test-model"]


def test_preset_hints_are_shown_as_written_text(api):
    """Issue 21 (19): the Ollama preset's hint showed `ollama list` with its Markdown backticks. Every
    preset's hint, as the new-connection page and the first-run page show it, reads as plain text."""
    home = api.get("/").text
    for preset in PRESETS:
        page = api.get("/connections/new", params={"preset": preset.id}).text
        shown = re.search(r'<p class="muted small">([^<]*)</p>', page)
        assert shown is not None, preset.id
        assert shown.group(1) == escape(preset.hint), preset.id
        assert "`" not in shown.group(1) and "*" not in shown.group(1), (preset.id, shown.group(1))
        assert f'<span class="muted small">{escape(preset.hint)}</span>' in home, preset.id
    assert "model names as “ollama list” shows them" in home

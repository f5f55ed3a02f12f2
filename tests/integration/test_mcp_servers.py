"""MCP servers against a real MCP server (the SDK's own, over Streamable HTTP on 127.0.0.1): discovery
saves a snapshot, a discovered tool runs through the registry, a hanging call is cut at its limit, the
token is required, sealed at rest and never shown, a refused address and a server that is down are
reported and keep what was known."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError
from sqlmodel import Session

from app.tools.mcp import service
from app.tools.mcp.models import McpServer
from app.tools.mcp.tools import mcp_tools
from app.tools.registry import ToolContext, ToolError, ToolResult
from tests.support.live import LiveSugo
from tests.support.mcp_server import McpTestServer

TOKEN = "sk-secret-XYZ"
ALL_TOOLS = ["echo", "add", "fail", "hang"]


@pytest.fixture
def mcp() -> Iterator[McpTestServer]:
    with McpTestServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def sugo(tmp_path) -> Iterator[LiveSugo]:
    # The test server is on loopback: allowed here, as SUGO_FETCH_ALLOW=127.0.0.1 would.
    with LiveSugo(tmp_path / "data", fetch_allow=("127.0.0.1",), start_scheduler=False) as live:
        yield live


@pytest.fixture
def api(sugo):
    with sugo.client() as client:
        yield client


def add(api, url: str, *, name: str = "test", token: str = TOKEN, **extra) -> dict:
    r = api.post("/api/mcp-servers", json={"name": name, "url": url, "token": token, **extra})
    assert r.status_code == 201, r.text
    return r.json()


def context(sugo: LiveSugo) -> ToolContext:
    return ToolContext(
        services=sugo.services,
        chat_id=1,
        character_id=None,
        persona_id=None,
        message_id=None,
        now=datetime.now(UTC),
    )


def registry_tools(sugo: LiveSugo, **kwargs) -> dict:
    with sugo.session() as session:
        return {tool.name: tool for tool in mcp_tools(session, sugo.services, **kwargs)}


def run(sugo: LiveSugo, tool, arguments: dict):
    return asyncio.run(tool.run(context(sugo), tool.args.model_validate(arguments)))


def test_discovery_saves_the_tools_and_a_tool_runs_through_the_registry(sugo, api, mcp):
    server = add(api, mcp.url)
    assert server["discovery"] == "unknown" and server["tools"] is None

    r = api.post(f"/api/mcp-servers/{server['id']}/discover")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ok"] is True, body
    assert [t["name"] for t in body["server"]["tools"]] == ALL_TOOLS
    assert body["server"]["discovered_at"] and body["server"]["last_error"] is None
    with sugo.session() as session:
        row = session.get(McpServer, server["id"])
        assert [t["name"] for t in row.discovered_tools] == ALL_TOOLS
        assert row.discovered_tools[0]["input_schema"]["properties"]["text"]["type"] == "string"

    tools = registry_tools(sugo)
    assert sorted(tools) == sorted(f"mcp_test__{name}" for name in ALL_TOOLS)
    echo = tools["mcp_test__echo"]
    assert echo.source == "mcp:test" and echo.family == "mcp" and echo.permission is None
    assert echo.description.startswith("[MCP server test]")
    assert echo.declaration()["parameters"]["required"] == ["text"]

    result = run(sugo, echo, {"text": "hello from Sugo"})
    assert isinstance(result, ToolResult)
    assert result.text == "hello from Sugo"
    assert "MCP server test" in result.notice
    assert run(sugo, tools["mcp_test__add"], {"a": 2, "b": 3}).text == "5"


def test_arguments_are_checked_against_the_servers_schema_before_anything_runs(sugo, api, mcp):
    server = add(api, mcp.url)
    api.post(f"/api/mcp-servers/{server['id']}/discover")
    add_tool = registry_tools(sugo)["mcp_test__add"]
    seen = len(mcp.auth_headers)
    with pytest.raises(ValidationError, match="'b' is a required property"):
        add_tool.args.model_validate({"a": 1})
    with pytest.raises(ValidationError, match="is not of type 'integer'"):
        add_tool.args.model_validate({"a": "one", "b": 2})
    assert len(mcp.auth_headers) == seen  # nothing reached the server


def test_a_tool_error_reaches_the_model_as_a_tool_error_with_the_servers_text(sugo, api, mcp):
    server = add(api, mcp.url)
    api.post(f"/api/mcp-servers/{server['id']}/discover")
    fail = registry_tools(sugo)["mcp_test__fail"]
    with pytest.raises(ToolError, match="answered with an error"):
        run(sugo, fail, {"reason": "the moon is down"})


def test_a_hanging_call_is_cut_at_its_limit_and_leaves_nothing_running(sugo, api, mcp):
    server = add(api, mcp.url)
    api.post(f"/api/mcp-servers/{server['id']}/discover")
    hang = registry_tools(sugo, timeout_s=1.0)["mcp_test__hang"]
    assert hang.timeout_s < 5  # the loop's own cut follows the limit

    async def call_then_look_around():
        with pytest.raises(ToolError, match=r"did not answer within 1 s"):
            await hang.run(context(sugo), hang.args.model_validate({}))
        # The session's tasks went with the connection: only this task is left.
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert asyncio.run(call_then_look_around()) == []
        gc.collect()
    # No socket to the server was left open (an unclosed one warns when it is collected).
    assert [str(w.message) for w in caught if f"{mcp.port}" in str(w.message)] == []
    # The server is still fine for the next call.
    assert run(sugo, registry_tools(sugo)["mcp_test__echo"], {"text": "still here"}).text == "still here"


def test_the_token_is_sent_as_a_bearer_header_and_sealed_at_rest(sugo, api, mcp):
    server = add(api, mcp.url)
    assert api.post(f"/api/mcp-servers/{server['id']}/discover").json()["ok"] is True
    assert mcp.auth_headers and set(mcp.auth_headers) == {f"Bearer {TOKEN}"}
    with sugo.session() as session:
        row = session.get(McpServer, server["id"])
        assert row.token_sealed and TOKEN not in row.token_sealed
        assert sugo.services.keybox.unseal(row.token_sealed) == TOKEN
    raw = (sugo.settings.database_path).read_bytes()
    assert TOKEN.encode() not in raw


def test_a_wrong_or_missing_token_is_reported_as_refused(sugo, api, mcp):
    for name, token in (("no-token", ""), ("wrong-token", "sk-wrong")):
        server = add(api, mcp.url, name=name, token=token)
        body = api.post(f"/api/mcp-servers/{server['id']}/discover").json()
        assert body["ok"] is False
        assert "refused the token (HTTP 401)" in body["message"]
        assert body["server"]["discovery"] == "unknown"
        assert "refused the token" in body["server"]["last_error"]


def test_the_token_never_appears_in_any_page_or_api_answer(sugo, api, mcp):
    answers = []
    r = api.post(
        "/settings/mcp",
        data={"name": "paged", "url": mcp.url, "token": TOKEN, "server_type": "general"},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 200, r.text
    answers.append(r.text)
    server = add(api, mcp.url)
    answers.append(str(server))
    sid = server["id"]
    answers.append(api.post(f"/settings/mcp/{sid}/discover", headers={"HX-Request": "true"}).text)
    answers.append(api.post(f"/api/mcp-servers/{sid}/discover").text)
    for path in (
        "/settings/mcp",
        f"/settings/mcp/{sid}",
        f"/settings/mcp/{sid}/discovering",
        f"/settings/mcp/{sid}/remove",
        "/api/mcp-servers",
        f"/api/mcp-servers/{sid}",
        "/openapi.json",
    ):
        r = api.get(path)
        assert r.status_code == 200, (path, r.text)
        answers.append(r.text)
    for path in (f"/settings/mcp/{sid}", f"/settings/mcp/{sid}/discovering", f"/settings/mcp/{sid}/remove"):
        r = api.get(path, headers={"HX-Request": "true"})
        assert r.status_code == 200 and "<html" not in r.text and f'id="mcp-server-{sid}"' in r.text
        answers.append(r.text)
    answers.append(api.post(f"/settings/mcp/{sid}/disable", headers={"HX-Request": "true"}).text)
    answers.append(api.post(f"/api/mcp-servers/{sid}/enable").text)
    assert all(TOKEN not in text for text in answers)
    assert "token saved" in answers[0]
    assert mcp.auth_headers  # it was used, though: discovery sent it


def test_a_refused_address_without_sugo_fetch_allow(tmp_path, mcp):
    with LiveSugo(tmp_path / "data", start_scheduler=False) as sugo, sugo.client() as api:
        server = add(api, mcp.url)
        body = api.post(f"/api/mcp-servers/{server['id']}/discover").json()
        assert body["ok"] is False
        assert "127.0.0.1" in body["message"] and "not fetched" in body["message"]
        target = service.CallTarget(
            server_id=server["id"], server_name="test", url=mcp.url, token_sealed=None, tool_name="echo"
        )
        with pytest.raises(ToolError, match="not fetched"):
            asyncio.run(service.call(target, {"text": "hi"}, keybox=sugo.services.keybox, allow=()))
    assert mcp.auth_headers == []  # nothing reached the server


def test_a_server_that_is_down_records_the_error_and_keeps_its_tools(sugo, api):
    with McpTestServer(token=TOKEN) as mcp:
        server = add(api, mcp.url)
        assert api.post(f"/api/mcp-servers/{server['id']}/discover").json()["ok"] is True
    # Stopped now: nothing listens on its port.
    body = api.post(f"/api/mcp-servers/{server['id']}/discover").json()
    assert body["ok"] is False
    assert "could not be reached" in body["message"]
    saved = api.get(f"/api/mcp-servers/{server['id']}").json()
    assert [t["name"] for t in saved["tools"]] == ALL_TOOLS
    assert "could not be reached" in saved["last_error"]
    page = api.get("/settings/mcp").text
    assert "Tools: echo, add, fail, hang" in page and "Last discovery failed" in page
    # Its tools are still offered; a call reports the server down, as an error result.
    echo = registry_tools(sugo)["mcp_test__echo"]
    with pytest.raises(ToolError, match="could not be reached"):
        run(sugo, echo, {"text": "anyone?"})


def test_opening_the_page_contacts_no_server(sugo, api, mcp):
    server = add(api, mcp.url)
    api.post(f"/api/mcp-servers/{server['id']}/discover")
    seen = len(mcp.auth_headers)
    page = api.get("/settings/mcp")
    assert page.status_code == 200
    assert "Tools: echo, add, fail, hang — discovered just now" in page.text
    api.get("/api/mcp-servers")
    assert len(mcp.auth_headers) == seen


def test_disabled_servers_offer_no_tools_and_removed_ones_are_gone(sugo, api, mcp):
    server = add(api, mcp.url, server_type="web_search")
    api.post(f"/api/mcp-servers/{server['id']}/discover")
    assert {t.family for t in registry_tools(sugo).values()} == {"web_search"}
    assert api.post(f"/api/mcp-servers/{server['id']}/disable").json()["enabled"] is False
    assert registry_tools(sugo) == {}
    assert api.post(f"/api/mcp-servers/{server['id']}/enable").json()["enabled"] is True
    assert len(registry_tools(sugo)) == 4
    assert api.delete(f"/api/mcp-servers/{server['id']}").status_code == 204
    assert api.get(f"/api/mcp-servers/{server['id']}").status_code == 404
    assert registry_tools(sugo) == {}


def test_bad_input_is_refused_with_a_sentence(sugo, api):
    cases = [
        ({"name": "has space", "url": "https://example.com/mcp"}, "letters"),
        ({"name": "", "url": "https://example.com/mcp"}, "needs a name"),
        ({"name": "ok", "url": "ftp://example.com/mcp"}, "https://"),
        ({"name": "ok", "url": "https://user:pw@example.com/mcp"}, "Token field"),
        ({"name": "ok", "url": "https://example.com/mcp", "server_type": "images"}, "server type"),
    ]
    for body, words in cases:
        r = api.post("/api/mcp-servers", json=body)
        assert r.status_code == 400 and words in r.json()["detail"], (body, r.text)
    assert (
        api.post("/api/mcp-servers", json={"name": "x" * 41, "url": "https://a.example/mcp"}).status_code
        == 422
    )
    too_long = {"name": "t", "url": "https://a.example/mcp", "token": "k" * 4097}
    assert api.post("/api/mcp-servers", json=too_long).status_code == 422
    r = api.post("/settings/mcp", data=too_long, headers={"HX-Request": "true"})
    assert r.status_code == 400 and "Token" in r.text
    add(api, "https://a.example/mcp", name="Dup")
    r = api.post("/api/mcp-servers", json={"name": "dup", "url": "https://b.example/mcp"})
    assert r.status_code == 400 and "already an MCP server named Dup" in r.json()["detail"]
    for n in range(19):
        add(api, "https://a.example/mcp", name=f"s{n}")
    r = api.post("/api/mcp-servers", json={"name": "one-more", "url": "https://a.example/mcp"})
    assert r.status_code == 400 and "at most 20" in r.json()["detail"]
    assert len(api.get("/api/mcp-servers").json()) == 20
    with Session(sugo.engine) as session:
        assert len(service.list_servers(session)) == 20


def test_a_host_name_is_pinned_to_its_checked_address_and_keeps_its_host_header(tmp_path, mcp):
    url = mcp.url.replace("127.0.0.1", "localhost")
    with (
        LiveSugo(tmp_path / "data", fetch_allow=("localhost",), start_scheduler=False) as sugo,
        sugo.client() as api,
    ):
        server = add(api, url)
        assert api.post(f"/api/mcp-servers/{server['id']}/discover").json()["ok"] is True
    assert mcp.hosts and set(mcp.hosts) == {f"localhost:{mcp.port}"}


def test_the_pinned_transport_sends_nothing_to_another_host():
    import httpx2

    from app.tools.mcp.connect import _PinnedTransport
    from app.tools.net.address import CheckedUrl

    checked = CheckedUrl(
        url="https://a.example/mcp", scheme="https", host="a.example", port=443, address="192.0.2.1"
    )

    async def send():
        async with httpx2.AsyncClient(transport=_PinnedTransport(checked), trust_env=False) as client:
            await client.get("https://b.example/mcp")

    with pytest.raises(httpx2.ConnectError, match="only a.example was checked"):
        asyncio.run(send())


def test_a_server_that_never_answers_a_discovery_is_cut_at_the_limit_and_keeps_its_tools(sugo, api, mcp):
    import socket

    server = add(api, mcp.url)
    assert api.post(f"/api/mcp-servers/{server['id']}/discover").json()["ok"] is True
    # A port that takes connections (the kernel's backlog) and never answers one.
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        with sugo.session() as session:
            row = session.get(McpServer, server["id"])
            row.url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
            session.add(row)
            session.commit()
        outcome = asyncio.run(service.discover(sugo.services, server["id"], timeout_s=0.5))
    finally:
        silent.close()
    assert outcome.ok is False and "did not answer within 0.5 s" in outcome.message
    saved = api.get(f"/api/mcp-servers/{server['id']}").json()
    assert [t["name"] for t in saved["tools"]] == ALL_TOOLS and "0.5 s" in saved["last_error"]

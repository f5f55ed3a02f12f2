"""Issue 24's acceptance through the whole loop: the test model server issues the tool calls (OpenAI
and Anthropic shapes, streamed), Sugo runs the real built-in tools, and the results reach the model
and the page. Deliberate Tool Mode stays on (the default): each message asks for its tool in words."""

import json

import pytest

from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.pdfs import make_pdf


def _call(name: str, arguments: dict, call_id: str = "call_1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


@pytest.fixture(params=["openai", "anthropic"])
def chat(request, api, models):
    if request.param == "anthropic":
        add_connection(api, models, kind="anthropic", base_url=models.anthropic_base_url)
    else:
        add_connection(api, models)
    char = add_character(api)
    return new_chat(api, [char["id"]])["id"]


def _send(api, chat_id, content, **extra):
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content, **extra})
    assert r.status_code == 200, r.text
    events = read_sse(r)
    assert events[-1][0] == "done", events[-1]
    return events


def _tool_results(models) -> list[str]:
    """The tool results the model was sent in the last request, in either API's shape."""
    out = []
    for message in models.last_request.json["messages"]:
        if message.get("role") == "tool":
            out.append(message["content"])
        elif isinstance(message.get("content"), list):
            out.extend(str(b.get("content")) for b in message["content"] if b.get("type") == "tool_result")
    return out


def _upload(api, chat_id, name, data):
    r = api.post(
        f"/api/chats/{chat_id}/attachments", files={"file": (name, data, "application/octet-stream")}
    )
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def test_a_pdf_and_a_text_file_are_read_by_the_model(api, models, chat):
    pdf = _upload(api, chat, "ledger.pdf", make_pdf(["The toll at the north bridge is three silver."]))
    code = _upload(api, chat, "notes.json", b'{"gate": "opens at dawn"}')
    models.script(
        Reply(
            text="Let me read them.",
            tool_calls=[
                _call("read_document", {"attachment_id": pdf}, "c1"),
                _call("read_document", {"attachment_id": code}, "c2"),
            ],
        ),
        Reply(text="Three silver at the bridge, and the gate opens at dawn."),
    )
    _send(api, chat, "Please read the attached files and summarise them.", attachment_ids=[pdf, code])
    assert "read_document" in [t.get("function", t).get("name") for t in models.requests[0].json["tools"]]
    results = _tool_results(models)
    assert any("three silver" in r for r in results)
    assert any("opens at dawn" in r for r in results)
    last = api.get(f"/api/chats/{chat}/messages").json()[-1]
    assert last["content"].endswith("the gate opens at dawn.")
    assert [c["name"] for c in last["swipes"][0]["tool_calls"]] == ["read_document", "read_document"]


def test_an_mcp_servers_tool_is_called_by_the_model_and_its_result_shown(tmp_path, models):
    from tests.support.live import LiveSugo
    from tests.support.mcp_server import McpTestServer

    token = "sk-mcp-secret-123"
    with (
        McpTestServer(token=token) as mcp,
        LiveSugo(tmp_path / "data", fetch_allow=("127.0.0.1",), start_scheduler=False) as sugo,
        sugo.client() as api,
    ):
        server = api.post("/api/mcp-servers", json={"name": "helper", "url": mcp.url, "token": token})
        assert server.status_code == 201, server.text
        found = api.post(f"/api/mcp-servers/{server.json()['id']}/discover")
        assert found.status_code == 200, found.text
        add_connection(api, models)
        chat_id = new_chat(api, [add_character(api)["id"]])["id"]
        # Deliberate Tool Mode declares a server's tools when the message names the server.
        models.script(
            Reply(text="Asking.", tool_calls=[_call("mcp_helper__echo", {"text": "over the hills"})]),
            Reply(text="The helper said it back."),
        )
        _send(api, chat_id, "Ask the helper to echo 'over the hills'")
        declared = [t["function"]["name"] for t in models.requests[0].json["tools"]]
        assert "mcp_helper__echo" in declared
        assert any("over the hills" in r for r in _tool_results(models))
        page = api.get(f"/chats/{chat_id}").text
        assert "mcp_helper__echo" in page and "over the hills" in page
        for path in (
            f"/chats/{chat_id}",
            "/settings/mcp",
            "/api/mcp-servers",
            f"/api/chats/{chat_id}/messages",
        ):
            assert token not in api.get(path).text
        assert token not in json.dumps(models.requests[0].json)


def test_a_memory_made_by_the_model_shows_on_the_memories_page_and_in_the_next_prompts(api, models, chat):
    fact = "The user takes green tea without sugar."
    models.script(
        Reply(
            text="", tool_calls=[_call("create_long_term_memory", {"content": fact, "scope": "character"})]
        ),
        Reply(text="I will remember that."),
    )
    _send(api, chat, "Remember that I take my green tea without sugar.")
    last = api.get(f"/api/chats/{chat}/messages").json()[-1]
    (call,) = last["swipes"][0]["tool_calls"]
    assert call["name"] == "create_long_term_memory" and not call["error"], call
    assert fact in api.get("/memories").text
    models.script(Reply(text="Tea, then?"))
    _send(api, chat, "What should we drink?")
    assert fact in json.dumps(models.last_request.json)


def test_a_reminder_set_by_the_model_is_listed_and_the_chat_says_so(api, models, chat):
    models.script(
        Reply(
            text="",
            tool_calls=[
                _call("create_task", {"purpose": "Stretch after the long ride.", "minutes_from_now": 1})
            ],
        ),
        Reply(text="I will remind you."),
    )
    _send(api, chat, "Remind me in a minute to stretch")
    last = api.get(f"/api/chats/{chat}/messages").json()[-1]
    (call,) = last["swipes"][0]["tool_calls"]
    assert call["notice"].startswith("Reminder set for"), call
    opened = api.get("/api/tasks").json()["open"]
    assert [t["purpose"] for t in opened] == ["Stretch after the long ride."]
    assert "Reminder set for" in api.get(f"/chats/{chat}").text

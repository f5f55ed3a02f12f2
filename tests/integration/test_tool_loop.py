"""The tool loop over real HTTP (issue 24): Sugo on 127.0.0.1 against the test model server issuing
tool calls in OpenAI's and Anthropic's streamed shapes. Test tools are registered on the live app's
registry (the built-in ones have tests of their own)."""

import asyncio
import json
import threading
import time

import pytest
from pydantic import BaseModel, Field
from sqlmodel import Session, select

from app.connections.models import Connection
from app.tools.registry import Tool, ToolError, ToolResult
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply


class EchoArgs(BaseModel):
    text: str = Field(max_length=200)


class NoArgs(BaseModel):
    pass


def _echo(ctx, args: EchoArgs) -> ToolResult:
    return ToolResult(f"echoed: {args.text}", notice=f"Echoed {args.text!r}")


def _boom(ctx, args: NoArgs) -> str:
    raise RuntimeError("the database is on fire")


def _refuse(ctx, args: NoArgs) -> str:
    raise ToolError("There are already 50 open tasks in this chat.")


async def _hang(ctx, args: NoArgs) -> str:
    await asyncio.sleep(60)
    return "never"


def _waiting_tool(release: threading.Event) -> Tool:
    def wait(ctx, args: NoArgs) -> str:
        release.wait(30)
        return "waited"

    return Tool("wait_for_release", "Waits for the test.", NoArgs, wait, None)


def _tools() -> list[Tool]:
    return [
        Tool("echo", "Echo a text back.", EchoArgs, _echo, None, label="Echo"),
        Tool("boom", "Always fails.", NoArgs, _boom, None),
        Tool("refuse", "Refuses calmly.", NoArgs, _refuse, None),
        Tool("hang", "Never answers.", NoArgs, _hang, None, timeout_s=0.5),
    ]


def _call(name: str, arguments: dict | str, call_id: str = "call_1") -> dict:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


@pytest.fixture
def chat(sugo, api, models, request):
    kind = getattr(request, "param", "openai")
    for tool in _tools():
        sugo.app.state.services.tools.add(tool)
    # Every tool declared on every turn (Deliberate Tool Mode has tests of its own).
    api.post("/api/settings/tools", json={"deliberate": False}).raise_for_status()
    if kind == "anthropic":
        add_connection(api, models, kind="anthropic", base_url=models.anthropic_base_url)
    else:
        add_connection(api, models)
    char = add_character(api)
    return new_chat(api, [char["id"]])["id"]


def _send(api, chat_id, content="Please echo hello"):
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content})
    assert r.status_code == 200, r.text
    return read_sse(r)


def _last(api, chat_id):
    return api.get(f"/api/chats/{chat_id}/messages").json()[-1]


def _results_by_call(request_json: dict) -> dict[str, str]:
    """The tool results a request carried, by call id, in OpenAI's shape (role "tool") or Anthropic's
    (tool_result blocks in a user turn)."""
    found = {}
    for message in request_json["messages"]:
        if message.get("role") == "tool":
            found[message["tool_call_id"]] = message["content"]
        elif isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block.get("content")
                    if isinstance(content, list):
                        content = "".join(part.get("text", "") for part in content)
                    found[block["tool_use_id"]] = content
    return found


@pytest.mark.parametrize("chat", ["openai", "anthropic"], indirect=True)
def test_a_call_runs_its_result_goes_back_and_the_reply_streams_on(api, models, chat):
    models.script(
        Reply(text="Let me echo that.", tool_calls=[_call("echo", {"text": "hello"})], chunk_size=3),
        Reply(text="It said hello back.", chunk_size=3),
    )
    events = _send(api, chat)
    names = [e for e, _ in events]
    assert "tool_call" in names and "tool_result" in names and names[-1] == "done"
    assert "".join(d["text"] for e, d in events if e == "token") == "Let me echo that.\n\nIt said hello back."
    # The second request carries the call and its result as the provider expects.
    second = models.requests[-1].json
    assert second["tools"], "tools are declared on every round"
    sent = json.dumps(second["messages"])
    assert "echoed: hello" in sent
    if models.requests[-1].path.endswith("/messages"):
        kinds = [
            b.get("type") for m in second["messages"] if isinstance(m["content"], list) for b in m["content"]
        ]
        assert "tool_use" in kinds and "tool_result" in kinds
    else:
        roles = [m["role"] for m in second["messages"]]
        assert roles[-2:] == ["assistant", "tool"]
        assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "echo"
    last = _last(api, chat)
    assert last["content"] == "Let me echo that.\n\nIt said hello back." and last["status"] == "ok"
    (call,) = last["swipes"][0]["tool_calls"]
    assert call["name"] == "echo" and call["result"] == "echoed: hello" and not call["error"]
    assert call["at"] == len("Let me echo that.") and call["notice"] == "Echoed 'hello'"
    assert isinstance(call["ms"], int)


@pytest.mark.parametrize("chat", ["openai", "anthropic"], indirect=True)
def test_later_turns_send_the_calls_back_while_they_are_in_the_window(api, models, chat):
    models.script(
        Reply(text="Checking.", tool_calls=[_call("echo", {"text": "first"})]),
        Reply(text="Done."),
        Reply(text="Sure."),
    )
    _send(api, chat)
    _send(api, chat, content="Thanks!")
    sent = json.dumps(models.last_request.json["messages"])
    assert "echoed: first" in sent and "Checking." in sent and "Done." in sent


@pytest.mark.parametrize("chat", ["openai", "anthropic"], indirect=True)
def test_a_raising_a_refusing_and_a_timed_out_tool_reach_the_model_as_errors_and_the_reply_completes(
    api, models, chat
):
    models.script(
        Reply(
            text="",
            tool_calls=[_call("boom", {}, "c1"), _call("refuse", {}, "c2"), _call("hang", {}, "c3")],
        ),
        Reply(text="Sorry, nothing worked."),
    )
    events = _send(api, chat)
    assert events[-1][0] == "done"
    results = _results_by_call(models.last_request.json)
    assert (
        "internal error" in results["c1"] and "database" not in results["c1"]
    )  # the details stay in the log
    assert results["c2"] == "There are already 50 open tasks in this chat."
    assert "did not answer within 0.5 s" in results["c3"]
    last = _last(api, chat)
    assert last["content"] == "Sorry, nothing worked." and last["status"] == "ok"
    calls = last["swipes"][0]["tool_calls"]
    assert [c["error"] for c in calls] == [True, True, True]
    assert calls[2]["notice"] == "hang took too long and was cut off after 0.5 s."


def test_bad_arguments_an_unknown_tool_and_broken_json_are_refused_before_anything_runs(api, models, chat):
    models.script(
        Reply(
            tool_calls=[
                _call("echo", {"text": "x" * 500}, "a"),
                _call("no_such_tool", {}, "b"),
                _call("echo", '{"text": "unclosed', "c"),
            ]
        ),
        Reply(text="Fine."),
    )
    _send(api, chat)
    results = {
        m["tool_call_id"]: m["content"] for m in models.last_request.json["messages"] if m["role"] == "tool"
    }
    assert "refused" in results["a"] and "200 characters" in results["a"]
    assert results["b"] == "There is no tool named 'no_such_tool' on this turn."
    assert "not valid JSON" in results["c"]


@pytest.mark.parametrize("chat", ["openai", "anthropic"], indirect=True)
def test_the_round_cap_holds_and_the_reply_says_so(sugo, api, models, chat):
    api.post("/api/settings/tools", json={"round_cap": 2}).raise_for_status()
    models.script(
        *[Reply(text=f"Round {i}. ", tool_calls=[_call("echo", {"text": str(i)}, f"r{i}")]) for i in range(4)]
    )
    events = _send(api, chat)
    assert events[-1][0] == "done"
    assert len(models.requests) == 3  # two rounds ran; the third answer's calls did not
    last = _last(api, chat)
    assert [c["result"] for c in last["swipes"][0]["tool_calls"]] == ["echoed: 0", "echoed: 1"]
    assert "limit of 2 tool rounds" in last["swipes"][0]["tool_notice"]
    assert last["content"] == "Round 0. Round 1. Round 2. "


def test_stop_during_a_tool_round_ends_the_reply_with_what_it_has(sugo, api, models, chat):
    release = threading.Event()
    sugo.app.state.services.tools.add(_waiting_tool(release))
    models.script(
        Reply(text="One moment.", tool_calls=[_call("wait_for_release", {})]), Reply(text="never asked")
    )
    with api.stream("POST", f"/api/chats/{chat}/generate", json={"action": "send", "content": "go"}) as r:
        for line in r.iter_lines():
            if line.startswith("event: tool_call"):
                api.post(f"/api/chats/{chat}/stop").raise_for_status()
                break
    release.set()
    deadline = time.monotonic() + 20
    while _last(api, chat)["status"] == "streaming" and time.monotonic() < deadline:
        time.sleep(0.05)
    last = _last(api, chat)
    assert last["content"] == "One moment." and last["status"] == "partial"
    assert len(models.requests) == 1


@pytest.mark.parametrize("chat", ["openai", "anthropic"], indirect=True)
def test_a_provider_refusing_tools_is_asked_again_without_them_and_the_connection_remembers(
    sugo, api, models, chat
):
    models.refuse_tools = True
    models.script(Reply(text="Hello without tools."))
    events = _send(api, chat)
    assert events[-1][0] == "done"
    assert "tools" not in models.last_request.json
    last = _last(api, chat)
    assert last["content"] == "Hello without tools."
    assert "refused tools" in last["swipes"][0]["tool_notice"]
    with Session(sugo.app.state.services.engine) as session:
        (conn,) = session.exec(select(Connection)).all()
        assert conn.tools_mode == "auto" and "support" in conn.tools_refused
    # The next reply does not offer tools at all.
    models.script(Reply(text="Again."))
    _send(api, chat, content="Hi again")
    assert "tools" not in models.last_request.json


def test_continue_and_impersonate_are_never_offered_tools(api, models, chat):
    models.script(Reply(text="A first reply."), Reply(text=" and more."), Reply(text="I say."))
    _send(api, chat)
    assert models.requests[-1].json["tools"]
    r = api.post(f"/api/chats/{chat}/generate", json={"action": "continue"})
    read_sse(r)
    assert "tools" not in models.last_request.json
    r = api.post(f"/api/chats/{chat}/generate", json={"action": "impersonate"})
    read_sse(r)
    assert "tools" not in models.last_request.json


@pytest.mark.parametrize("chat", ["openai", "anthropic"], indirect=True)
def test_a_tool_result_holding_a_conditional_block_reaches_the_model_literally(api, models, chat):
    block = "{{if tool:echo}}declared{{else}}missing{{/if}} {{user}} {memory_tool}"
    models.script(
        Reply(text="Echoing.", tool_calls=[_call("echo", {"text": block})]),
        Reply(text="Done."),
        Reply(text="Again."),
    )
    _send(api, chat)
    assert _results_by_call(models.last_request.json)["call_1"] == f"echoed: {block}"
    _send(api, chat, "And now?")  # a later turn sends the stored result back, still as it was
    assert _results_by_call(models.last_request.json)["call_1"] == f"echoed: {block}"

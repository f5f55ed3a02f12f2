"""Deliberate Tool Mode end to end (issue 24, acceptance 5): with the mode on (the default) a plain
message declares no tools, so the request carries none and the prompt is what it was before tools
existed; a message asking for a reminder, in any of the four languages, declares the task tools and
Peek Prompt says which words did; a tool used in the last replies stays declared; `{{if tool:…}}` in
a card's prompt follows the same list, while the same text in a chat message stays literal."""

import json

import pytest
from pydantic import BaseModel

from app.tools.registry import Tool
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply


class _Args(BaseModel):
    purpose: str = ""


def _task_tools() -> list[Tool]:
    def run(ctx, args):
        return "Reminder set."

    # The task tools are the real, built-in ones.
    return [Tool("look_up", "Look something up.", _Args, run, None, family="web_search")]


@pytest.fixture
def chat(sugo, api, models):
    for tool in _task_tools():
        sugo.app.state.services.tools.add(tool)
    add_connection(api, models)
    char = add_character(
        api,
        system_prompt="Be kind.{{if tool:create_task}} Use {task_tool} for reminders.{{else}} You cannot set reminders.{{/if}}",
    )
    return new_chat(api, [char["id"]])["id"]


def _send(api, chat_id, content):
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content})
    assert r.status_code == 200, r.text
    return read_sse(r)


def test_a_plain_message_declares_no_tools_and_the_prompt_is_as_before(api, models, chat):
    models.script(Reply(text="Hello!"))
    _send(api, chat, "How was your day?")
    body = models.last_request.json
    assert "tools" not in body
    system = body["messages"][0]["content"]
    assert "You cannot set reminders." in system and "{{if" not in system and "Tool guidance" not in system
    prompt = api.get(f"/api/chats/{chat}/prompt").json()
    assert prompt["tool_tokens"] == 0 and prompt["tools"] == []
    assert "Deliberate Tool Mode: the message asked for no tool." in " ".join(prompt["notes"])


@pytest.mark.parametrize(
    "message",
    [
        "remind me tomorrow to call mum",
        "lembra-me amanhã às 9",
        "напомни мне завтра",
        "recuérdame mañana a las 9",
    ],
)
def test_a_reminder_request_declares_the_task_tools_only(api, models, chat, message):
    models.script(Reply(text="Sure."))
    _send(api, chat, message)
    body = models.last_request.json
    assert sorted(t["function"]["name"] for t in body["tools"]) == [
        "cancel_task",
        "create_task",
        "update_task",
    ]
    assert "Use create_task for reminders." in body["messages"][0]["content"]
    prompt = api.get(f"/api/chats/{chat}/prompt").json()
    assert prompt["tool_tokens"] > 0
    assert any("create_task ←" in n and "built-in" in n for n in prompt["notes"])


def test_a_tool_used_in_the_last_replies_stays_declared(api, models, chat):
    arguments = '{"purpose": "Call mum about the weekend.", "minutes_from_now": 60}'
    call = {"id": "c1", "type": "function", "function": {"name": "create_task", "arguments": arguments}}
    models.script(Reply(text="Done.", tool_calls=[call]), Reply(text="Set."), Reply(text="Fine."))
    _send(api, chat, "remind me tomorrow at 9")
    _send(api, chat, "Thanks, and how are you?")
    names = [t["function"]["name"] for t in models.last_request.json["tools"]]
    assert names == ["create_task"]
    sent = json.dumps(models.last_request.json["messages"])
    assert '"tool_call_id": "c1"' in sent  # the call is replayed while tools are declared


def test_a_chat_message_with_a_conditional_block_stays_literal(api, models, chat):
    models.script(Reply(text="Hm."))
    literal = "{{if tool:create_task}}secret{{else}}other{{/if}} and {task_tool}"
    _send(api, chat, literal)
    user_turn = models.last_request.json["messages"][-1]["content"]
    assert literal in user_turn


def test_with_the_mode_off_every_permitted_tool_is_declared(api, models, chat):
    api.post("/api/settings/tools", json={"deliberate": False}).raise_for_status()
    models.script(Reply(text="Hello!"))
    _send(api, chat, "How was your day?")
    names = sorted(t["function"]["name"] for t in models.last_request.json["tools"])
    assert {"create_task", "update_task", "cancel_task", "look_up"} <= set(names)


def test_a_persona_overrides_the_mode_both_ways(api, models, chat):
    persona = api.post("/api/personas", json={"name": "Mara", "is_default": True, "deliberate_tools": "off"})
    assert persona.status_code == 201, persona.text
    assert persona.json()["deliberate_tools"] == "off"
    chat_id = new_chat(api, [add_character(api, name="Bea")["id"]])["id"]
    models.script(Reply(text="Hello!"), Reply(text="Hi!"))
    _send(api, chat_id, "How was your day?")
    assert models.last_request.json.get("tools"), "the persona turned the mode off: every permitted tool"
    api.post("/api/settings/tools", json={"deliberate": False}).raise_for_status()
    r = api.put(f"/api/personas/{persona.json()['id']}", json={"name": "Mara", "deliberate_tools": "on"})
    assert r.status_code == 200, r.text
    _send(api, chat_id, "And yours?")
    assert "tools" not in models.last_request.json


def test_the_context_grid_counts_the_tool_declarations_as_their_own_group(api, models, chat):
    models.script(Reply(text="Sure."))
    _send(api, chat, "remind me tomorrow at 9 to water the plants")
    page = api.get(f"/chats/{chat}/context").text
    assert "Tool declarations" in page
    models.script(Reply(text="Fine."))
    _send(api, chat, "How was your day?")
    assert "Tool declarations" not in api.get(f"/chats/{chat}/context").text

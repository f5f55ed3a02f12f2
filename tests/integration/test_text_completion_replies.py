"""Replies over a text-completion connection (issue 28): Sugo writes the raw prompt with the connection's
SillyTavern templates and streams the backend's continuation, from each of the three endpoint shapes the
test model server speaks; stop strings end the reply; Peek Prompt shows the raw text as sent."""

import json
from pathlib import Path

import pytest

from app.connections.core.builtin_templates import BUILTIN_CONTEXT_TEMPLATES, BUILTIN_INSTRUCT_TEMPLATES
from tests.conftest import add_character, new_chat, read_sse
from tests.support.model_server import Reply

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sillytavern" / "presets"
CHATML = json.loads((FIXTURES / "instruct" / "ChatML.json").read_text())
CHATML_CONTEXT = json.loads((FIXTURES / "context" / "ChatML.json").read_text())
MAIN = (
    "Write Aria's next reply in a fictional chat between Aria and Rowan. Stay in character, write in third "
    "person past tense for narration, and never speak or act for Rowan."
)
# What SillyTavern sends for this chat with the ChatML instruct and context templates (its rules: the
# story string's {{trim}} pulls <|im_end|> up to the persona line and the story string ends in a newline;
# wrap puts each turn's text on its own line; a chat of one names nobody; the reply's own line is last).
EXPECTED = f"""<|im_start|>system
{MAIN}
Aria is a wandering bard.
Scenario: A tavern at dusk.
A tired knight.<|im_end|>
<|im_start|>assistant
*Aria waves.* Hello, Rowan!<|im_end|>
<|im_start|>user
Hello?<|im_end|>
<|im_start|>assistant
"""
ENDPOINTS = {"openai_completions": "/v1/completions", "llamacpp": "/completion", "ollama": "/api/generate"}


def _connection(api, models, text_api: str, **overrides) -> dict:
    base = models.base_url if text_api == "openai_completions" else models.root_url
    body = {
        "name": f"Local {text_api}",
        "kind": "text",
        "text_api": text_api,
        "base_url": base,
        "model": "test-model",
        "context_size": 8192,
        "max_tokens": 256,
        "instruct_template": CHATML,
        "context_template": CHATML_CONTEXT,
        **overrides,
    }
    r = api.post("/api/connections", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _chat(api, models, text_api: str, **conn) -> dict:
    api.post("/api/personas", json={"name": "Rowan", "description": "A tired knight."})
    _connection(api, models, text_api, **conn)
    return new_chat(api, [add_character(api, scenario="A tavern at dusk.")["id"]])


def _send(api, chat_id, text="Hello?"):
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": text})
    assert r.status_code == 200, r.text
    return read_sse(r)


@pytest.mark.parametrize("text_api", list(ENDPOINTS))
def test_a_reply_streams_from_each_endpoint_shape_with_the_prompt_sillytavern_would_send(
    api, models, text_api
):
    chat = _chat(api, models, text_api)
    models.script(Reply(text="*Aria tunes her lute.* Evening, Rowan.", chunk_size=5))
    events = _send(api, chat["id"])
    tokens = [d["text"] for e, d in events if e == "token"]
    assert len(tokens) > 3 and "".join(tokens) == "*Aria tunes her lute.* Evening, Rowan."
    request = models.last_request
    assert request.path == ENDPOINTS[text_api]
    assert request.json["prompt"] == EXPECTED
    stop = request.json["options"]["stop"] if text_api == "ollama" else request.json["stop"]
    assert "\n<|im_end|>" in stop and "\n<|im_start|>user" in stop
    if text_api == "ollama":
        assert request.json["raw"] is True
    stored = api.get(f"/api/chats/{chat['id']}/messages").json()[-1]
    assert stored["content"] == "*Aria tunes her lute.* Evening, Rowan." and stored["status"] == "ok"
    # Peek Prompt shows the raw text exactly as it was sent.
    peek = api.get(f"/api/chats/{chat['id']}/prompt").json()
    assert peek["raw"]["text"].endswith("Evening, Rowan.<|im_end|>\n<|im_start|>assistant\n")
    page = api.get(f"/chats/{chat['id']}/prompt", headers={"HX-Request": "true"}).text
    assert "Raw prompt, as sent" in page and "&lt;|im_start|&gt;system" in page


def test_a_stop_string_ends_the_reply_even_when_the_backend_ignores_it(api, models):
    chat = _chat(api, models, "llamacpp")
    models.script(
        Reply(text="Evening.\n<|im_end|>\n<|im_start|>user\nRowan: more", chunk_size=3, ignore_stop=True)
    )
    _send(api, chat["id"])
    assert api.get(f"/api/chats/{chat['id']}/messages").json()[-1]["content"] == "Evening."


def test_continue_leaves_the_reply_open_and_plain_text_names_every_line(api, models):
    chat = _chat(
        api,
        models,
        "openai_completions",
        instruct_template={},
        context_template=dict(BUILTIN_CONTEXT_TEMPLATES["Default"]),
    )
    models.script("She nods")
    _send(api, chat["id"])
    sent = models.last_request.json["prompt"]
    # No instruct template: SillyTavern's plain text, a name before every line, the Default separators.
    assert sent.endswith("***\nAria: *Aria waves.* Hello, Rowan!\nRowan: Hello?\nAria:")
    models.script(" and smiles.")
    read_sse(api.post(f"/api/chats/{chat['id']}/generate", json={"action": "continue"}))
    assert models.last_request.json["prompt"].endswith("Rowan: Hello?\nAria: She nods")
    assert api.get(f"/api/chats/{chat['id']}/messages").json()[-1]["content"] == "She nods and smiles."


def test_a_backend_that_answers_in_the_chat_shape_is_named(api, models):
    chat = _chat(api, models, "openai_completions")
    models.script(Reply(text="Hi", shape="chat"))
    events = _send(api, chat["id"])
    error = next(d for e, d in events if e == "error")
    assert "/v1/completions" in error["message"] and "chat" in error["message"]


def test_a_template_that_does_not_parse_is_refused_and_a_built_in_one_is_offered(api, models):
    bad = {**CHATML, "input_sequence": 42}
    r = api.post(
        "/api/connections",
        json={"name": "Bad", "kind": "text", "base_url": models.base_url, "instruct_template": bad},
    )
    assert r.status_code in (400, 422) and "input_sequence" in r.text
    assert api.get("/api/connections").json() == []
    page = api.get("/connections/new", params={"preset": "llamacpp_text"}).text
    assert "llama.cpp /completion" in page and "Llama 3 Instruct" in page
    assert BUILTIN_INSTRUCT_TEMPLATES["ChatML"]["input_sequence"] == CHATML["input_sequence"]


def test_the_connection_forms_template_files_and_samplers_reach_the_backend(api, models):
    form = {
        "name": "Kobold",
        "kind": "text",
        "text_api": "openai_completions",
        "base_url": models.base_url,
        "model": "test-model",
        "max_tokens": "200",
        "context_size": "8192",
        "top_k": "40",
        "min_p": "0.05",
        "repetition_penalty": "1.1",
        "instruct_name": "",
        "context_name": "",
    }
    files = {
        "instruct_file": (
            "ChatML.json",
            (FIXTURES / "instruct" / "ChatML.json").read_bytes(),
            "application/json",
        ),
        "context_file": (
            "ChatML.json",
            (FIXTURES / "context" / "ChatML.json").read_bytes(),
            "application/json",
        ),
    }
    r = api.post("/connections", data=form, files=files, headers={"HX-Request": "true"})
    assert r.status_code == 200, r.text
    conn = api.get("/api/connections").json()[0]
    # Kept whole, as the files are: every field, in the files' order.
    assert list(conn["instruct_template"].items()) == list(CHATML.items())
    assert conn["context_template"] == CHATML_CONTEXT
    page = api.get(f"/connections/{conn['id']}").text
    assert "ChatML</option>" in page
    api.post("/api/personas", json={"name": "Rowan", "description": "A tired knight."})
    chat = new_chat(api, [add_character(api, scenario="A tavern at dusk.")["id"]])
    models.script("Evening.")
    _send(api, chat["id"])
    body = models.last_request.json
    assert body["prompt"] == EXPECTED
    assert (body["top_k"], body["min_p"], body["repetition_penalty"]) == (40, 0.05, 1.1)
    bad = api.post(
        "/connections",
        data={**form, "name": "Bad"},
        files={"instruct_file": ("x.json", b"{not json", "application/json")},
        headers={"HX-Request": "true"},
    )
    assert bad.status_code == 400 and "is not a JSON file" in bad.text
    assert len(api.get("/api/connections").json()) == 1

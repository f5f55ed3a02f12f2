"""Both providers against the test model server, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from app.connections.providers import anthropic, get_provider, openai_compat
from app.connections.providers.base import (
    GenerationParams,
    ProviderConfig,
    ProviderError,
    Usage,
)
from tests.support.model_server import ModelServer, Reply, embed_text, estimate_tokens
from tests.support.streams import collect, collect_until_error

pytestmark = pytest.mark.anyio

API_KEY = "sk-test-123"
MODELS = ("test-model", "other-model")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def _open_server() -> Iterator[ModelServer]:
    with ModelServer(models=MODELS) as server:
        yield server


@pytest.fixture(scope="module")
def _keyed_server() -> Iterator[ModelServer]:
    with ModelServer(api_key=API_KEY, models=MODELS) as server:
        yield server


@pytest.fixture
def server(_open_server: ModelServer) -> ModelServer:
    _open_server.reset()
    return _open_server


@pytest.fixture
def keyed_server(_keyed_server: ModelServer) -> ModelServer:
    _keyed_server.reset()
    return _keyed_server


@pytest.fixture(scope="module")
def html_url() -> Iterator[str]:
    """A server that answers everything with a web page, like a base URL pointing at a web UI."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches to
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            page = b"<!DOCTYPE html><html><body>Welcome</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keeps test output quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def openai_config(base_url: str, **overrides: Any) -> ProviderConfig:
    fields: dict[str, Any] = {
        "kind": "openai",
        "base_url": base_url,
        "model": "test-model",
        "timeout_s": 10.0,
    }
    fields.update(overrides)
    return ProviderConfig(**fields)


def anthropic_config(base_url: str, **overrides: Any) -> ProviderConfig:
    fields: dict[str, Any] = {
        "kind": "anthropic",
        "base_url": base_url,
        "model": "test-model",
        "api_key": "unused",
        "timeout_s": 10.0,
    }
    fields.update(overrides)
    return ProviderConfig(**fields)


USER_HI = [{"role": "user", "content": "Hi"}]


def test_get_provider() -> None:
    assert get_provider("openai") is openai_compat
    assert get_provider("anthropic") is anthropic
    with pytest.raises(ValueError, match="Unknown provider kind"):
        get_provider("gemini")


# --- OpenAI-compatible -------------------------------------------------------------------------


async def test_openai_stream_yields_deltas_then_usage(server: ModelServer) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    server.script(Reply(text=text, chunk_size=5, usage={"cached_input_tokens": 2}))
    messages = [
        {"role": "system", "content": "You are terse.", "cache": True},
        {"role": "user", "content": "Tell me about foxes."},
    ]

    events = await collect(
        openai_compat.stream_chat(openai_config(server.base_url), messages, GenerationParams())
    )

    deltas = [e.text for e in events if e.text]
    assert "".join(deltas) == text
    assert len(deltas) == 9
    final = events[-1]
    assert final.text == ""
    prompt_chars = len("You are terse.") + len("Tell me about foxes.")
    assert final.usage == Usage(
        input_tokens=estimate_tokens(prompt_chars),
        output_tokens=estimate_tokens(len(text)),
        cached_input_tokens=2,
    )
    assert final.finish_reason == "stop"
    assert final.model == "test-model"
    body = server.last_request.json
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Tell me about foxes."},
    ]
    assert "authorization" not in server.last_request.headers


async def test_openai_unscripted_reply_echoes_last_user_message(server: ModelServer) -> None:
    messages = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}]
    messages.append({"role": "user", "content": "second"})
    completion = await openai_compat.complete_chat(
        openai_config(server.base_url), messages, GenerationParams()
    )
    assert completion.text == "Echo: second"


async def test_openai_complete_chat(server: ModelServer) -> None:
    server.script(
        Reply(text="A whole answer.", model="served-model", usage={"input_tokens": 11, "output_tokens": 4})
    )

    completion = await openai_compat.complete_chat(
        openai_config(server.base_url), USER_HI, GenerationParams(max_tokens=50)
    )

    assert completion.text == "A whole answer."
    assert completion.model == "served-model"
    assert completion.usage == Usage(input_tokens=11, output_tokens=4, cached_input_tokens=0)
    assert completion.finish_reason == "stop"
    body = server.last_request.json
    assert body["stream"] is False
    assert "stream_options" not in body
    assert body["max_tokens"] == 50


async def test_openai_params_extra_body_and_headers_arrive(server: ModelServer) -> None:
    config = openai_config(
        server.base_url + "/",
        extra_headers={"X-Title": "Sugo", "HTTP-Referer": "http://localhost"},
        extra_body={
            "stream_options": {"continuous_usage_stats": True},
            "top_k": 40,
            "temperature": 0.2,
            "chat_template_kwargs": {"enable_thinking": False},
        },
    )
    params = GenerationParams(temperature=0.9, top_p=0.95, stop=("\nUser:",))

    await collect(openai_compat.stream_chat(config, USER_HI, params))

    request = server.last_request
    assert request.path == "/v1/chat/completions"
    assert request.headers["x-title"] == "Sugo"
    assert request.headers["http-referer"] == "http://localhost"
    body = request.json
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["top_k"] == 40
    assert body["temperature"] == 0.2  # extra_body wins over the generation parameters
    assert body["top_p"] == 0.95
    assert body["stop"] == ["\nUser:"]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "max_tokens" not in body


async def test_openai_key_is_sent_as_bearer(keyed_server: ModelServer) -> None:
    config = openai_config(keyed_server.base_url, api_key=API_KEY)
    completion = await openai_compat.complete_chat(config, USER_HI, GenerationParams())
    assert completion.text == "Echo: Hi"
    assert keyed_server.last_request.headers["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.parametrize("api_key", ["wrong-key", None])
async def test_openai_rejected_key_is_auth_error(keyed_server: ModelServer, api_key: str | None) -> None:
    config = openai_config(keyed_server.base_url, api_key=api_key)
    _, err = await collect_until_error(openai_compat.stream_chat(config, USER_HI, GenerationParams()))
    assert err.kind == "auth"
    assert err.status == 401
    assert "401 Unauthorized" in str(err)
    assert "Incorrect API key provided." in str(err)
    if api_key is None:
        assert "none is set" in str(err)
    assert "wrong-key" not in str(err)


async def test_openai_unknown_model_is_not_found(server: ModelServer) -> None:
    config = openai_config(server.base_url, model="nope")
    with pytest.raises(ProviderError) as caught:
        await openai_compat.complete_chat(config, USER_HI, GenerationParams())
    assert caught.value.kind == "not_found"
    assert str(caught.value) == (
        "Model 'nope' was not found, or the URL is wrong (404): The model 'nope' does not exist."
    )


@pytest.mark.parametrize(
    ("status", "kind", "words"),
    [
        (429, "rate_limit", "Rate limited by the provider (429)"),
        (500, "server", "internal error (500)"),
        (503, "server", "unavailable (503)"),
        (400, "bad_request", "rejected the request (400)"),
        (403, "auth", "403 Forbidden"),
    ],
)
@pytest.mark.parametrize("streaming", [True, False])
async def test_openai_error_statuses(
    server: ModelServer, status: int, kind: str, words: str, streaming: bool
) -> None:
    server.script(Reply(status=status, error="Scripted trouble"))
    config = openai_config(server.base_url)
    if streaming:
        _, err = await collect_until_error(openai_compat.stream_chat(config, USER_HI, GenerationParams()))
    else:
        with pytest.raises(ProviderError) as caught:
            await openai_compat.complete_chat(config, USER_HI, GenerationParams())
        err = caught.value
    assert err.kind == kind
    assert err.status == status
    assert words in str(err)
    assert str(err).endswith(": Scripted trouble.")


async def test_openai_refused_connection(closed_port: int) -> None:
    base_url = f"http://127.0.0.1:{closed_port}/v1"
    _, err = await collect_until_error(
        openai_compat.stream_chat(openai_config(base_url), USER_HI, GenerationParams())
    )
    assert err.kind == "connection"
    assert str(err) == f"Could not connect to {base_url}: connection refused. Is the server running?"


async def test_openai_slow_server_times_out(server: ModelServer) -> None:
    server.script(Reply(first_delay_s=1.0))
    config = openai_config(server.base_url, timeout_s=0.2)
    _, err = await collect_until_error(openai_compat.stream_chat(config, USER_HI, GenerationParams()))
    assert err.kind == "timeout"
    assert str(err) == f"The server at {server.base_url} did not answer within 0.2 s."


async def test_openai_dropped_stream_keeps_partial_text(server: ModelServer) -> None:
    server.script(Reply(text="abcdefghijkl", chunk_size=2, break_after_chunks=3))
    text, err = await collect_until_error(
        openai_compat.stream_chat(openai_config(server.base_url), USER_HI, GenerationParams())
    )
    assert text == "abcdef"
    assert err.kind == "stream_broken"
    assert str(err) == "The connection dropped in the middle of the reply."


async def test_openai_dropped_non_streamed_answer(server: ModelServer) -> None:
    server.script(Reply(text="abcdefghijkl", break_after_chunks=1))
    with pytest.raises(ProviderError) as caught:
        await openai_compat.complete_chat(openai_config(server.base_url), USER_HI, GenerationParams())
    assert caught.value.kind == "stream_broken"


async def test_openai_error_inside_stream(server: ModelServer) -> None:
    server.script(Reply(text="abcdefgh", chunk_size=2, break_after_chunks=2, error="The model crashed"))
    text, err = await collect_until_error(
        openai_compat.stream_chat(openai_config(server.base_url), USER_HI, GenerationParams())
    )
    assert text == "abcd"
    assert err.kind == "server"
    assert "The model crashed" in str(err)


async def test_openai_web_page_is_bad_response(html_url: str) -> None:
    config = openai_config(html_url)
    _, err = await collect_until_error(openai_compat.stream_chat(config, USER_HI, GenerationParams()))
    assert err.kind == "bad_response"
    assert "web page" in str(err)
    with pytest.raises(ProviderError) as caught:
        await openai_compat.complete_chat(config, USER_HI, GenerationParams())
    assert caught.value.kind == "bad_response"


async def test_openai_probe_with_model(server: ModelServer) -> None:
    server.script(Reply(model="test-model-2025"))
    result = await openai_compat.probe(openai_config(server.base_url))
    assert result.ok
    assert result.model == "test-model-2025"
    assert result.message == "Connected to test-model-2025."
    assert server.last_request.json["max_tokens"] == 1
    assert server.last_request.json["messages"] == USER_HI


async def test_openai_probe_without_model_lists_models(server: ModelServer) -> None:
    result = await openai_compat.probe(openai_config(server.base_url, model=""))
    assert result.ok
    assert result.model == "test-model"
    assert result.message == "Connected. Models available: test-model, other-model"
    assert server.last_request.path == "/v1/models"


async def test_openai_probe_reports_failures(keyed_server: ModelServer, closed_port: int) -> None:
    result = await openai_compat.probe(openai_config(keyed_server.base_url, model="", api_key="bad"))
    assert not result.ok
    assert result.model is None
    assert "rejected the API key" in result.message
    result = await openai_compat.probe(openai_config(f"http://127.0.0.1:{closed_port}/v1"))
    assert not result.ok
    assert "connection refused" in result.message


async def test_embeddings_are_unit_vectors_that_share_words(server: ModelServer) -> None:
    import httpx

    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{server.base_url}/embeddings",
            json={"model": "embed", "input": ["red apples", "Red apples and pears", "quantum tunnelling"]},
        )
    vectors = [item["embedding"] for item in response.json()["data"]]
    assert all(len(v) == 384 for v in vectors)
    assert vectors[0] == embed_text("red apples")

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(vectors[0], vectors[0]) == pytest.approx(1.0)
    assert cosine(vectors[0], vectors[1]) > 0.5
    assert abs(cosine(vectors[0], vectors[2])) < 0.5


# --- Anthropic ---------------------------------------------------------------------------------


async def test_anthropic_system_extraction_and_cache_marker(server: ModelServer) -> None:
    messages = [
        {"role": "system", "content": "You are Mira."},
        {"role": "system", "content": "Mira lives in a lighthouse.", "cache": True},
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Welcome, traveller."},
        {"role": "system", "content": "Mira is tired now."},
        {"role": "user", "content": "Are you well?"},
    ]
    config = anthropic_config(server.anthropic_base_url)

    await collect(anthropic.stream_chat(config, messages, GenerationParams(temperature=0.7, stop=("###",))))

    request = server.last_request
    assert request.path == "/anthropic/v1/messages"
    assert request.headers["x-api-key"] == "unused"
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = request.json
    assert body["system"] == [
        {"type": "text", "text": "You are Mira."},
        {"type": "text", "text": "Mira lives in a lighthouse.", "cache_control": {"type": "ephemeral"}},
    ]
    assert body["messages"] == [
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Welcome, traveller."},
        {"role": "user", "content": "[System note] Mira is tired now.\n\nAre you well?"},
    ]
    assert body["max_tokens"] == 1024
    assert body["temperature"] == 0.7
    assert body["stop_sequences"] == ["###"]
    assert body["stream"] is True


async def test_anthropic_cache_marker_on_a_turn_and_merging(server: ModelServer) -> None:
    messages = [
        {"role": "system", "content": "Rules."},
        {"role": "assistant", "content": "Once upon a time"},
        {"role": "assistant", "content": "there was a fox."},
        {"role": "user", "content": "Summary of earlier events.", "cache": True},
        {"role": "user", "content": "What next?"},
        {"role": "user", "content": "Be brief."},
    ]

    await anthropic.complete_chat(anthropic_config(server.anthropic_base_url), messages, GenerationParams())

    assert server.last_request.json["messages"] == [
        {"role": "user", "content": "(continue)"},
        {"role": "assistant", "content": "Once upon a time\n\nthere was a fox."},
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "Summary of earlier events.",
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "What next?\n\nBe brief."},
            ],
        },
    ]


async def test_anthropic_stream_text_and_usage_with_cache(server: ModelServer) -> None:
    text = "Lanterns glow over the harbour."
    server.script(
        Reply(
            text=text,
            chunk_size=6,
            usage={"input_tokens": 120, "output_tokens": 9, "cached_input_tokens": 100},
        )
    )

    events = await collect(
        anthropic.stream_chat(
            anthropic_config(server.anthropic_base_url), USER_HI, GenerationParams(max_tokens=64)
        )
    )

    deltas = [e.text for e in events if e.text]
    assert "".join(deltas) == text
    assert len(deltas) == 6
    final = events[-1]
    assert final.usage == Usage(input_tokens=120, output_tokens=9, cached_input_tokens=100)
    assert final.finish_reason == "end_turn"
    assert final.model == "test-model"
    assert server.last_request.json["max_tokens"] == 64


async def test_anthropic_complete_chat(server: ModelServer) -> None:
    server.script(Reply(text="Done.", model="claude-test"))
    completion = await anthropic.complete_chat(
        anthropic_config(server.anthropic_base_url), USER_HI, GenerationParams()
    )
    assert completion.text == "Done."
    assert completion.model == "claude-test"
    assert completion.finish_reason == "end_turn"
    assert completion.usage == Usage(input_tokens=1, output_tokens=2, cached_input_tokens=0)


async def test_anthropic_rejected_key(keyed_server: ModelServer) -> None:
    config = anthropic_config(keyed_server.anthropic_base_url, api_key="wrong")
    _, err = await collect_until_error(anthropic.stream_chat(config, USER_HI, GenerationParams()))
    assert err.kind == "auth"
    assert str(err) == "The server rejected the API key (401 Unauthorized): invalid x-api-key."
    ok = await anthropic.complete_chat(
        anthropic_config(keyed_server.anthropic_base_url, api_key=API_KEY), USER_HI, GenerationParams()
    )
    assert ok.text == "Echo: Hi"


async def test_anthropic_unknown_model(server: ModelServer) -> None:
    config = anthropic_config(server.anthropic_base_url, model="claude-nope")
    with pytest.raises(ProviderError) as caught:
        await anthropic.complete_chat(config, USER_HI, GenerationParams())
    assert caught.value.kind == "not_found"
    assert (
        str(caught.value)
        == "Model 'claude-nope' was not found, or the URL is wrong (404): model: claude-nope."
    )


async def test_anthropic_overloaded_and_in_stream_errors(server: ModelServer) -> None:
    config = anthropic_config(server.anthropic_base_url)
    server.script(Reply(status=529))
    _, err = await collect_until_error(anthropic.stream_chat(config, USER_HI, GenerationParams()))
    assert err.kind == "server"
    assert "overloaded (529): Overloaded." in str(err)

    server.script(Reply(text="abcdef", chunk_size=2, break_after_chunks=1, error="Overloaded right now"))
    text, err = await collect_until_error(anthropic.stream_chat(config, USER_HI, GenerationParams()))
    assert text == "ab"
    assert err.kind == "server"
    assert "Overloaded right now" in str(err)


async def test_anthropic_dropped_stream(server: ModelServer) -> None:
    server.script(Reply(text="abcdefgh", chunk_size=2, break_after_chunks=2))
    text, err = await collect_until_error(
        anthropic.stream_chat(anthropic_config(server.anthropic_base_url), USER_HI, GenerationParams())
    )
    assert text == "abcd"
    assert err.kind == "stream_broken"


async def test_anthropic_probe(server: ModelServer) -> None:
    result = await anthropic.probe(anthropic_config(server.anthropic_base_url))
    assert result.ok
    assert result.message == "Connected to test-model."
    assert server.last_request.json["max_tokens"] == 1
    assert server.last_request.json["stream"] is False

    result = await anthropic.probe(anthropic_config(server.anthropic_base_url, model=""))
    assert result.ok
    assert result.message == "Connected. Models available: test-model, other-model"

    result = await anthropic.probe(anthropic_config(server.anthropic_base_url, model="claude-nope"))
    assert not result.ok
    assert result.model is None
    assert "not found" in result.message


def test_an_earlier_tests_address_is_refused_without_eating_the_script(models):
    """Work an earlier test left running (its Sugo's summary thread, say) cannot take this test's reply."""
    import httpx

    old = models.base_url
    models.new_epoch()
    models.script("For this test only.")
    body = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(f"{old}/chat/completions", json=body).status_code == 410
    assert models.pending_replies == 1 and models.requests == []
    r = httpx.post(f"{models.base_url}/chat/completions", json=body)
    assert r.json()["choices"][0]["message"]["content"] == "For this test only."
    assert models.last_request.path == "/v1/chat/completions"
    # The bare address (what local-server discovery probes) still answers.
    port = models.base_url.split(":")[2].split("/")[0]
    assert httpx.get(f"http://127.0.0.1:{port}/v1/models").status_code == 200


def test_a_call_from_a_worker_thread_leaves_no_connection_open(models):
    """Background summaries and scene work ask the model on a loop of their own, many times a day:
    each call's pooled client is closed with its loop, not left holding a socket for the collector."""
    import gc

    import httpx

    from app.connections.providers import complete_chat_blocking
    from app.connections.providers.base import GenerationParams, ProviderConfig

    def open_clients() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, httpx.AsyncClient) and not o.is_closed)

    before = open_clients()
    models.script("One.", "Two.")
    config = ProviderConfig(kind="openai", base_url=models.base_url, model="test-model")
    for _ in range(2):
        done = complete_chat_blocking(
            config, [{"role": "user", "content": "Hi"}], GenerationParams(max_tokens=16)
        )
        assert done.text in ("One.", "Two.")
    assert open_clients() == before

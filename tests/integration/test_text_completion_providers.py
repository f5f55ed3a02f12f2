"""Text completion's three endpoint shapes against the test model server, over real HTTP on 127.0.0.1;
and the chat provider meeting a text-completion answer."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from app.connections.core.answers import read_answer
from app.connections.providers import anthropic, get_provider, openai_compat, text_completion
from app.connections.providers.base import (
    GenerationParams,
    ProviderConfig,
    ProviderError,
    Usage,
)
from tests.support.model_server import ModelServer, Reply
from tests.support.streams import collect, collect_until_error

pytestmark = pytest.mark.anyio

MODELS = ("test-model", "other-model")
APIS = ("openai_completions", "llamacpp", "ollama")
PATHS = {"openai_completions": "/v1/completions", "llamacpp": "/completion", "ollama": "/api/generate"}
PROMPT = "<|im_start|>user\nTell me a joke<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def _open_server() -> Iterator[ModelServer]:
    with ModelServer(models=MODELS) as server:
        yield server


@pytest.fixture
def server(_open_server: ModelServer) -> ModelServer:
    _open_server.reset()
    return _open_server


def text_config(server: ModelServer, api: str, **overrides: Any) -> ProviderConfig:
    fields: dict[str, Any] = {
        "kind": "text",
        "text_api": api,
        "base_url": server.base_url if api == "openai_completions" else server.root_url,
        "model": "test-model",
        "timeout_s": 10.0,
    }
    fields.update(overrides)
    return ProviderConfig(**fields)


def endpoint(server: ModelServer, api: str) -> str:
    return server.root_url + PATHS[api]


async def failure(config: ProviderConfig, *, streaming: bool) -> ProviderError:
    if streaming:
        _, err = await collect_until_error(text_completion.stream_text(config, PROMPT, GenerationParams()))
        return err
    with pytest.raises(ProviderError) as caught:
        await text_completion.complete_text(config, PROMPT, GenerationParams())
    return caught.value


def cached_tokens(api: str) -> int | None:
    return None if api == "ollama" else 0  # Ollama reports no cache reads


# --- Streaming and whole replies -----------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_a_reply_streams_in_order_then_one_closing_event(server: ModelServer, api: str) -> None:
    text = "Why did the scarecrow win an award? He was outstanding in his field."
    server.script(Reply(text=text, chunk_size=5, usage={"input_tokens": 30, "output_tokens": 17}))

    events = await collect(text_completion.stream_text(text_config(server, api), PROMPT, GenerationParams()))

    deltas = [e.text for e in events[:-1]]
    assert deltas == [text[i : i + 5] for i in range(0, len(text), 5)]
    final = events[-1]
    assert final.text == ""
    assert final.usage == Usage(input_tokens=30, output_tokens=17, cached_input_tokens=cached_tokens(api))
    assert final.finish_reason == "stop"
    assert final.model == "test-model"
    assert server.last_request.path == PATHS[api]
    assert server.last_request.json["prompt"] == PROMPT


@pytest.mark.parametrize("api", APIS)
async def test_a_whole_reply(server: ModelServer, api: str) -> None:
    server.script(
        Reply(text="A whole answer.", model="served-model", usage={"input_tokens": 11, "output_tokens": 4})
    )

    completion = await text_completion.complete_text(text_config(server, api), PROMPT, GenerationParams())

    assert completion.text == "A whole answer."
    assert completion.model == "served-model"
    assert completion.usage == Usage(input_tokens=11, output_tokens=4, cached_input_tokens=cached_tokens(api))
    assert completion.finish_reason == "stop"
    assert server.last_request.json["stream"] is False


@pytest.mark.parametrize("api", APIS)
async def test_a_reply_cut_at_max_tokens_says_length(server: ModelServer, api: str) -> None:
    server.script(
        Reply(text="Once upon a", finish_reason="length"), Reply(text="Once upon a", finish_reason="length")
    )
    config = text_config(server, api)
    events = await collect(text_completion.stream_text(config, PROMPT, GenerationParams(max_tokens=3)))
    assert events[-1].finish_reason == "length"
    completion = await text_completion.complete_text(config, PROMPT, GenerationParams(max_tokens=3))
    assert completion.finish_reason == "length"


@pytest.mark.parametrize("api", APIS)
async def test_an_unscripted_reply_echoes_the_prompts_last_line(server: ModelServer, api: str) -> None:
    completion = await text_completion.complete_text(
        text_config(server, api), "The story so far.\nTell me a joke\n\n", GenerationParams()
    )
    assert completion.text == "Echo: Tell me a joke"


@pytest.mark.parametrize("api", APIS)
async def test_reasoning_passes_through_in_the_text_for_the_answer_reader(
    server: ModelServer, api: str
) -> None:
    server.script(Reply(text="Hello.", reasoning="They want a greeting.", chunk_size=3))
    events = await collect(text_completion.stream_text(text_config(server, api), PROMPT, GenerationParams()))
    text = "".join(e.text for e in events)
    assert text == "<think>They want a greeting.</think>Hello."
    assert all(not e.reasoning for e in events)
    answer = read_answer(text)
    assert (answer.text, answer.reasoning) == ("Hello.", "They want a greeting.")


# --- What each backend is sent -------------------------------------------------------------------

ALL_SAMPLERS = GenerationParams(
    temperature=0.7,
    top_p=0.9,
    top_k=40,
    min_p=0.05,
    repetition_penalty=1.1,
    max_tokens=200,
    stop=("\nUser:",),
)


@pytest.mark.parametrize(
    ("api", "expected"),
    [
        (
            "openai_completions",
            {
                "model": "test-model",
                "prompt": PROMPT,
                "stream": True,
                "stream_options": {"include_usage": True},
                "max_tokens": 200,
                "temperature": 0.7,
                "top_p": 0.9,
                "top_k": 40,
                "min_p": 0.05,
                "repetition_penalty": 1.1,
                "stop": ["\nUser:"],
            },
        ),
        (
            "llamacpp",
            {
                "prompt": PROMPT,
                "stream": True,
                "cache_prompt": True,
                "model": "test-model",
                "n_predict": 200,
                "temperature": 0.7,
                "top_p": 0.9,
                "top_k": 40,
                "min_p": 0.05,
                "repeat_penalty": 1.1,
                "stop": ["\nUser:"],
            },
        ),
        (
            "ollama",
            {
                "model": "test-model",
                "prompt": PROMPT,
                "stream": True,
                "raw": True,
                "options": {
                    "num_predict": 200,
                    "num_ctx": 8192,
                    "stop": ["\nUser:"],
                    "temperature": 0.7,
                    "top_k": 40,
                    "top_p": 0.9,
                    "min_p": 0.05,
                    "repeat_penalty": 1.1,
                },
            },
        ),
    ],
)
async def test_samplers_go_out_under_each_backends_names(
    server: ModelServer, api: str, expected: dict
) -> None:
    config = text_config(server, api, context_size=8192)
    await collect(text_completion.stream_text(config, PROMPT, ALL_SAMPLERS))
    assert server.last_request.json == expected


@pytest.mark.parametrize(
    ("api", "expected"),
    [
        ("openai_completions", {"model": "", "prompt": PROMPT, "stream": False, "max_tokens": 1024}),
        ("llamacpp", {"prompt": PROMPT, "stream": False, "cache_prompt": True}),
        ("ollama", {"model": "test-model", "prompt": PROMPT, "stream": False, "raw": True}),
    ],
)
async def test_samplers_left_unset_are_not_sent(server: ModelServer, api: str, expected: dict) -> None:
    # The OpenAI shape runs without a model name here (KoboldCpp and tabbyAPI serve whatever is loaded).
    server.models.append("")
    try:
        config = text_config(server, api, model="" if api != "ollama" else "test-model")
        await text_completion.complete_text(config, PROMPT, GenerationParams())
    finally:
        server.models.remove("")
    assert server.last_request.json == expected


async def test_extra_body_merges_into_ollamas_options_and_headers_arrive(server: ModelServer) -> None:
    config = text_config(
        server,
        "ollama",
        api_key="proxy-key",
        extra_headers={"X-Title": "Sugo"},
        extra_body={"keep_alive": "30m", "options": {"num_gpu": 20, "temperature": 0.2}},
    )
    await text_completion.complete_text(config, PROMPT, GenerationParams(temperature=0.9, top_k=50))
    request = server.last_request
    assert request.json["keep_alive"] == "30m"
    assert request.json["options"] == {"temperature": 0.2, "top_k": 50, "num_gpu": 20}
    assert request.headers["x-title"] == "Sugo"
    assert request.headers["authorization"] == "Bearer proxy-key"


@pytest.mark.parametrize(
    ("api", "pasted", "path"),
    [
        ("llamacpp", "{root}/v1", "/completion"),
        ("ollama", "{root}/v1/", "/api/generate"),
        ("ollama", "{root}/api", "/api/generate"),
        ("openai_completions", "{root}", "/v1/completions"),  # a bare address gets /v1
        ("openai_completions", "{root}/v1/", "/v1/completions"),
    ],
)
async def test_the_base_url_a_user_pastes_reaches_the_endpoint(
    server: ModelServer, api: str, pasted: str, path: str
) -> None:
    config = text_config(server, api, base_url=pasted.format(root=server.root_url))
    completion = await text_completion.complete_text(config, "Hi", GenerationParams())
    assert completion.text == "Echo: Hi"
    assert server.last_request.path == path


# --- Stop strings --------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("ignore_stop", [False, True], ids=["server-stops", "server-ignores-stop"])
@pytest.mark.parametrize("chunk_size", [1, 3, 5, 100])
async def test_a_stop_string_ends_the_streamed_reply(
    server: ModelServer, api: str, ignore_stop: bool, chunk_size: int
) -> None:
    # With chunk_size 3 the stop string arrives cut in two ("...\nUs", "er:"), with 5 in three.
    text = "Sure, here.\nUser: and now I speak for the user"
    server.script(Reply(text=text, chunk_size=chunk_size, ignore_stop=ignore_stop))
    params = GenerationParams(stop=("\nUser:", "<|im_end|>"))

    events = await collect(text_completion.stream_text(text_config(server, api), PROMPT, params))

    assert "".join(e.text for e in events) == "Sure, here."
    assert all(e.text for e in events[:-1])
    assert events[-1].finish_reason == "stop"


@pytest.mark.parametrize("api", APIS)
async def test_a_stop_string_ends_a_whole_reply_the_server_did_not_end(server: ModelServer, api: str) -> None:
    server.script(
        Reply(text="Sure.<|im_end|>\n<|im_start|>user\nMore", ignore_stop=True, finish_reason="length")
    )
    params = GenerationParams(stop=("<|im_end|>",))
    completion = await text_completion.complete_text(text_config(server, api), PROMPT, params)
    assert completion.text == "Sure."
    assert completion.finish_reason == "stop"


@pytest.mark.parametrize("api", APIS)
async def test_a_server_that_ignores_stream_gives_the_whole_reply_as_one_delta(
    server: ModelServer, api: str
) -> None:
    server.script(Reply(text="All at once.\nUser: more", ignore_stop=True))
    config = text_config(server, api, extra_body={"stream": False})
    events = await collect(text_completion.stream_text(config, PROMPT, GenerationParams(stop=("\nUser:",))))
    assert [e.text for e in events] == ["All at once.", ""]
    assert events[-1].finish_reason == "stop"


@pytest.mark.parametrize("api", APIS)
async def test_the_stream_is_closed_at_the_stop_string(server: ModelServer, api: str) -> None:
    # The server would hold the rest of the reply until the test lets it go: a client reading on past the
    # stop string would wait here (the hold gives up after a minute), one that closes the stream does not.
    hold = threading.Event()
    server.script(
        Reply(text="Done.\nUser: ..........", chunk_size=4, ignore_stop=True, hold=hold, hold_after_chunks=4)
    )
    config = text_config(server, api, timeout_s=2.0)  # a client waiting on fails in 2 s, not a minute
    try:
        events = await collect(
            text_completion.stream_text(config, PROMPT, GenerationParams(stop=("\nUser:",)))
        )
    finally:
        hold.set()
    assert "".join(e.text for e in events) == "Done."
    assert events[-1].finish_reason == "stop"
    assert events[-1].model in (None, "test-model")


# --- Failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_a_dropped_stream_keeps_the_partial_text(server: ModelServer, api: str) -> None:
    server.script(Reply(text="abcdefghijkl", chunk_size=2, break_after_chunks=3))
    # "f" may begin the stop string "fZ", so it is held back; the drop hands it over with the rest.
    params = GenerationParams(stop=("fZ",))
    text, err = await collect_until_error(
        text_completion.stream_text(text_config(server, api), PROMPT, params)
    )
    assert text == "abcdef"
    assert err.kind == "stream_broken"
    assert str(err) == "The connection dropped in the middle of the reply."


@pytest.mark.parametrize("api", APIS)
async def test_a_dropped_whole_answer(server: ModelServer, api: str) -> None:
    server.script(Reply(text="abcdefghijkl", break_after_chunks=1))
    err = await failure(text_config(server, api), streaming=False)
    assert err.kind == "stream_broken"


@pytest.mark.parametrize("api", APIS)
async def test_an_error_inside_the_stream(server: ModelServer, api: str) -> None:
    server.script(Reply(text="abcdefgh", chunk_size=2, break_after_chunks=2, error="The model crashed"))
    text, err = await collect_until_error(
        text_completion.stream_text(text_config(server, api), PROMPT, GenerationParams())
    )
    assert text == "abcd"
    assert err.kind == "server"
    assert str(err) == "The server reported an error during the reply: The model crashed."


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "whole"])
async def test_a_server_error_is_readable(server: ModelServer, api: str, streaming: bool) -> None:
    server.script(Reply(status=500, error="Scripted trouble"))
    err = await failure(text_config(server, api), streaming=streaming)
    assert err.kind == "server"
    assert err.status == 500
    assert str(err) == "The server failed with an internal error (500): Scripted trouble."


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "whole"])
async def test_a_missing_endpoint_names_it_and_the_other_shapes(
    server: ModelServer, api: str, streaming: bool
) -> None:
    base = server.base_url + "/nowhere" if api == "openai_completions" else server.root_url + "/nowhere"
    err = await failure(text_config(server, api, base_url=base), streaming=streaming)
    assert err.kind == "not_found"
    assert err.status == 404
    others = {
        "openai_completions": "llama.cpp or Ollama",
        "llamacpp": "OpenAI-compatible completions or Ollama",
        "ollama": "OpenAI-compatible completions or llama.cpp",
    }[api]
    name = {
        "openai_completions": "OpenAI-compatible completions",
        "llamacpp": "llama.cpp",
        "ollama": "Ollama",
    }[api]
    path = PATHS[api].removeprefix("/v1")
    assert str(err) == (
        f"Nothing was found at {base}{path} (404): Not Found. If the server does not speak the {name} API, "
        f"choose another text-completion API ({others}); if it does, check the base URL."
    )


@pytest.mark.parametrize("api", ["openai_completions", "ollama"])
async def test_an_unknown_model_is_named(server: ModelServer, api: str) -> None:
    err = await failure(text_config(server, api, model="nope"), streaming=True)
    assert err.kind == "not_found"
    assert str(err).startswith("Model 'nope' was not found, or the URL is wrong (404): ")
    assert "choose another text-completion API" not in str(err)


async def test_no_text_api_chosen(server: ModelServer) -> None:
    err = await failure(text_config(server, "llamacpp", text_api=None), streaming=True)
    assert err.kind == "bad_request"
    assert "No text-completion API is chosen" in str(err)
    assert get_provider("text").__name__ == "app.connections.providers.text_chat"


# --- Answers in another API's shape ---------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "whole"])
async def test_a_chat_shaped_answer_to_a_text_request_names_the_endpoint(
    server: ModelServer, api: str, streaming: bool
) -> None:
    server.script(Reply(text="Hello.", shape="chat"))
    err = await failure(text_config(server, api), streaming=streaming)
    assert err.kind == "bad_response"
    assert str(err) == (
        f"{endpoint(server, api)} answered in the chat-completions shape: choose the chat connection kind, "
        "or the right text-completion API."
    )


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "whole"])
async def test_another_text_shape_names_the_api_to_choose(server: ModelServer, streaming: bool) -> None:
    server.script(Reply(text="Hello.", shape="llamacpp"))
    err = await failure(text_config(server, "openai_completions"), streaming=streaming)
    assert str(err) == (
        f"{server.base_url}/completions answered in the llama.cpp /completion shape: "
        "choose the llama.cpp text-completion API."
    )


@pytest.mark.parametrize(
    ("shape", "streaming", "words"),
    [
        ("openai_completions", True, "OpenAI text-completions (choices[].text) shape"),
        ("openai_completions", False, "OpenAI text-completions (choices[].text) shape"),
        ("llamacpp", True, "llama.cpp /completion shape"),
        ("llamacpp", False, "llama.cpp /completion shape"),
        ("ollama", False, "Ollama /api/generate shape"),
    ],
)
async def test_a_text_shaped_answer_to_a_chat_request_is_named(
    server: ModelServer, shape: str, streaming: bool, words: str
) -> None:
    server.script(Reply(text="Hello.", shape=shape))
    config = ProviderConfig(kind="openai", base_url=server.base_url, model="test-model", timeout_s=10.0)
    messages = [{"role": "user", "content": "Hi"}]
    if streaming:
        text, err = await collect_until_error(openai_compat.stream_chat(config, messages, GenerationParams()))
        assert text == ""
    else:
        with pytest.raises(ProviderError) as caught:
            await openai_compat.complete_chat(config, messages, GenerationParams())
        err = caught.value
    assert err.kind == "bad_response"
    api = {
        "openai_completions": "OpenAI-compatible completions",
        "llamacpp": "llama.cpp",
        "ollama": "Ollama",
    }[shape]
    assert str(err) == (
        f"{server.base_url}/chat/completions answered in the {words}: "
        f"choose the text-completion connection kind, with the {api} API."
    )


# --- Connection test -----------------------------------------------------------------------------


async def test_probe_openai_completions(server: ModelServer) -> None:
    result = await text_completion.probe(text_config(server, "openai_completions", model=""))
    assert result.ok
    assert result.message == "Connected. Models available: test-model, other-model"
    assert result.models == MODELS
    assert server.last_request.path == "/v1/models"

    result = await text_completion.probe(text_config(server, "openai_completions"))
    assert (result.ok, result.model, result.message) == (True, "test-model", "Connected to test-model.")
    assert server.last_request.path == "/v1/completions"
    assert server.last_request.json["max_tokens"] == 1


async def test_probe_llamacpp_asks_which_model_it_runs(server: ModelServer) -> None:
    result = await text_completion.probe(text_config(server, "llamacpp", model=""))
    assert result.ok
    assert result.model == "test-model.gguf"
    assert result.message == "Connected to test-model.gguf."
    assert result.models == ("test-model.gguf",)
    assert [r.path for r in server.requests] == ["/props", "/completion"]
    assert server.last_request.json["n_predict"] == 1


async def test_probe_ollama(server: ModelServer) -> None:
    result = await text_completion.probe(text_config(server, "ollama", model=""))
    assert result.ok
    assert result.models == MODELS
    assert server.last_request.path == "/api/tags"

    result = await text_completion.probe(text_config(server, "ollama"))
    assert (result.ok, result.message) == (True, "Connected to test-model.")
    assert server.last_request.json["options"] == {"num_predict": 1}

    result = await text_completion.probe(text_config(server, "ollama", model="nope"))
    assert not result.ok
    assert "Model 'nope' was not found" in result.message


@pytest.mark.parametrize("api", APIS)
async def test_probe_reports_failures(server: ModelServer, closed_port: int, api: str) -> None:
    result = await text_completion.probe(text_config(server, api, base_url=f"http://127.0.0.1:{closed_port}"))
    assert not result.ok
    assert result.model is None
    assert "connection refused" in result.message

    server.script(Reply(shape="chat"))
    result = await text_completion.probe(text_config(server, api))
    assert not result.ok
    assert "answered in the chat-completions shape" in result.message


# --- The chat providers and the new samplers -----------------------------------------------------


async def test_chat_requests_carry_the_new_samplers_only_when_set(server: ModelServer) -> None:
    config = ProviderConfig(kind="openai", base_url=server.base_url, model="test-model", timeout_s=10.0)
    messages = [{"role": "user", "content": "Hi"}]
    await openai_compat.complete_chat(config, messages, GenerationParams(temperature=0.5))
    assert set(server.last_request.json) == {"model", "messages", "stream", "temperature"}

    params = GenerationParams(top_k=40, min_p=0.05, repetition_penalty=1.1)
    await openai_compat.complete_chat(config, messages, params)
    body = server.last_request.json
    assert (body["top_k"], body["min_p"], body["repetition_penalty"]) == (40, 0.05, 1.1)

    # Anthropic takes top_k and has no min_p or repetition penalty.
    config = ProviderConfig(
        kind="anthropic",
        base_url=server.anthropic_base_url,
        model="test-model",
        api_key="unused",
        timeout_s=10.0,
    )
    await anthropic.complete_chat(config, messages, params)
    body = server.last_request.json
    assert body["top_k"] == 40
    assert "min_p" not in body and "repetition_penalty" not in body

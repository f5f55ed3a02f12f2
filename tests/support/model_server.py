"""A scriptable model server speaking the OpenAI and Anthropic HTTP APIs, over real HTTP on 127.0.0.1.

Integration tests, browser tests and benchmarks point Sugo at it instead of a real provider:

    with ModelServer() as server:
        server.script("Hello there!", Reply(status=429, error="Slow down"))
        config = ProviderConfig(kind="openai", base_url=server.base_url, model="test-model")

It also speaks the three text-completion shapes, from the same script: OpenAI `POST /v1/completions`,
llama.cpp `POST /completion` (and `GET /props`, `/health`) and Ollama `POST /api/generate` (and
`GET /api/tags`), the last two at `root_url`. They honour `stop` as llama.cpp does (the reply ends
before the first stop string) unless the Reply says `ignore_stop`, and put a Reply's reasoning in the
text as a `<think>` block, as a raw prompt's model writes it.

Unscripted requests get a predictable answer: "Echo: <last user message>", or for a text completion
"Echo: <last line of the prompt>".
Run by hand for demos: `python -m tests.support.model_server --port 5001`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import itertools
import json
import logging
import math
import re
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
EMBEDDING_DIM = 384
ECHO_PREFIX = "Echo: "


@dataclass
class Reply:
    """One scripted answer. Usage numbers follow Sugo's meaning: input_tokens includes cached tokens."""

    text: str = "Hello from the test model."
    chunk_size: int = 4  # characters per streamed delta
    delay_s: float = 0.0  # sleep between streamed deltas
    first_delay_s: float = 0.0  # sleep before the first byte of the response
    # Held until the test sets it (at most 10 minutes), then answered: a run stays mid-way exactly as long
    # as the test needs, with no guess at how long that is.
    gate: threading.Event | None = None
    status: int = 200  # non-200: an error response in the provider's shape
    error: str | None = None  # message for non-200 replies, or an in-stream error after break_after_chunks
    break_after_chunks: int | None = None  # stream this many deltas, then cut the connection (no clean end)
    model: str | None = None  # model name echoed back (default: the requested model)
    usage: dict[str, int] | None = None  # {"input_tokens", "output_tokens", "cached_input_tokens"}
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI-shaped tool calls to return
    finish_reason: str | None = None  # non-streamed replies: say this instead of "stop" ("length": cut off)
    # The provider's own reasoning, sent before the text: OpenAI-compatible servers in the delta's (or the
    # message's) `reasoning_field` ("reasoning_content" or "reasoning"), Anthropic as a thinking block.
    # Inline reasoning (`<think>`) is simply part of `text`.
    reasoning: str = ""
    reasoning_field: str = "reasoning_content"
    # A streamed reply waits for this event after its reasoning and before its first text delta: a test
    # looks at the page while the model is still thinking.
    hold: threading.Event | None = None
    hold_after_chunks: int = 0  # the hold comes after this many text deltas: a test looks at a reply mid-way
    # Text completions: run on past the request's stop strings, as a backend that ignores `stop` does.
    ignore_stop: bool = False
    # Answer in another API's shape than the endpoint's: "chat", "openai_completions", "llamacpp" or
    # "ollama" (a server or proxy that maps one API onto another). None: the endpoint's own.
    shape: str | None = None


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    json: Any  # parsed body, or None when there was none


class _DropConnection(Exception):
    """Raised inside a response body so uvicorn closes the socket mid-response."""


def _is_drop(exc: BaseException | None) -> bool:
    if isinstance(exc, _DropConnection):
        return True
    inner = getattr(exc, "exceptions", None)
    return bool(inner) and all(_is_drop(e) for e in inner)


class _HideDeliberateDrops(logging.Filter):
    # uvicorn logs a traceback for every exception escaping the app; ours are on purpose.
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and _is_drop(record.exc_info[1]))


def estimate_tokens(chars: int) -> int:
    """The server's token estimate: a quarter of the characters, rounded up."""
    return (chars + 3) // 4


def embed_text(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """A unit vector built from hashed lower-cased words, so texts sharing words come out similar."""
    vector = [0.0] * dim
    words = re.findall(r"\w+", text.lower()) or [""]
    for word in words:
        digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
        vector[digest % dim] += 1.0 if (digest >> 40) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        # Words whose signs cancel out exactly; any fixed direction keeps the vector a unit one.
        vector[0], norm = 1.0, 1.0
    return [v / norm for v in vector]


def _text_of(content: Any) -> str:
    """Text of a message content: a string, or a list of OpenAI parts / Anthropic blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part)
            for part in content
            if not isinstance(part, dict) or isinstance(part.get("text", ""), str)
        )
    return ""


def _last_user_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _prompt_chars(messages: Any, system: Any = None) -> int:
    total = len(_text_of(system))
    if isinstance(messages, list):
        total += sum(len(_text_of(m.get("content"))) for m in messages if isinstance(m, dict))
    return total


def _last_line(prompt: str) -> str:
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _chunks(text: str, size: int) -> list[str]:
    if not text:
        return []
    if size <= 0:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass
class _Tokens:
    input: int
    output: int
    cached: int

    @classmethod
    def of(cls, reply: Reply, prompt_chars: int) -> _Tokens:
        override = reply.usage or {}
        return cls(
            input=override.get("input_tokens", estimate_tokens(prompt_chars)),
            output=override.get("output_tokens", estimate_tokens(len(reply.text))),
            cached=override.get("cached_input_tokens", 0),
        )

    def openai(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.input,
            "completion_tokens": self.output,
            "total_tokens": self.input + self.output,
            "prompt_tokens_details": {"cached_tokens": self.cached},
        }

    def anthropic_input(self) -> dict[str, int]:
        # Anthropic's input_tokens excludes the tokens read from the cache.
        return {
            "input_tokens": max(self.input - self.cached, 0),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": self.cached,
        }


_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_DEFAULT_ERROR_MESSAGES = {
    400: "Bad request.",
    401: "Invalid API key.",
    403: "You do not have access to this resource.",
    404: "Not found.",
    413: "Request too large.",
    422: "Unprocessable request.",
    429: "Rate limit reached. Please slow down.",
    500: "The server had an error while processing your request.",
    502: "Bad gateway.",
    503: "The service is temporarily unavailable.",
    529: "Overloaded.",
}


def _openai_error(status: int, message: str, code: str | None = None) -> JSONResponse:
    error_type = _OPENAI_ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return JSONResponse(body, status_code=status)


def _anthropic_error(status: int, message: str) -> JSONResponse:
    error_type = _ANTHROPIC_ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return JSONResponse(
        {"type": "error", "error": {"type": error_type, "message": message}}, status_code=status
    )


def _sse(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {payload}\n\n".encode()


_EPOCH = re.compile(r"^/e(\d+)(?=/)")


class _Epochs:
    """Strips a /e<N> prefix from the path, or refuses the request when N is not the current epoch."""

    def __init__(self, app, server: ModelServer) -> None:
        self.app, self.server = app, server

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and (m := _EPOCH.match(scope["path"])):
            if int(m.group(1)) != self.server._epoch:
                gone = Response(
                    "An earlier test's address: this epoch of the test model server has ended.",
                    status_code=410,
                    media_type="text/plain",
                )
                await gone(scope, receive, send)
                return
            path = scope["path"][m.end() :]
            scope = {**scope, "path": path, "raw_path": path.encode()}
        await self.app(scope, receive, send)


class ModelServer:
    """OpenAI-compatible (`base_url`) and Anthropic (`anthropic_base_url`) endpoints in one server."""

    def __init__(
        self,
        *,
        port: int = 0,
        api_key: str | None = None,
        models: Iterable[str] = ("test-model",),
        echo_delay_s: float = 0.0,
    ) -> None:
        self.api_key = api_key
        self.models: list[str] = list(models)
        # Delay between deltas of unscripted echo replies, so demos show tokens arriving.
        self.echo_delay_s = echo_delay_s
        # Seconds each /embeddings call takes, to watch slow background work (progress, Stop).
        self.embedding_delay_s = 0.0
        # While set to an Event, each /embeddings call is recorded, then waits for it: a test holds
        # background work in the middle of its embedding call.
        self.embedding_gate: threading.Event | None = None
        self._gates: list[threading.Event] = []  # the gates and holds handed out (reset lets them go)
        # The size of the vectors /embeddings gives (None: EMBEDDING_DIM), whatever the model's name:
        # a server that swapped the model behind a name.
        self.embedding_dim: int | None = None
        # While True, a request declaring tools is refused with a 400 naming them (a model or server
        # without tool support).
        self.refuse_tools = False
        self.requests: list[RecordedRequest] = []
        self._requested_port = port
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._ids = itertools.count(1)
        # Each test's part of the server (`new_epoch`): its addresses carry /e<N>, and a request to an
        # earlier test's addresses is refused (410) without touching the scripted replies, so work an
        # earlier test left running can never eat this test's script. Bare addresses always answer.
        self._epoch = 0
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai_chat, methods=["POST"]),
                Route("/v1/models", self._openai_models, methods=["GET"]),
                Route("/v1/embeddings", self._openai_embeddings, methods=["POST"]),
                Route("/anthropic/v1/messages", self._anthropic_messages, methods=["POST"]),
                Route("/anthropic/v1/models", self._anthropic_models, methods=["GET"]),
                Route("/v1/completions", self._openai_completions, methods=["POST"]),
                Route("/completion", self._llamacpp_completion, methods=["POST"]),
                Route("/props", self._llamacpp_props, methods=["GET"]),
                Route("/health", self._llamacpp_health, methods=["GET"]),
                Route("/api/generate", self._ollama_generate, methods=["POST"]),
                Route("/api/tags", self._ollama_tags, methods=["GET"]),
            ]
        )

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ModelServer:
        if self._thread is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose proto
        # says TCP, and without it Nagle plus delayed ACKs add ~40 ms to streamed replies.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, self._requested_port))
        self._socket = sock
        uvicorn_error_log = logging.getLogger("uvicorn.error")
        if not any(isinstance(f, _HideDeliberateDrops) for f in uvicorn_error_log.filters):
            uvicorn_error_log.addFilter(_HideDeliberateDrops())
        config = uvicorn.Config(
            _Epochs(self.app, self),
            http="h11",
            loop="asyncio",
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=f"model-server-{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"The test model server did not start on port {self.port}")
            time.sleep(0.005)
        logger.info("Test model server listening on %s", self.base_url)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._socket is not None:
            return self._socket.getsockname()[1]
        if self._requested_port:
            return self._requested_port
        raise RuntimeError("The model server has no port until it is started")

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}{self._prefix}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://{HOST}:{self.port}{self._prefix}/anthropic/v1"

    @property
    def root_url(self) -> str:
        """The server's root, where llama.cpp (`/completion`) and Ollama (`/api/generate`) answer."""
        return f"http://{HOST}:{self.port}{self._prefix}"

    @property
    def bare_url(self) -> str:
        """The address without this test's epoch, as a server found on a port (discovery) is addressed."""
        return f"http://{HOST}:{self.port}/v1"

    @property
    def _prefix(self) -> str:
        return f"/e{self._epoch}" if self._epoch else ""

    def new_epoch(self) -> None:
        """Start a new test's part of the server: addresses handed out before now are refused."""
        with self._lock:
            self._epoch += 1

    # --- scripting -------------------------------------------------------------------------------

    def script(self, *replies: Reply | str) -> None:
        """Queue replies for the next chat/message requests, first in first out."""
        with self._lock:
            self._queue.extend(Reply(text=r) if isinstance(r, str) else r for r in replies)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            gates, self._gates = self._gates, []
        for gate in gates:  # a test that ended with a reply still held lets it go
            gate.set()
        if self.embedding_gate is not None:
            self.embedding_gate.set()
            self.embedding_gate = None
        self.embedding_dim = None
        self.refuse_tools = False

    @property
    def pending_replies(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            if not self.requests:
                raise LookupError("The model server has received no requests")
            return self.requests[-1]

    def _next_reply(self, messages: Any) -> Reply:
        return self._pop_reply(_last_user_text(messages))

    def _pop_reply(self, echoed: str) -> Reply:
        """The next scripted reply, or an echo of `echoed` when none is queued."""
        with self._lock:
            if self._queue:
                reply = self._queue.popleft()
                self._gates.extend(e for e in (reply.gate, reply.hold) if e is not None)
                return reply
        return Reply(text=ECHO_PREFIX + echoed, delay_s=self.echo_delay_s)

    async def _record(self, request: Request) -> tuple[Any, bool]:
        """Record the request; returns (parsed body, whether the body was valid JSON or absent)."""
        raw = await request.body()
        body: Any = None
        valid = True
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                valid = False
        recorded = RecordedRequest(
            method=request.method,
            path=request.url.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            json=body,
        )
        with self._lock:
            self.requests.append(recorded)
        return body, valid

    def _openai_key_ok(self, request: Request) -> bool:
        return self.api_key is None or request.headers.get("authorization") == f"Bearer {self.api_key}"

    def _anthropic_key_ok(self, request: Request) -> bool:
        return self.api_key is None or request.headers.get("x-api-key") == self.api_key

    # --- OpenAI ----------------------------------------------------------------------------------

    async def _openai_models(self, request: Request) -> Response:
        await self._record(request)
        if not self._openai_key_ok(request):
            return _openai_error(401, "Incorrect API key provided.", "invalid_api_key")
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "sugo-tests"} for m in self.models]
        return JSONResponse({"object": "list", "data": data})

    async def _openai_embeddings(self, request: Request) -> Response:
        body, valid = await self._record(request)
        if not self._openai_key_ok(request):
            return _openai_error(401, "Incorrect API key provided.", "invalid_api_key")
        if not valid or not isinstance(body, dict) or "input" not in body:
            return _openai_error(400, "The request body must be JSON with an 'input' field.")
        if self.embedding_delay_s:
            await asyncio.sleep(self.embedding_delay_s)
        if self.embedding_gate is not None:
            await asyncio.to_thread(self.embedding_gate.wait, 60)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        texts = [item if isinstance(item, str) else json.dumps(item) for item in inputs]
        dim = (
            body.get("dimensions")
            if isinstance(body.get("dimensions"), int)
            else (self.embedding_dim or EMBEDDING_DIM)
        )
        data = []
        for index, text in enumerate(texts):
            vector: Any = embed_text(text, dim)
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": vector})
        tokens = sum(estimate_tokens(len(t)) for t in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or "test-embedding",
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _openai_chat(self, request: Request) -> Response:
        body, valid = await self._record(request)
        if not self._openai_key_ok(request):
            return _openai_error(401, "Incorrect API key provided.", "invalid_api_key")
        if not valid or not isinstance(body, dict):
            return _openai_error(400, "We could not parse the JSON body of your request.")
        model = body.get("model")
        if model not in self.models:
            return _openai_error(404, f"The model '{model}' does not exist", "model_not_found")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _openai_error(400, "'messages' must be a non-empty list.")
        if body.get("tools") and self.refuse_tools:
            return _openai_error(400, "This model does not support tools (the 'tools' parameter).")
        if problem := _openai_tool_problem(messages):
            return _openai_error(400, problem)
        reply = self._next_reply(messages)
        if reply.gate is not None:
            await asyncio.to_thread(reply.gate.wait, 600)
        if reply.first_delay_s:
            await asyncio.sleep(reply.first_delay_s)
        if reply.status != 200:
            message = reply.error or _DEFAULT_ERROR_MESSAGES.get(reply.status, "Error.")
            return _openai_error(reply.status, message)
        tokens = _Tokens.of(reply, _prompt_chars(messages))
        served_model = reply.model or model
        stream, include_usage = bool(body.get("stream")), _includes_usage(body)
        if reply.shape not in (None, "chat"):
            return self._text_answer(reply, reply.shape, served_model, tokens, stream, include_usage)
        return self._chat_answer(reply, served_model, tokens, stream, include_usage)

    def _chat_answer(
        self, reply: Reply, served_model: str, tokens: _Tokens, stream: bool, include_usage: bool
    ) -> Response:
        completion_id = f"chatcmpl-test-{next(self._ids)}"
        if stream:
            events = self._openai_stream(reply, served_model, completion_id, tokens, include_usage)
            return StreamingResponse(events, media_type="text/event-stream")
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.reasoning:
            message[reply.reasoning_field] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        payload = {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": served_model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": tokens.openai(),
        }
        if reply.break_after_chunks is not None:
            return StreamingResponse(self._cut_json(payload), media_type="application/json")
        return JSONResponse(payload)

    async def _cut_json(self, payload: dict[str, Any]) -> AsyncIterator[bytes]:
        encoded = json.dumps(payload).encode()
        yield encoded[: len(encoded) // 2]
        raise _DropConnection

    async def _openai_stream(
        self, reply: Reply, model: str, completion_id: str, tokens: _Tokens, include_usage: bool
    ) -> AsyncIterator[bytes]:
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
            }
            if include_usage:
                data["usage"] = None
            return _sse(data)

        yield chunk({"role": "assistant", "content": ""})
        for index, piece in enumerate(_chunks(reply.reasoning, reply.chunk_size)):
            if index and reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            yield chunk({reply.reasoning_field: piece})
        if not reply.hold_after_chunks:
            await _held(reply)
        for index, piece in enumerate(_chunks(reply.text, reply.chunk_size)):
            if reply.break_after_chunks is not None and index >= reply.break_after_chunks:
                break
            if index and index == reply.hold_after_chunks:
                await _held(reply)
            if index and reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            yield chunk({"content": piece})
        if reply.break_after_chunks is not None:
            if reply.error:
                yield _sse(
                    {"error": {"message": reply.error, "type": "server_error", "param": None, "code": None}}
                )
                return
            raise _DropConnection
        for index, call in enumerate(reply.tool_calls or []):
            # As real servers do: the id and name first, then the arguments in pieces.
            function = call.get("function") or {}
            head = {"index": index, "id": call.get("id"), "type": "function"}
            yield chunk(
                {"tool_calls": [{**head, "function": {"name": function.get("name"), "arguments": ""}}]}
            )
            for piece in _chunks(function.get("arguments") or "", reply.chunk_size):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
        if include_usage:
            yield _sse(
                {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": tokens.openai(),
                }
            )
        yield _sse("[DONE]")

    # --- Text completion: OpenAI /v1/completions, llama.cpp /completion, Ollama /api/generate -----

    async def _openai_completions(self, request: Request) -> Response:
        return await self._text_completion(request, "openai_completions")

    async def _llamacpp_completion(self, request: Request) -> Response:
        return await self._text_completion(request, "llamacpp")

    async def _ollama_generate(self, request: Request) -> Response:
        return await self._text_completion(request, "ollama")

    async def _text_completion(self, request: Request, api: str) -> Response:
        body, valid = await self._record(request)
        if not self._openai_key_ok(request):
            return _text_error(api, 401, "Invalid API key.")
        if not valid or not isinstance(body, dict):
            return _text_error(api, 400, "The request body is not valid JSON.")
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            return _text_error(api, 400, "'prompt' must be a string.")
        model = body.get("model")
        if api == "openai_completions" and model not in self.models:
            return _text_error(api, 404, f"The model '{model}' does not exist")
        if api == "ollama" and model not in self.models:
            return _text_error(api, 404, f'model "{model}" not found, try pulling it first')
        reply = self._pop_reply(_last_line(prompt))
        if reply.gate is not None:
            await asyncio.to_thread(reply.gate.wait, 600)
        if reply.first_delay_s:
            await asyncio.sleep(reply.first_delay_s)
        if reply.status != 200:
            return _text_error(
                api, reply.status, reply.error or _DEFAULT_ERROR_MESSAGES.get(reply.status, "Error.")
            )
        tokens = _Tokens.of(reply, len(prompt))
        served_model = reply.model or (model if isinstance(model, str) and model else self.models[0])
        # Ollama streams unless told not to; the others answer whole unless told to stream.
        stream = bool(body.get("stream", api == "ollama"))
        include_usage = _includes_usage(body)
        if reply.shape == "chat":
            return self._chat_answer(reply, served_model, tokens, stream, include_usage)
        options = body.get("options") if api == "ollama" else body
        stops = options.get("stop") if isinstance(options, dict) else None
        return self._text_answer(
            reply, reply.shape or api, served_model, tokens, stream, include_usage, stops=stops
        )

    def _text_answer(
        self,
        reply: Reply,
        shape: str,
        model: str,
        tokens: _Tokens,
        stream: bool,
        include_usage: bool,
        *,
        stops: Any = None,
    ) -> Response:
        """The reply in a text-completion shape, ended before the first stop string (llama.cpp leaves
        the stop string out too) unless the reply ignores them."""
        text = (f"<think>{reply.reasoning}</think>" if reply.reasoning else "") + reply.text
        stopped = None
        stops = [stops] if isinstance(stops, str) else stops
        if not reply.ignore_stop and isinstance(stops, list):
            found = [(text.find(s), s) for s in stops if isinstance(s, str) and s and s in text]
            if found:
                cut, stopped = min(found)
                text = text[:cut]
        finish = reply.finish_reason or "stop"
        end = _TextEnd(model, tokens, finish, stopped, f"cmpl-test-{next(self._ids)}", include_usage)
        if stream:
            media = "application/x-ndjson" if shape == "ollama" else "text/event-stream"
            return StreamingResponse(self._text_stream(reply, shape, text, end), media_type=media)
        payload = end.whole(shape, text)
        if reply.break_after_chunks is not None:
            return StreamingResponse(self._cut_json(payload), media_type="application/json")
        return JSONResponse(payload)

    async def _text_stream(self, reply: Reply, shape: str, text: str, end: _TextEnd) -> AsyncIterator[bytes]:
        if not reply.hold_after_chunks:
            await _held(reply)
        for index, piece in enumerate(_chunks(text, reply.chunk_size)):
            if reply.break_after_chunks is not None and index >= reply.break_after_chunks:
                break
            if index and index == reply.hold_after_chunks:
                await _held(reply)
            if index and reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            yield end.piece(shape, piece)
        if reply.break_after_chunks is not None:
            if reply.error:
                yield end.error(shape, reply.error)
                return
            raise _DropConnection
        for line in end.closing(shape):
            yield line

    async def _llamacpp_props(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse(
            {
                "default_generation_settings": {"n_ctx": 8192, "params": {}},
                "total_slots": 1,
                "model_path": f"/models/{self.models[0]}.gguf",
                "chat_template": "",
                "build_info": "sugo-tests",
            }
        )

    async def _llamacpp_health(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse({"status": "ok"})

    async def _ollama_tags(self, request: Request) -> Response:
        await self._record(request)
        details = {"format": "gguf", "family": "test", "parameter_size": "1B", "quantization_level": "Q4_0"}
        models = [
            {"name": m, "model": m, "modified_at": "2025-01-01T00:00:00Z", "size": 0, "details": details}
            for m in self.models
        ]
        return JSONResponse({"models": models})

    # --- Anthropic -------------------------------------------------------------------------------

    async def _anthropic_models(self, request: Request) -> Response:
        await self._record(request)
        if not self._anthropic_key_ok(request):
            return _anthropic_error(401, "invalid x-api-key")
        data = [
            {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
            for m in self.models
        ]
        first, last = (self.models[0], self.models[-1]) if self.models else (None, None)
        return JSONResponse({"data": data, "has_more": False, "first_id": first, "last_id": last})

    async def _anthropic_messages(self, request: Request) -> Response:
        body, valid = await self._record(request)
        if not self._anthropic_key_ok(request):
            return _anthropic_error(401, "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return _anthropic_error(400, "anthropic-version: header is required")
        if not valid or not isinstance(body, dict):
            return _anthropic_error(400, "The request body is not valid JSON.")
        model = body.get("model")
        if model not in self.models:
            return _anthropic_error(404, f"model: {model}")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _anthropic_error(400, "messages: at least one message is required")
        if not isinstance(body.get("max_tokens"), int):
            return _anthropic_error(400, "max_tokens: Field required")
        if body.get("tools") and self.refuse_tools:
            return _anthropic_error(400, "tools: this model does not support tool use")
        if problem := _anthropic_tool_problem(messages, bool(body.get("tools"))):
            return _anthropic_error(400, problem)
        reply = self._next_reply(messages)
        if reply.gate is not None:
            await asyncio.to_thread(reply.gate.wait, 600)
        if reply.first_delay_s:
            await asyncio.sleep(reply.first_delay_s)
        if reply.status != 200:
            return _anthropic_error(
                reply.status, reply.error or _DEFAULT_ERROR_MESSAGES.get(reply.status, "Error.")
            )
        tokens = _Tokens.of(reply, _prompt_chars(messages, body.get("system")))
        served_model = reply.model or model
        message_id = f"msg_test_{next(self._ids)}"
        stop_reason = "tool_use" if reply.tool_calls else "end_turn"
        if body.get("stream"):
            stream = self._anthropic_stream(reply, served_model, message_id, tokens, stop_reason)
            return StreamingResponse(stream, media_type="text/event-stream")
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        if reply.reasoning:
            content.insert(
                0, {"type": "thinking", "thinking": reply.reasoning, "signature": "test-signature"}
            )
        content.extend(_tool_use_block(call) for call in reply.tool_calls or [])
        payload = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": served_model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {**tokens.anthropic_input(), "output_tokens": tokens.output},
        }
        if reply.break_after_chunks is not None:
            return StreamingResponse(self._cut_json(payload), media_type="application/json")
        return JSONResponse(payload)

    async def _anthropic_stream(
        self, reply: Reply, model: str, message_id: str, tokens: _Tokens, stop_reason: str
    ) -> AsyncIterator[bytes]:
        start = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**tokens.anthropic_input(), "output_tokens": 1},
        }
        yield _sse({"type": "message_start", "message": start}, "message_start")
        text_index = 0
        if reply.reasoning:
            # Extended thinking: a thinking block first, closed by its signature.
            thinking = {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": ""},
            }
            yield _sse(thinking, "content_block_start")
            for index, piece in enumerate(_chunks(reply.reasoning, reply.chunk_size)):
                if index and reply.delay_s:
                    await asyncio.sleep(reply.delay_s)
                delta = {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "thinking_delta", "thinking": piece},
                }
                yield _sse(delta, "content_block_delta")
            signature = {"type": "signature_delta", "signature": "test-signature"}
            yield _sse({"type": "content_block_delta", "index": 0, "delta": signature}, "content_block_delta")
            yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
            text_index = 1
        if not reply.hold_after_chunks:
            await _held(reply)
        block = {
            "type": "content_block_start",
            "index": text_index,
            "content_block": {"type": "text", "text": ""},
        }
        yield _sse(block, "content_block_start")
        yield _sse({"type": "ping"}, "ping")
        for index, piece in enumerate(_chunks(reply.text, reply.chunk_size)):
            if reply.break_after_chunks is not None and index >= reply.break_after_chunks:
                break
            if index and index == reply.hold_after_chunks:
                await _held(reply)
            if index and reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            delta = {
                "type": "content_block_delta",
                "index": text_index,
                "delta": {"type": "text_delta", "text": piece},
            }
            yield _sse(delta, "content_block_delta")
        if reply.break_after_chunks is not None:
            if reply.error:
                error = {"type": "error", "error": {"type": "overloaded_error", "message": reply.error}}
                yield _sse(error, "error")
                return
            raise _DropConnection
        yield _sse({"type": "content_block_stop", "index": text_index}, "content_block_stop")
        for offset, call in enumerate(reply.tool_calls or [], start=text_index + 1):
            tool_block = _tool_use_block(call)
            arguments = json.dumps(tool_block.pop("input"))
            tool_block["input"] = {}
            yield _sse(
                {"type": "content_block_start", "index": offset, "content_block": tool_block},
                "content_block_start",
            )
            for piece in _chunks(arguments, reply.chunk_size):
                tool_delta = {"type": "input_json_delta", "partial_json": piece}
                yield _sse(
                    {"type": "content_block_delta", "index": offset, "delta": tool_delta},
                    "content_block_delta",
                )
            yield _sse({"type": "content_block_stop", "index": offset}, "content_block_stop")
        message_delta = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": tokens.output},
        }
        yield _sse(message_delta, "message_delta")
        yield _sse({"type": "message_stop"}, "message_stop")


def _includes_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _ndjson(data: Any) -> bytes:
    return (json.dumps(data) + "\n").encode()


def _text_error(api: str, status: int, message: str) -> JSONResponse:
    """An error response as each text-completion server words one."""
    if api == "ollama":
        return JSONResponse({"error": message}, status_code=status)
    if api == "llamacpp":
        kind = (
            "not_found_error"
            if status == 404
            else ("server_error" if status >= 500 else "invalid_request_error")
        )
        return JSONResponse({"error": {"code": status, "message": message, "type": kind}}, status_code=status)
    return _openai_error(status, message)


@dataclass
class _TextEnd:
    """What a text completion says besides its text, and how each shape writes its pieces."""

    model: str
    tokens: _Tokens
    finish: str
    stopped: str | None  # the stop string the reply ended at
    completion_id: str
    include_usage: bool

    def _openai(self, text: str, finish: str | None) -> dict[str, Any]:
        choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
        return {
            "id": self.completion_id,
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [choice],
        }

    def whole(self, shape: str, text: str) -> dict[str, Any]:
        if shape == "openai_completions":
            return {**self._openai(text, self.finish), "usage": self.tokens.openai()}
        if shape == "llamacpp":
            stop_type = "limit" if self.finish == "length" else ("word" if self.stopped else "eos")
            return {
                "content": text,
                "stop": True,
                "model": self.model,
                "stop_type": stop_type,
                "stopping_word": self.stopped or "",
                "tokens_evaluated": self.tokens.input,
                "tokens_predicted": self.tokens.output,
                "tokens_cached": self.tokens.cached,
                "timings": {
                    "cache_n": self.tokens.cached,
                    "prompt_n": self.tokens.input - self.tokens.cached,
                    "predicted_n": self.tokens.output,
                },
                "truncated": False,
            }
        return {
            "model": self.model,
            "created_at": "2025-01-01T00:00:00Z",
            "response": text,
            "done": True,
            "done_reason": self.finish,
            "total_duration": 0,
            "prompt_eval_count": self.tokens.input,
            "eval_count": self.tokens.output,
        }

    def piece(self, shape: str, text: str) -> bytes:
        if shape == "openai_completions":
            return _sse(self._openai(text, None))
        if shape == "llamacpp":
            return _sse({"content": text, "stop": False, "index": 0})
        return _ndjson(
            {"model": self.model, "created_at": "2025-01-01T00:00:00Z", "response": text, "done": False}
        )

    def closing(self, shape: str) -> list[bytes]:
        if shape == "openai_completions":
            lines = [_sse(self._openai("", self.finish))]
            if self.include_usage:
                lines.append(_sse({**self._openai("", None), "choices": [], "usage": self.tokens.openai()}))
            return [*lines, _sse("[DONE]")]
        if shape == "llamacpp":
            return [_sse(self.whole(shape, ""))]  # llama.cpp's /completion sends no [DONE]
        return [_ndjson(self.whole(shape, ""))]

    def error(self, shape: str, message: str) -> bytes:
        """An error sent inside the stream, after it started."""
        if shape == "ollama":
            return _ndjson({"error": message})
        return _sse({"error": {"code": 500, "message": message, "type": "server_error"}})


def _openai_tool_problem(messages: list[Any]) -> str | None:
    """What OpenAI refuses in tool messages: a tool result whose id no earlier assistant call has,
    or an assistant call left without its result."""
    open_ids: set[str] = set()
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in open_ids:
                return "Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls'."
            open_ids.discard(message["tool_call_id"])
        else:
            if open_ids:
                return "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'."
            if message.get("role") == "assistant":
                open_ids = {c.get("id") for c in message.get("tool_calls") or [] if isinstance(c, dict)}
    return None


def _anthropic_tool_problem(messages: list[Any], tools_declared: bool) -> str | None:
    """What Anthropic refuses: tool blocks without tools declared, and a tool_result whose tool_use is
    not in the assistant turn right before it."""
    previous_uses: set[str] = set()
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        uses = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if (uses or results) and not tools_declared:
            return "Requests which include `tool_use` or `tool_result` blocks must define tools."
        if any(r not in previous_uses for r in results):
            return "messages: `tool_result` block(s) provided when previous message does not have matching `tool_use`."
        previous_uses = uses
    return None


async def _held(reply: Reply) -> None:
    """Wait for the reply's `hold` event, if it has one (off the event loop: other requests go on)."""
    if reply.hold is not None:
        await asyncio.to_thread(reply.hold.wait, 60)


def _tool_use_block(call: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped tool call as an Anthropic tool_use block."""
    function = call.get("function") or {}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    return {
        "type": "tool_use",
        "id": call.get("id") or "toolu_test",
        "name": function.get("name") or "tool",
        "input": arguments,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the Sugo test model (echo replies) until Ctrl-C.")
    parser.add_argument("--port", type=int, default=5001)
    parser.add_argument("--api-key", default=None, help="require this key (Bearer / x-api-key)")
    parser.add_argument("--model", action="append", dest="models", help="accepted model name (repeatable)")
    parser.add_argument("--delay", type=float, default=0.03, help="seconds between streamed deltas")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = ModelServer(
        port=args.port, api_key=args.api_key, models=args.models or ["test-model"], echo_delay_s=args.delay
    )
    server.start()
    print(
        f"OpenAI-compatible: {server.base_url}\nAnthropic:         {server.anthropic_base_url}\n"
        f"llama.cpp, Ollama: {server.root_url}",
        flush=True,
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()

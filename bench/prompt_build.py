"""Prompt build time for a 5,000-message chat, and the time to first streamed token that Sugo adds
over calling the test model server directly. Prints name=value lines; never asserts on time.

Sugo and the test model server each run in their own process, as they do for a user (in one
process their threads would fight over the GIL and blur the figure). The client opens one fresh
connection per request on both paths (Connection: close, TCP_NODELAY) and stops the clock at the
first piece of model text: the test server's "Echo" delta directly, Sugo's first `token` event.

Run: .venv/bin/python bench/prompt_build.py
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlmodel import Session  # noqa: E402

from app.chats.service import get_chat, new_message  # noqa: E402
from app.db import make_engine  # noqa: E402
from app.migrate import upgrade_database  # noqa: E402
from app.prompt.service import build_chat_prompt  # noqa: E402

MESSAGES = 5000
BUILD_RUNS = 60
TTFB_RUNS = 40
LINE = ("She turned the old map toward the lamp, tracing the river with one finger while the rain "
        "kept drumming on the shutters. \"We cross at dawn,\" she said. ")  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def first_token(port: int, path: str, body: dict, marker: bytes) -> tuple[float, float]:
    """Seconds from sending the request to the first byte of the streamed body, and to the first
    piece of model text."""
    payload = json.dumps(body).encode()
    request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode() + payload  # fmt: skip
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        sock.sendall(request)
        seen = b""
        first_byte = first_text = None
        while chunk := sock.recv(65536):
            seen += chunk
            now = time.perf_counter() - start
            head, sep, body = seen.partition(b"\r\n\r\n")
            if first_byte is None and sep and body:
                first_byte = now
            if first_text is None and marker in body:
                first_text = now
        if first_byte is None or first_text is None:
            raise RuntimeError(f"no model text in the answer from {path}: {seen[:300]!r}")
        return first_byte, first_text


def fill_chat(data_dir: Path, chat_id: int, character_id: int) -> None:
    engine = make_engine(data_dir / "sugo.db")
    with Session(engine) as s:
        for i in range(MESSAGES):
            role = "user" if i % 2 else "assistant"
            msg = new_message(chat_id, role, "Rowan" if role == "user" else "Mirela", [f"{i}: " + LINE * 2])
            msg.character_id = None if role == "user" else character_id
            s.add(msg)
        s.commit()
    engine.dispose()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        model_port, sugo_port = free_port(), free_port()
        env = {**os.environ, "SUGO_DATA_DIR": str(data_dir), "SUGO_SCHEDULER": "0", "PYTHONPATH": str(ROOT)}
        model = subprocess.Popen([sys.executable, "-m", "tests.support.model_server", "--port", str(model_port),
                                  "--delay", "0"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)  # fmt: skip
        sugo = subprocess.Popen([sys.executable, "-m", "app", "--port", str(sugo_port)], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            model_url, sugo_url = f"http://127.0.0.1:{model_port}", f"http://127.0.0.1:{sugo_port}"
            wait_for(model_url + "/v1/models")
            wait_for(sugo_url + "/healthz")
            with httpx.Client(base_url=sugo_url, timeout=30) as c:
                c.post("/api/connections", json={"name": "bench", "base_url": model_url + "/v1", "model": "test-model",
                                                  "context_size": 32768, "max_tokens": 512})  # fmt: skip
                char = c.post("/api/characters", json={"name": "Mirela", "description": LINE * 10}).json()
                chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
            fill_chat(data_dir, chat["id"], char["id"])

            engine = make_engine(data_dir / "sugo.db")
            upgrade_database(engine)
            timings = []
            with Session(engine) as s:
                chat_row = get_chat(s, chat["id"])
                prompt, _ = build_chat_prompt(s, chat_row)
                for _ in range(BUILD_RUNS):
                    t = time.perf_counter()
                    build_chat_prompt(s, chat_row)
                    timings.append((time.perf_counter() - t) * 1000)
            engine.dispose()

            direct_body = {"model": "test-model", "stream": True, "messages": list(prompt.messages)}
            sugo_body = {"action": "send", "content": "hi"}
            figures: dict[str, list[float]] = {"direct_byte": [], "sugo_byte": [], "direct_text": [], "sugo_text": []}
            path = f"/api/chats/{chat['id']}/generate"
            for i in range(TTFB_RUNS + 3):  # interleaved so machine noise hits both alike; 3 warm-ups
                d_byte, d_text = first_token(model_port, "/v1/chat/completions", direct_body, b"Echo")
                s_byte, s_text = first_token(sugo_port, path, sugo_body, b"event: token")
                if i >= 3:
                    for key, value in zip(figures, (d_byte, s_byte, d_text, s_text), strict=True):
                        figures[key].append(value * 1000)
        finally:
            for proc in (sugo, model):
                proc.terminate()
                proc.wait(10)

    print(f"chat_messages={MESSAGES + 1}")
    print(f"prompt_messages_included={prompt.history_included}")
    print(f"prompt_build_ms_p50={statistics.median(timings):.2f}")
    print(f"prompt_build_ms_p90={sorted(timings)[int(len(timings) * 0.9)]:.2f}")
    med = {key: statistics.median(values) for key, values in figures.items()}
    print(f"first_byte_direct_ms_p50={med['direct_byte']:.2f}")
    print(f"first_byte_sugo_ms_p50={med['sugo_byte']:.2f}")
    print(f"first_text_direct_ms_p50={med['direct_text']:.2f}")
    print(f"first_text_sugo_ms_p50={med['sugo_text']:.2f}")
    # Time to first streamed byte added by Sugo (its first byte is the `start` event with the
    # reply's id, sent once the user's message is stored and the prompt is built).
    print(f"ttfb_overhead_ms={med['sugo_byte'] - med['direct_byte']:.2f}")
    # What a reader waits for: the first words of the reply.
    print(f"first_text_overhead_ms={med['sugo_text'] - med['direct_text']:.2f}")


if __name__ == "__main__":
    main()

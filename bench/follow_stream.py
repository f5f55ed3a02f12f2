"""A reply followed from another server (issue 26): two Sugo servers on one PostgreSQL database (tests/support/postgres.py's server from the PyPI wheel), the reply written by one
and its page's `GET /generate` answered by the other, which polls the stored version
(app/generation/following.py). Prints name=value lines, per flush interval of the writer
(SUGO_STREAM_FLUSH_S: 500 ms, the default, and 250 ms):

- follow_lag_ms_p50_flush<ms> / follow_lag_ms_p95_flush<ms>: for each text event the follower got,
  how long before it the writer's own page (its stream, read here) had the oldest text it brings:
  at most the flush interval plus the follower's poll (FOLLOW_POLL_S, 300 ms) plus the reads.
Both servers run in this process (tests/support/live.py's LiveSugo, as tests/integration/
test_two_servers.py does: `python -m app` does not serve from PostgreSQL yet), so they share one GIL
with the model server and the readers: the figures are upper bounds.

- local_stream_ms_flush<ms>: the writer's own stream, first token to its last event (median of the
  replies), beside `model_stream_ms`, what the test model takes to send the reply: what storing the
  growing reply more often costs the writer's own stream shows as the difference.

Run: .venv/bin/python bench/follow_stream.py [--replies 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.live import LiveSugo  # noqa: E402
from tests.support.model_server import ModelServer, Reply  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402

CHUNKS, CHUNK, DELAY_S = 300, 4, 0.01
TEXT = ("word " * (CHUNKS * CHUNK // 5 + 1))[: CHUNKS * CHUNK]


def _events(response: httpx.Response):
    """(arrival time, event, data) for each server-sent event of a streamed response."""
    event, data = "message", ""
    for line in response.iter_lines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif not line and data:
            yield time.monotonic(), event, json.loads(data)
            event, data = "message", ""


def _grown(stream, points: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """Append (time, text length so far) at each token event, as it arrives; (time, -1) at the end."""
    length = 0
    for at, event, data in stream:
        if event == "token":
            length += len(data["text"])
            points.append((at, length))
        elif event in ("done", "stopped", "error"):
            points.append((at, -1))
    return points


def one_reply(writer: str, reader: str, chat_id: int, models: ModelServer) -> tuple[list[float], float]:
    models.script(Reply(text=TEXT, chunk_size=CHUNK, delay_s=DELAY_S))
    written: list[tuple[float, int]] = []

    def write() -> None:
        with (
            httpx.Client(base_url=writer, timeout=60) as c,
            c.stream("POST", f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Go"}) as r,
        ):
            _grown(_events(r), written)

    thread = threading.Thread(target=write)
    thread.start()
    with httpx.Client(base_url=reader, timeout=60) as c:
        while not written:  # the reply has begun on the writer
            time.sleep(0.01)
        with c.stream("GET", f"/api/chats/{chat_id}/generate") as r:
            followed = _grown(_events(r), []) if r.status_code == 200 else []
    thread.join()
    text_points = [(at, n) for at, n in written if n >= 0]
    lags, before = [], 0
    for at, n in followed:
        if n < 0:
            continue
        # The oldest text this update brought: the writer's page had it this long before.
        first = next(t for t, m in text_points if m > before)
        lags.append((at - first) * 1000)
        before = n
    local = (written[-1][0] - written[0][0]) * 1000
    return lags, local


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replies", type=int, default=3)
    args = parser.parse_args()
    print(f"model_stream_ms={CHUNKS * DELAY_S * 1000:.0f}")
    with PostgresServer() as pg, ModelServer() as models:
        for flush_ms in (500, 250):
            url = pg.url(pg.create_database(template=pg.migrated_template()))
            data = Path(tempfile.mkdtemp()) / "data"
            live = {"database_url": url, "flush_interval_s": flush_ms / 1000, "start_scheduler": False}
            with (
                LiveSugo(data, server_name="writer", **live) as writing_server,
                LiveSugo(data, server_name="reader", **live) as reading_server,
            ):
                writer, reader = writing_server.url, reading_server.url
                with httpx.Client(base_url=writer, timeout=60) as c:
                    c.post(
                        "/api/connections",
                        json={
                            "name": "Bench",
                            "kind": "openai",
                            "base_url": models.base_url,
                            "model": "test-model",
                        },
                    ).raise_for_status()
                    char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hi."}).json()
                    chat_id = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()["id"]
                lags: list[float] = []
                locals_: list[float] = []
                for _ in range(args.replies):
                    got, local = one_reply(writer, reader, chat_id, models)
                    lags += got
                    locals_.append(local)
                q = statistics.quantiles(lags, n=20)
                print(f"follow_lag_ms_p50_flush{flush_ms}={statistics.median(lags):.0f}")
                print(f"follow_lag_ms_p95_flush{flush_ms}={q[18]:.0f}")
                print(f"local_stream_ms_flush{flush_ms}={statistics.median(locals_):.0f}")


if __name__ == "__main__":
    main()

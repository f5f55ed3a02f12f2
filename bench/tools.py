"""Tools' costs (issue 24, acceptance 5), on a real Sugo in its own process (bench/sugo_process.py)
against the test model server over 127.0.0.1.

Prints:
- dtm_declared_tokens_plain: the tokens of the tool declarations a plain message ("How was your
  day?") sends with Deliberate Tool Mode on, the default (target 0);
- dtm_declared_tokens_all / dtm_declared_tools_all: what the same turn declares with the mode off and
  every permission on (every built-in tool);
- tool_loop_overhead_ms: what Sugo adds per tool round, besides the model and the tool: a reply with
  ROUNDS rounds of a cheap built-in tool (review_capabilities) against the same reply without them,
  each timed from the request to the stream's end (the user's path: POST /generate), minus the model
  server's own time for each extra request (the recorded requests replayed to it directly) and minus
  the tools' own time (each call's `ms`), divided by the rounds. Medians of REPEATS alternating runs.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.sugo_process import running_sugo  # noqa: E402
from tests.support.model_server import ModelServer, Reply  # noqa: E402

ROUNDS = 3
REPEATS = 15
PLAIN = "How was your day?"


def _sse_end(client: httpx.Client, chat_id: int, content: str) -> float:
    started = time.perf_counter()
    with client.stream(
        "POST", f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content}
    ) as r:
        r.raise_for_status()
        for _ in r.iter_bytes():
            pass
    return (time.perf_counter() - started) * 1000


def _call(i: int) -> dict:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "review_capabilities", "arguments": "{}"},
    }


def _model_ms(direct: httpx.Client, models: ModelServer, body: dict) -> float:
    """The model server's own time for one request, asked directly over a kept-alive connection (as
    Sugo's pooled client asks it), streamed to its end."""
    started = time.perf_counter()
    with direct.stream("POST", models.base_url + "/chat/completions", json=body) as r:
        for _ in r.iter_bytes():
            pass
    return (time.perf_counter() - started) * 1000


def main() -> None:
    with (
        ModelServer() as models,
        running_sugo() as url,
        httpx.Client(base_url=url, timeout=60) as c,
        httpx.Client(timeout=30) as direct,
    ):
        c.post(
            "/api/connections",
            json={"name": "Bench", "base_url": models.base_url, "model": "test-model", "max_tokens": 100},
        ).raise_for_status()
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        chat_id = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()["id"]

        models.script(Reply(text="A fine day."))
        _sse_end(c, chat_id, PLAIN)
        plain = c.get(f"/api/chats/{chat_id}/prompt").json()
        print(f"dtm_declared_tokens_plain={plain['tool_tokens']}")

        everything = {key: True for key in c.get("/api/settings/tools").json()["permissions"]}
        c.post(
            "/api/settings/tools", json={"deliberate": False, "permissions": everything}
        ).raise_for_status()
        declared = c.get(f"/api/chats/{chat_id}/prompt").json()
        print(f"dtm_declared_tokens_all={declared['tool_tokens']}")
        print(f"dtm_declared_tools_all={len(declared['tools'])}")

        with_tools, without, model_extra, tool_ms = [], [], [], []
        for _ in range(REPEATS):
            models.reset()
            models.script(Reply(text="Fine."))
            without.append(_sse_end(c, chat_id, PLAIN))
            models.reset()
            models.script(
                *[Reply(text="", tool_calls=[_call(i)]) for i in range(ROUNDS)], Reply(text="Fine.")
            )
            with_tools.append(_sse_end(c, chat_id, PLAIN))
            bodies = [r.json for r in models.requests]
            calls = c.get(f"/api/chats/{chat_id}/messages").json()[-1]["swipes"][-1]["tool_calls"]
            tool_ms.append(sum(call["ms"] for call in calls))
            models.reset()
            models.script(*[Reply(text="") for _ in bodies[1:]])
            model_extra.append(
                sum(_model_ms(direct, models, {**body, "stream": True}) for body in bodies[1:])
            )
        extra = statistics.median(with_tools) - statistics.median(without)
        per_round = (extra - statistics.median(model_extra) - statistics.median(tool_ms)) / ROUNDS
        print(f"reply_ms_p50_plain={statistics.median(without):.1f}")
        print(f"reply_ms_p50_{ROUNDS}_tool_rounds={statistics.median(with_tools):.1f}")
        print(f"model_ms_p50_extra_requests={statistics.median(model_extra):.1f}")
        print(f"tool_ms_p50={statistics.median(tool_ms):.1f}")
        print(f"tool_loop_overhead_ms={per_round:.1f}")


if __name__ == "__main__":
    main()

"""Advanced Memory Recall (issue 14), as far as it is built: Prepare existing history on a 2,000-message
Roleplay chat while the chat page is used. A real Sugo process (scheduler on) on a fresh data folder;
the test model server (tests/support/model_server.py) plays the helper model, answering every scene
check with a scene end every 50 messages and every recap with a short JSON recap, after a delay
like a small local model's (HELPER_DELAY_S). Prints name=value lines; never asserts on time.

- adv_chat_page_ms_p50_idle / _p95_idle: the chat page (GET /chats/{id}, the HTML a user opens) before
  Prepare starts, once Memory Recall has built the imported chat's memories.
- adv_chat_page_ms_p50_during_prepare / _p95_during_prepare: the same page while Prepare runs
  (the issue's target: answered within 200 ms while Prepare runs).
- adv_page_ratio_p50: during / idle, the figure to compare across runs on a noisy machine.
- adv_prepare_s: from starting Prepare to every scene recapped; adv_scenes: scenes found;
  adv_helper_requests: requests the helper received (each scene check window and each recap).

Not yet here (they need the prompt part of issue 14): adv_prompt_ratio_5000, adv_max_prompt_tokens,
adv_retrieval_ms_p50.

Run: .venv/bin/python bench/advanced_memory.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.sugo_process import running_sugo  # noqa: E402
from tests.support.model_server import ModelServer, Reply  # noqa: E402

MESSAGES = 2_000
SCENE_EVERY = 50
HELPER_DELAY_S = 0.05
CHARACTER, USER = "Aria", "Rowan"
LIMIT_S = 900  # only a hung run stops the bench


def chat_file() -> bytes:
    """A SillyTavern .jsonl: a header, then MESSAGES lines alternating between the user and Aria."""
    header = {"user_name": USER, "character_name": CHARACTER, "create_date": "2025-01-01T10:00:00.000Z",
              "chat_metadata": {}}  # fmt: skip
    lines = [header]
    for i in range(MESSAGES):
        user = i % 2 == 1
        text = (f"Day {i // 40 + 1}. We follow the river past the mill and the old bridge; "
                f"the {['rain', 'wind', 'sun', 'fog'][i % 4]} keeps us company, step {i}.")  # fmt: skip
        lines.append({"name": USER if user else CHARACTER, "is_user": user, "send_date": "2025-01-01T10:00:00.000Z",
                      "mes": text})  # fmt: skip
    return "\n".join(json.dumps(line) for line in lines).encode()


def helper_reply() -> Reply:
    """One answer that serves both requests: the scene check reads `ends` (numbers outside its window
    are dropped), the recap reads `summary` and `participants`."""
    body = {"ends": list(range(SCENE_EVERY, MESSAGES + 1, SCENE_EVERY)),
            "summary": "Aria and Rowan followed the river past the mill and rested by the old bridge.",
            "participants": [CHARACTER], "timeframe": ""}  # fmt: skip
    return Reply(text=json.dumps(body), first_delay_s=HELPER_DELAY_S)


def page_times(client: httpx.Client, chat_id: int, count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        client.get(f"/chats/{chat_id}").raise_for_status()
        times.append((time.perf_counter() - start) * 1000)
        time.sleep(0.05)
    return times


def p95(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.95)]


def main() -> None:
    with ModelServer() as models, running_sugo() as url, httpx.Client(base_url=url, timeout=60) as client:
        conn = client.post("/api/connections", json={"name": "Helper", "kind": "openai", "base_url": models.base_url,
                                                     "model": "test-model", "context_size": 32768}).json()  # fmt: skip
        character = client.post("/api/characters", json={"name": CHARACTER, "first_mes": "Hello."}).json()
        r = client.post("/api/chats/import", files={"file": ("long.jsonl", chat_file())},
                        data={"character_id": str(character["id"])})  # fmt: skip
        r.raise_for_status()
        chat_id = r.json()["id"]
        client.put(f"/api/chats/{chat_id}/options", json={"connection_id": conn["id"],
                                                          "settings": {"advanced_memory": True}}).raise_for_status()  # fmt: skip
        models.script(*(helper_reply() for _ in range(2 * MESSAGES)))
        # The import starts Memory Recall's embedding of the whole chat: let it finish first, so "idle"
        # is the page alone and "during" is the page beside Prepare alone.
        while client.get(f"/api/chats/{chat_id}/memories/status").json()["building"] is not None:
            time.sleep(0.5)
        idle = page_times(client, chat_id, 20)
        start = time.perf_counter()
        client.post(f"/api/chats/{chat_id}/scenes/prepare").raise_for_status()
        during: list[float] = []
        while time.perf_counter() - start < LIMIT_S:
            status = client.get(f"/api/chats/{chat_id}/scenes/prepare").json()
            if status["status"] != "running":
                break
            during += page_times(client, chat_id, 5)
        prepare_s = time.perf_counter() - start
        scenes = client.get(f"/api/chats/{chat_id}/scenes").json()
        helper_requests = sum(1 for req in models.requests if req.path.endswith("/chat/completions"))
    p50_idle, p50_during = statistics.median(idle), statistics.median(during or [0.0])
    print(f"adv_messages={MESSAGES}")
    print(f"adv_prepare_status={status['status']}")
    print(f"adv_prepare_s={prepare_s:.1f}")
    print(f"adv_scenes={len(scenes['scenes'] if isinstance(scenes, dict) else scenes)}")
    print(f"adv_helper_requests={helper_requests}")
    print(f"adv_chat_page_ms_p50_idle={p50_idle:.1f}")
    print(f"adv_chat_page_ms_p95_idle={p95(idle):.1f}")
    print(f"adv_chat_page_ms_p50_during_prepare={p50_during:.1f}")
    print(f"adv_chat_page_ms_p95_during_prepare={p95(during) if during else 0.0:.1f}")
    print(f"adv_page_samples_during_prepare={len(during)}")
    print(f"adv_page_ratio_p50={p50_during / max(p50_idle, 1e-9):.2f}")


if __name__ == "__main__":
    main()

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

Then the prompt, on a 5,000-message Roleplay chat (PROMPT_MESSAGES, ~70 tokens each, 350,000 in all)
prepared the same way (a scene every 50 messages), Advanced Memory on with its defaults (ceiling 65,000,
budget 6,500), Memory Recall's memories built, SillyTavern's Eldoria World Info book attached and firing
(checked), the scheduler running, and TURNS real replies through /generate (the test model server
answering):
- adv_max_prompt_tokens: the largest request the model received (Sugo's own estimator, the one the
  ceiling uses); adv_mean_prompt_tokens: their mean.
- adv_whole_history_tokens: what the same turn sends without Advanced Memory when the whole history
  goes up to the context limit (the connection's context, CONTEXT_SIZE = 1,000,000, minus the reply
  reserve: a Gemini-class model, where the whole history fits).
- adv_prompt_ratio_5000: mean tokens per turn with Advanced Memory / without (target < 0.2);
  adv_prompt_ratio_5000_vs_128k: the same against a 128k-context model's whole-history-that-fits.
- adv_retrieval_ms_p50: Peek Prompt with Advanced Memory on minus Peek Prompt with it off (standard
  recall off too: the chat's plain 80-message window), p50 of paired runs: the added latency of the
  window plan, the scene ranking and the blocks before generation (target < 100 ms).

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

from app.prompt.core.tokens import count_message_tokens  # noqa: E402
from bench.sugo_process import running_sugo  # noqa: E402
from tests.support.model_server import ModelServer, Reply  # noqa: E402

MESSAGES = 2_000
SCENE_EVERY = 50
HELPER_DELAY_S = 0.05
CHARACTER, USER = "Aria", "Rowan"
LIMIT_S = 900  # only a hung run stops the bench
ELDORIA = ROOT.parent / "shared" / "fixtures" / "sillytavern" / "Eldoria.json"
PROMPT_MESSAGES = 5_000
TURNS = 20
CONTEXT_SIZE = 1_000_000
WORDS = (
    "lantern harbour orchard ferry mapmaker festival storm library canal falcon mine wedding caravan "
    "river mill bridge market tower forest meadow chapel island cellar garden stable bakery"
).split()


def chat_file(count: int = MESSAGES, long: bool = False) -> bytes:
    """A SillyTavern .jsonl: a header, then `count` lines alternating between the user and Aria
    (`long`: ~70 tokens each, naming a place that changes every scene)."""
    header = {
        "user_name": USER,
        "character_name": CHARACTER,
        "create_date": "2025-01-01T10:00:00.000Z",
        "chat_metadata": {},
    }
    lines = [header]
    for i in range(count):
        user = i % 2 == 1
        text = (
            f"Day {i // 40 + 1}. We follow the river past the mill and the old bridge; "
            f"the {['rain', 'wind', 'sun', 'fog'][i % 4]} keeps us company, step {i}."
        )
        if long:
            place = WORDS[(i // SCENE_EVERY) % len(WORDS)]
            text += (
                f" Near the {place} we talk about what we saw there, the people we met on the road, "
                f"the weather turning, the supper we shared and the plans for tomorrow at the {place}."
            )
        lines.append(
            {
                "name": USER if user else CHARACTER,
                "is_user": user,
                "send_date": "2025-01-01T10:00:00.000Z",
                "mes": text,
            }
        )
    return "\n".join(json.dumps(line) for line in lines).encode()


CONTINUITY_ANSWER = (
    "Aria and Rowan followed the river for days, past the mill and the old bridge, talking about "
    "the people they met, the weather and their plans, and kept heading east together."
)


def helper_reply(count: int = MESSAGES) -> Reply:
    """One answer that serves both requests: the scene check reads `ends` (numbers outside its window
    are dropped), the recap reads `summary` and `participants`."""
    body = {
        "ends": list(range(SCENE_EVERY, count + 1, SCENE_EVERY)),
        "summary": "Aria and Rowan followed the river past the mill and rested by the old bridge.",
        "participants": [CHARACTER],
        "timeframe": "",
    }
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
    page_figures()
    prompt_figures()


def page_figures() -> None:
    with ModelServer() as models, running_sugo() as url, httpx.Client(base_url=url, timeout=60) as client:
        conn = client.post(
            "/api/connections",
            json={
                "name": "Helper",
                "kind": "openai",
                "base_url": models.base_url,
                "model": "test-model",
                "context_size": 32768,
            },
        ).json()
        character = client.post("/api/characters", json={"name": CHARACTER, "first_mes": "Hello."}).json()
        r = client.post(
            "/api/chats/import",
            files={"file": ("long.jsonl", chat_file())},
            data={"character_id": str(character["id"])},
        )
        r.raise_for_status()
        chat_id = r.json()["id"]
        client.put(
            f"/api/chats/{chat_id}/options",
            json={"connection_id": conn["id"], "settings": {"advanced_memory": True}},
        ).raise_for_status()
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


def prepared_chat(client: httpx.Client, models: ModelServer, count: int) -> int:
    """A long chat imported, its memories built and its history prepared (scenes recapped)."""
    conn = client.post(
        "/api/connections",
        json={
            "name": "Model",
            "kind": "openai",
            "base_url": models.base_url,
            "model": "test-model",
            "context_size": CONTEXT_SIZE,
            "max_tokens": 512,
        },
    ).json()
    character = client.post("/api/characters", json={"name": CHARACTER, "first_mes": "Hello."}).json()
    r = client.post(
        "/api/chats/import",
        files={"file": ("long.jsonl", chat_file(count, long=True))},
        data={"character_id": str(character["id"])},
    )
    r.raise_for_status()
    chat_id = r.json()["id"]
    client.put(
        f"/api/chats/{chat_id}/options",
        json={"connection_id": conn["id"], "settings": {"advanced_memory": True}},
    ).raise_for_status()
    # SillyTavern's Eldoria World Info book attached, as a user's roleplay has lore (the questions name the forest).
    book = client.post("/api/lorebooks/import", files={"file": (ELDORIA.name, ELDORIA.read_bytes())})
    book.raise_for_status()
    client.put(f"/api/chats/{chat_id}/lorebooks", json={"book_ids": [book.json()["id"]]}).raise_for_status()
    models.script(*(helper_reply(count) for _ in range(2 * count)))
    wait_until(lambda: client.get(f"/api/chats/{chat_id}/memories/status").json()["building"] is None)
    client.post(f"/api/chats/{chat_id}/scenes/prepare").raise_for_status()
    wait_until(lambda: client.get(f"/api/chats/{chat_id}/scenes/prepare").json()["status"] != "running")
    models.reset()
    return chat_id


def wait_until(done) -> None:
    deadline = time.perf_counter() + LIMIT_S
    while not done():
        if time.perf_counter() > deadline:
            raise RuntimeError("the bench's chat did not get ready in time")
        time.sleep(0.5)


def whole_history(messages: list[dict], context: int, reserve: int) -> int:
    """Tokens of the newest messages that fit in `context` minus the reply reserve (the whole history when
    it all fits), as a front end without Advanced Memory sends them."""
    room, used = context - reserve, 0
    for m in reversed(messages):
        tokens = count_message_tokens(m["content"])
        if used + tokens > room:
            break
        used += tokens
    return used


def peek_ms(client: httpx.Client, chat_id: int) -> float:
    start = time.perf_counter()
    client.get(f"/api/chats/{chat_id}/prompt").raise_for_status()
    return (time.perf_counter() - start) * 1000


def prompt_figures() -> None:
    with ModelServer() as models, running_sugo() as url, httpx.Client(base_url=url, timeout=300) as client:
        chat_id = prepared_chat(client, models, PROMPT_MESSAGES)
        scenes = client.get(f"/api/chats/{chat_id}/scenes").json()
        # The scene check is not due during the turns: the helper is not scripted for them.
        # (The options API replaces the settings: Advanced Memory stays on with its defaults.)
        client.put(
            f"/api/chats/{chat_id}/options",
            json={"settings": {"advanced_memory": True, "adv_check_interval": 100}},
        ).raise_for_status()
        sent, whole, whole_128k = [], [], []
        for turn in range(TURNS):
            place = WORDS[turn % len(WORDS)]
            question = (
                f"Do you remember what we planned near the {place}, and who we met on the road there, "
                "before the forest?"
            )
            history = client.get(f"/api/chats/{chat_id}/messages").json()
            history.append({"content": question})
            # The reply, then the two continuity summaries the after-reply work asks the helper for (the
            # archived messages no entry covers yet), each a short recap as a helper writes.
            models.script(f"Turn {turn}: we walk on and talk.", CONTINUITY_ANSWER, CONTINUITY_ANSWER)
            r = client.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": question})
            r.raise_for_status()
            request = next(q for q in reversed(list(models.requests)) if q.json and q.json.get("stream"))
            request = request.json["messages"]
            settle = time.perf_counter() + 20
            while models.pending_replies and time.perf_counter() < settle:
                time.sleep(0.05)
            models.reset()
            if "Eldoria is here" not in json.dumps(request):
                raise RuntimeError("the lorebook entry did not fire: the figures would not be a user's path")
            sent.append(sum(count_message_tokens(m["content"]) for m in request))
            system = sum(count_message_tokens(m["content"]) for m in request if m["role"] == "system")
            whole.append(system + whole_history(history, CONTEXT_SIZE - system, 512))
            whole_128k.append(system + whole_history(history, 131_072 - system, 512))
        on, off = [], []
        for _ in range(15):
            on.append(peek_ms(client, chat_id))
        client.put(
            f"/api/chats/{chat_id}/options",
            json={"settings": {"advanced_memory": False, "memory_recall": False}},
        ).raise_for_status()
        for _ in range(15):
            off.append(peek_ms(client, chat_id))
    mean_sent, mean_whole = statistics.mean(sent), statistics.mean(whole)
    print(f"adv_prompt_messages={PROMPT_MESSAGES}")
    print(f"adv_prompt_scenes={len(scenes['scenes'] if isinstance(scenes, dict) else scenes)}")
    print(f"adv_max_prompt_tokens={max(sent)}")
    print(f"adv_mean_prompt_tokens={mean_sent:.0f}")
    print(f"adv_whole_history_tokens={mean_whole:.0f}")
    print(f"adv_prompt_ratio_5000={mean_sent / mean_whole:.3f}")
    print(f"adv_prompt_ratio_5000_vs_128k={mean_sent / statistics.mean(whole_128k):.3f}")
    print(f"adv_peek_ms_p50_on={statistics.median(on):.1f}")
    print(f"adv_peek_ms_p50_off={statistics.median(off):.1f}")
    print(f"adv_retrieval_ms_p50={statistics.median(on) - statistics.median(off):.1f}")


if __name__ == "__main__":
    main()

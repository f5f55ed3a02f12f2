"""Server memory over a long session (issue 21, item 20): a real Sugo process (scheduler on) on a fresh data
folder, the test model server (tests/support/model_server.py) as the chat's model, one Roleplay chat with
Automatic Summaries on (every 5 user messages, Review off) and 200 replies sent as the page sends them
(POST /api/chats/{id}/generate, the reply streamed to its end), the chat page opened every 10 replies. Every
message is new text, so no cache finds what it saw before. The built-in embedding model is loaded before the
first figure (a memory search), as it is on any Sugo that has built a memory. Prints name=value lines;
never asserts.

- rss_mb_start: the Sugo process's resident memory (VmRSS) once the built-in model is loaded and one reply
  has been written (every code path of a reply has run once).
- rss_mb_after_<n>_replies: the same after n replies (sampled every 50), the background work caught up (the
  automatic summaries written, the memories embedded); the issue's target for 200: under 750.
- rss_growth_ratio: after 200 / start.
- rss_mb_peak: the most the process held at any moment (VmHWM), a batch of memories being embedded.
- summary_entries, memories: what the background work made (checks that it ran).

Run: .venv/bin/python bench/memory_use.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.sugo_process import sugo_process  # noqa: E402
from tests.support.model_server import ModelServer  # noqa: E402

REPLIES = 200
SAMPLE_EVERY = 50
SUMMARY_EVERY = 5
PAGE_EVERY = 10
LIMIT_S = 600  # only a hung run stops the bench
WORDS = (
    "lantern harbour orchard ferry mapmaker festival storm library canal falcon mine wedding caravan river "
    "mill bridge market tower forest meadow chapel island cellar garden stable bakery smith archive "
    "lighthouse quarry vineyard monastery"
).split()


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for the Sugo process")


def message(turn: int) -> str:
    """~90 words of new text: names, places and numbers that change every turn, as a story's turns do."""
    place, other = WORDS[turn % len(WORDS)], WORDS[(turn * 7 + 3) % len(WORDS)]
    return (
        f"Turn {turn}. Rowan walks from the {place} to the {other} with {turn % 13 + 2} coins and a letter "
        f"sealed in {['red', 'green', 'blue', 'black'][turn % 4]} wax for Captain Ilse{turn}. On the way he "
        f"meets a {other} keeper called Bram{turn * 31 % 997} who asks about the storm of year {1200 + turn}, "
        f"the missing falcon, and whether the {place} still keeps its old bell. Rowan answers carefully, "
        f"counts the steps ({turn * 17}), and writes the keeper's words in his journal before dusk falls."
    )


def reply(client: httpx.Client, chat_id: int, content: str) -> None:
    """One reply as the page asks for it, read to its last event."""
    with client.stream("POST", f"/api/chats/{chat_id}/generate", json={"content": content}) as r:
        r.raise_for_status()
        last = ""
        for line in r.iter_lines():
            if line.startswith("event:"):
                last = line.split(":", 1)[1].strip()
    if last != "done":
        raise RuntimeError(f"reply ended with {last!r}")


def settled(client: httpx.Client, chat_id: int) -> None:
    """Wait for the background work of the replies so far: the automatic summaries (fewer than
    SUMMARY_EVERY user messages after the newest entry) and the memories (none being built)."""
    deadline = time.monotonic() + LIMIT_S
    while True:
        entries = client.get(f"/api/chats/{chat_id}/summaries").json()
        reached = max((e["last_message_id"] for e in entries), default=0)
        messages = client.get(f"/api/chats/{chat_id}/messages").json()
        unsummarised = sum(1 for m in messages if m["role"] == "user" and m["id"] > reached)
        building = client.get(f"/api/chats/{chat_id}/memories/status").json()["building"]
        if unsummarised < SUMMARY_EVERY and building is None:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the background work did not catch up: {unsummarised} user messages without a "
                f"summary, memories building: {building}"
            )
        time.sleep(0.2)


def main() -> None:
    with (
        ModelServer() as models,
        sugo_process(SUGO_DISCOVERY_PORTS="none=1") as (url, process),
        httpx.Client(base_url=url, timeout=120) as client,
    ):
        conn = client.post(
            "/api/connections",
            json={
                "name": "Model",
                "kind": "openai",
                "base_url": models.base_url,
                "model": "test-model",
                "context_size": 32768,
            },
        ).json()
        character = client.post(
            "/api/characters", json={"name": "Aria", "first_mes": "Hello, traveller."}
        ).json()
        chat = client.post("/api/chats", json={"character_ids": [character["id"]], "mode": "roleplay"}).json()
        chat_id = chat["id"]
        client.put(
            f"/api/chats/{chat_id}/options",
            json={
                "connection_id": conn["id"],
                "settings": {"summary_auto": True, "summary_every": SUMMARY_EVERY},
            },
        ).raise_for_status()
        # The built-in model, loaded as on any Sugo that has memories: a search embeds its query.
        client.get(f"/api/chats/{chat_id}/memories/search", params={"q": "the falcon"}).raise_for_status()
        reply(client, chat_id, message(0))
        client.get(f"/chats/{chat_id}").raise_for_status()
        settled(client, chat_id)
        start = rss_mb(process.pid)
        print(f"rss_mb_start={start:.0f}", flush=True)
        after = start
        for turn in range(1, REPLIES + 1):
            reply(client, chat_id, message(turn))
            if turn % PAGE_EVERY == 0:
                client.get(f"/chats/{chat_id}").raise_for_status()
            if turn % SAMPLE_EVERY == 0:
                settled(client, chat_id)
                after = rss_mb(process.pid)
                print(f"rss_mb_after_{turn}_replies={after:.0f}", flush=True)
        peak = rss_mb(process.pid, "VmHWM")
        entries = client.get(f"/api/chats/{chat_id}/summaries").json()
        memories = client.get(f"/api/chats/{chat_id}/memories").json()
    print(f"rss_growth_ratio={after / start:.3f}")
    print(f"rss_mb_peak={peak:.0f}")
    print(f"summary_entries={len(entries)}")
    print(f"memories={len(memories)}")
    print(f"model_requests={len(models.requests)}")


if __name__ == "__main__":
    main()

"""How well Memory Recall finds the messages that answer a question, on the long-chat dev set
(`../shared/eval/long-chat-dev/`, or --data): two SillyTavern chats of several hundred messages over
months, and 302 questions with the messages that answer them. Prints name=value lines.

As a user has it: Sugo runs in its own process with its scheduler on (SUGO_SCHEDULER=1). Each chat
is imported through `POST /api/chats/import` (the `.jsonl` import, its header asking for the
recent-message limit 20 in Sugo's own `chat_metadata` key, as a file exported from Sugo carries
it); the real memory job chunks and embeds it with the chat's built-in model; every question is
asked through `GET /api/chats/{id}/memories/search?q=…&k=10`, the same ranking the prompt's recall
uses, and each result's `message_ids` are mapped back to 0-based message positions.

- recall_hit_at_k: share of questions with an answering message in one of the first k results.
- recall_mrr_at_10: mean of 1/rank of the first such result (0 beyond 10).
- recall_ready_s: seconds from sending the import to every memory of the chat being embedded and
  searchable, per chat (the longest printed): the import schedules the memory job itself, and
  nothing else asks for it.
- The same per category (`recall_hit_at_5_temporal=` …).
- Questions whose every answering message is in no memory (the pinned first message, which the model
  reads anyway, and the last few messages that wait for a fifth) are counted apart: `live_questions=`
  and their own `live_recall_*` figures; the figures above leave them out. Since issue 21 the window's
  messages are memories too (the search API ranks them all; the prompt's recall leaves them out).

Run: .venv/bin/python bench/recall_quality.py  [--model multilingual-e5-small] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.sugo_process import running_sugo  # noqa: E402

DATA = ROOT.parent / "shared" / "eval" / "long-chat-dev"  # ../shared beside the checkout
RECENT_LIMIT = 20
K = 10
CUTS = (1, 5, 10)
READY_TIMEOUT_S = 600


def with_settings(raw: str, model: str | None) -> bytes:
    """The chat file with Sugo's settings for it in the header: the recent-message limit (and a
    built-in model other than the default, when asked)."""
    lines = raw.splitlines()
    header = json.loads(lines[0])
    sugo = {"version": 1, "recent_message_limit": RECENT_LIMIT}
    if model:
        sugo["recall"] = {"embedding_model": model}
    header["chat_metadata"] = {**header.get("chat_metadata", {}), "sugo": sugo}
    return ("\n".join([json.dumps(header), *lines[1:]]) + "\n").encode()


def import_chat(client: httpx.Client, name: str, body: bytes) -> tuple[int, list[int], float]:
    """Import a chat and wait until its memories are built: (chat id, message ids in order, seconds).
    Its character is made first, as a user would import the card (not timed)."""
    character = json.loads(body.split(b"\n", 1)[0])["character_name"]
    r = client.post("/api/characters", json={"name": character})
    r.raise_for_status()
    start = time.perf_counter()
    r = client.post(
        "/api/chats/import",
        files={"file": (name, body, "application/octet-stream")},
        data={"character_id": str(r.json()["id"])},
    )
    if r.status_code != 201:
        raise RuntimeError(f"importing {name}: {r.status_code} {r.text}")
    chat_id = r.json()["id"]
    messages = [m for m in client.get(f"/api/chats/{chat_id}/messages").json() if m["kind"] == "message"]
    while time.perf_counter() - start < READY_TIMEOUT_S:
        status = client.get(f"/api/chats/{chat_id}/memories/status").json()
        if (
            status["count"]
            and not status["statuses"]["waiting"]
            and status["statuses"]["vectorized"] == status["count"]
        ):
            return chat_id, [m["id"] for m in messages], time.perf_counter() - start
        time.sleep(0.1)
    raise RuntimeError(f"the memories of {name} were not built in {READY_TIMEOUT_S} s: {status}")


def first_hit(results: list[dict], position: dict[int, int], evidence: set[int]) -> int | None:
    """1-based rank of the first result holding an answering message, or None."""
    for rank, r in enumerate(results, 1):
        if evidence & {position[i] for i in r["message_ids"] if i in position}:
            return rank
    return None


def figures(ranks: list[int | None]) -> dict[str, float]:
    n = max(1, len(ranks))
    out = {f"hit_at_{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in CUTS}
    out["mrr_at_10"] = sum(1 / r for r in ranks if r is not None and r <= K) / n
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the dev set's folder")
    parser.add_argument("--model", help="a built-in embedding model other than the default")
    args = parser.parse_args()
    questions = json.loads((args.data / "questions.json").read_text())
    with running_sugo() as url, httpx.Client(base_url=url, timeout=120) as client:
        ranks, live_ranks, ready, model = _measure(client, args, questions)
    print(f"embedding_model={model}")
    print(f"recent_message_limit={RECENT_LIMIT}")
    print(f"questions={sum(len(v) for v in ranks.values())}")
    for key, value in figures([r for v in ranks.values() for r in v]).items():
        print(f"recall_{key}={value:.3f}")
    for name, seconds in ready.items():
        print(f"recall_ready_s_{name}={seconds:.1f}")
    print(f"recall_ready_s={max(ready.values()):.1f}")
    for category in sorted(ranks):
        print(f"questions_{category}={len(ranks[category])}")
        for key, value in figures(ranks[category]).items():
            print(f"recall_{key}_{category}={value:.3f}")
    print(f"live_questions={len(live_ranks)}")
    if live_ranks:
        for key, value in figures(live_ranks).items():
            print(f"live_recall_{key}={value:.3f}")


def _measure(client: httpx.Client, args, questions: list[dict]):
    ranks: dict[str, list[int | None]] = defaultdict(list)
    live_ranks: list[int | None] = []
    ready: dict[str, float] = {}
    model = ""
    for name in sorted({q["chat"] for q in questions}):
        body = with_settings((args.data / name).read_text(), args.model)
        chat_id, message_ids, ready[Path(name).stem] = import_chat(client, name, body)
        position = {mid: i for i, mid in enumerate(message_ids)}
        remembered = {
            position[i]
            for c in client.get(f"/api/chats/{chat_id}/memories").json()
            for i in c["message_ids"]
            if i in position
        }
        model = client.get(f"/api/chats/{chat_id}/memories/status").json()["source"]["model"]
        for q in (q for q in questions if q["chat"] == name):
            r = client.get(f"/api/chats/{chat_id}/memories/search", params={"q": q["question"], "k": K})
            r.raise_for_status()
            rank = first_hit(r.json()["results"], position, set(q["evidence"]))
            if set(q["evidence"]) & remembered:
                ranks[q["category"]].append(rank)
            else:
                live_ranks.append(rank)
    return ranks, live_ranks, ready, model


if __name__ == "__main__":
    main()

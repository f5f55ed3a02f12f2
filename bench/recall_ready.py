"""How soon a long imported chat can be searched: a 600-message SillyTavern chat imported through
the JSON API of a real Sugo process (its scheduler on, the default built-in embedding model), then
the memory search API asked every half second until it finds a known fact by its vectors and every
memory has its vectors. No message is sent and nothing restarts. Prints name=value lines; never
asserts on time.

The chat: the dev set's conv-26 (419 messages, /work/shared/eval/long-chat-dev/) followed by the
first 181 messages of conv-30 with the speakers renamed to conv-26's, dates moved on a year, so
600 messages of real talk. The fact: "When did Caroline go to the LGBTQ support group?" (conv-26's
third message).

- recall_first_hit_s: from sending the import to the first search that finds the fact by its
  vectors (its oldest memories are embedded first).
- recall_ready_s: from sending the import until every memory has its vectors (the status API's
  `building` is None) and the fact is found: the whole chat searchable.
- recall_import_s: the import request alone.
- recall_memories: how many memories the chat got.
- recall_embed_per_s: memories embedded per second after the import answered.

Sugo has just started: loading the embedding model counts, as for a user who starts Sugo to
import a chat.

Run: .venv/bin/python bench/recall_ready.py [--dev-set DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.sugo_process import running_sugo  # noqa: E402

DEV_SET = Path("/work/shared/eval/long-chat-dev")
MESSAGES = 600
QUESTION = "When did Caroline go to the LGBTQ support group?"
FACT = "LGBTQ support group"
LIMIT_S = 600  # only a hung job stops the bench


def long_chat(dev_set: Path) -> bytes:
    """conv-26, then conv-30's first messages as the same two speakers a year on: MESSAGES lines."""
    first = [
        json.loads(line) for line in (dev_set / "conv-26.jsonl").read_text().splitlines() if line.strip()
    ]
    second = [
        json.loads(line) for line in (dev_set / "conv-30.jsonl").read_text().splitlines() if line.strip()
    ]
    header, messages = first[0], first[1:]
    names = {True: header["user_name"], False: header["character_name"]}
    for msg in second[1 : 1 + MESSAGES - len(messages)]:
        when = datetime.fromisoformat(msg["send_date"]) + timedelta(days=365)
        messages.append({**msg, "name": names[msg["is_user"]], "send_date": when.isoformat()})
    return "\n".join(json.dumps(line) for line in [header, *messages]).encode()


def finds(client: httpx.Client, chat_id: int) -> bool:
    r = client.get(f"/api/chats/{chat_id}/memories/search", params={"q": QUESTION, "k": 10})
    r.raise_for_status()
    return any(FACT in h["content"] and h["similarity"] is not None for h in r.json()["results"])


def measure(client: httpx.Client, raw: bytes, character: str) -> dict[str, float]:
    client.post("/api/characters", json={"name": character, "first_mes": "Hi!"}).raise_for_status()
    start = time.monotonic()
    r = client.post("/api/chats/import", files={"file": ("long.jsonl", raw)})
    r.raise_for_status()
    imported = time.monotonic()
    chat_id = r.json()["id"]
    first_hit = None
    while time.monotonic() - start < LIMIT_S:
        if first_hit is None and finds(client, chat_id):
            first_hit = time.monotonic()
        status = client.get(f"/api/chats/{chat_id}/memories/status").json()
        if first_hit is not None and status["count"] and status["building"] is None:
            ready = time.monotonic()
            break
        time.sleep(0.5)
    else:
        raise RuntimeError(f"the chat was not searchable after {LIMIT_S} s")
    return {
        "recall_first_hit_s": round(first_hit - start, 1),
        "recall_ready_s": round(ready - start, 1),
        "recall_import_s": round(imported - start, 1),
        "recall_memories": status["count"],
        "recall_embed_per_s": round(status["count"] / max(ready - imported, 1e-9), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev-set", type=Path, default=DEV_SET)
    args = parser.parse_args()
    raw = long_chat(args.dev_set)
    character = json.loads(raw.split(b"\n", 1)[0])["character_name"]
    with running_sugo() as url, httpx.Client(base_url=url, timeout=120) as client:
        figures = measure(client, raw, character)
    print(f"recall_messages={MESSAGES}")
    for name, value in figures.items():
        print(f"{name}={value}")


if __name__ == "__main__":
    main()

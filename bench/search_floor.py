"""How similar unrelated text scores with a built-in embedding model, against real chat messages:
the ground for each model's `search_floor` (the memory viewer's search shows a memory without a
shared word only at or above it). Prints name=value lines; never asserts.

Messages: the two long conversations of /work/shared/eval/long-chat-dev (LoCoMo conv-26, conv-30),
each message embedded as Memory Recall embeds it (embedding_windows). Unrelated queries: 200
seeded random letter strings plus five hand-written ones ("zzzqqq nothing", "lorem ipsum dolor"...),
and 20 questions on subjects the chats never touch (engines, tax, reactors...). For each query
and chat, the best similarity over all messages. For contrast, the similarity of each dev question
to its best evidence message: the floor should sit above everything unrelated scored while a fair
share of real questions still clears it on meaning alone (the rest usually share a word).

Measured (all-MiniLM-L6-v2): unrelated best similarity p99 0.32, max 0.36; off-topic max 0.23;
evidence p50 0.50 and 76% >= 0.40. Floor: 0.40. multilingual-e5-small (conv-26 only, 60 random
strings, 80 questions, --model e5): unrelated p50 0.80, max 0.84; evidence p50 0.84. Floor: 0.85.

Run: .venv/bin/python bench/search_floor.py [--model minilm|e5] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.memory.recall.core.chunking import MessageText, embedding_windows  # noqa: E402
from app.memory.recall.embedders import E5Small, MiniLM  # noqa: E402
from app.memory.recall.service import WINDOW_WORDS  # noqa: E402

CHATS = ("conv-26.jsonl", "conv-30.jsonl")
HAND_WRITTEN = ("zzzqqq nothing", "zzzqqq", "qwerty asdf", "xkcd 1234", "lorem ipsum dolor")
OFF_TOPIC = (
    "torque specification for cylinder head bolts",
    "compile the kernel module with gcc",
    "eigenvalues of a symmetric matrix",
    "corporate tax return deadline",
    "photosynthesis in chloroplasts",
    "medieval siege catapult",
    "SQL index fragmentation",
    "gearbox oil viscosity",
    "quantum chromodynamics lattice",
    "mortgage amortization schedule",
    "volcanic basalt formation",
    "TCP retransmission timeout",
    "orbital mechanics of a satellite",
    "sodium hydroxide titration",
    "router firmware upgrade",
    "the derivative of arctangent",
    "bitcoin mining difficulty",
    "nuclear reactor control rods",
    "parliamentary procedure for a quorum",
    "byzantine fault tolerance",
)
FLOORS = (0.30, 0.35, 0.40, 0.45, 0.80, 0.85)


def random_query(rng: random.Random) -> str:
    letters = "bcdfghjklmnpqrstvwxzaeiou"
    return " ".join(
        "".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(rng.randint(1, 3))
    )


def load(path: Path):
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()][1:]
    return [MessageText(i, m["name"], m["mes"], datetime.now(UTC)) for i, m in enumerate(lines)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=("minilm", "e5"), default="minilm")
    parser.add_argument("--data", type=Path, default=Path("/work/shared/eval/long-chat-dev"))
    args = parser.parse_args()
    embedder = MiniLM() if args.model == "minilm" else E5Small()
    # E5 embeds about six long messages a second here: one chat and fewer queries keep it to minutes.
    chats = CHATS if args.model == "minilm" else CHATS[:1]
    rng = random.Random(7)
    randoms = [random_query(rng) for _ in range(200 if args.model == "minilm" else 60)]
    vectors = {}
    for name in chats:
        windows, owners = [], []
        for msg in load(args.data / name):
            own = embedding_windows([msg], max_words=min(embedder.max_words, WINDOW_WORDS))
            windows += own
            owners += [msg.id] * len(own)
        vectors[name] = (np.array(embedder.embed_passages(windows)), owners)

    def best_by_message(query: str, chat: str) -> dict[int, float]:
        matrix, owners = vectors[chat]
        best: dict[int, float] = {}
        for owner, sim in zip(owners, matrix @ np.array(embedder.embed_query(query)), strict=True):
            best[owner] = max(best.get(owner, -1.0), float(sim))
        return best

    def line(name: str, values: list[float]) -> None:
        for p in (50, 95, 99, 100):
            print(f"{args.model}_{name}_p{p}={np.percentile(values, p):.3f}")

    line(
        "unrelated_best",
        [max(best_by_message(q, c).values()) for q in [*randoms, *HAND_WRITTEN] for c in chats],
    )
    line("offtopic_best", [max(best_by_message(q, c).values()) for q in OFF_TOPIC for c in chats])
    questions = [q for q in json.loads((args.data / "questions.json").read_text()) if q["chat"] in chats]
    if args.model == "e5":
        questions = questions[:80]
    evidence = []
    for q in questions:
        best = best_by_message(q["question"], q["chat"])
        evidence.append(max(best[i] for i in q["evidence"] if i in best))
    line("evidence_best", evidence)
    for floor in FLOORS:
        print(f"{args.model}_evidence_share_at_{floor:.2f}={np.mean(np.array(evidence) >= floor):.3f}")


if __name__ == "__main__":
    main()

"""Memory Recall figures. Prints name=value lines; never asserts on time.

- embed_throughput_ratio: windows per second of the built-in all-MiniLM-L6-v2 through Sugo's
  background job (chunking, batching, storing vectors and their sign bits) divided by windows per
  second of calling sentence-transformers directly on the same texts (batch 32). Target >= 0.9.
- recall_ms_p50_1k / _10k / _100k: one recall for the prompt (the query embedded by the real
  model, the sign-bit pass, exact rescoring, FTS5 BM25, neighbours, fusion, budget) in chats of
  1,000, 10,000 and 100,000 chunks. Target: p50 under 60 ms at 100k. The stored vectors are random
  unit vectors (embedding 500,000 windows for real would take hours and change nothing in the
  timing); the chunk texts are generated from a vocabulary with names and rare words. The first
  query of each size loads the chat's sign bits and is printed apart as recall_ms_cold_*.

Run: .venv/bin/python bench/recall.py  [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlmodel import Session, select  # noqa: E402

from app.chats.models import Chat, Message  # noqa: E402
from app.chats.service import new_message  # noqa: E402
from app.main import build_services  # noqa: E402
from app.memory.recall.core.chunking import MessageText, embedding_windows  # noqa: E402
from app.memory.recall.core.lexical import index_text  # noqa: E402
from app.memory.recall.embedders import MiniLM  # noqa: E402
from app.memory.recall.jobs import embed_chat  # noqa: E402
from app.memory.recall.models import MemoryChunk  # noqa: E402
from app.memory.recall.service import WINDOW_WORDS, recall_for_prompt  # noqa: E402
from app.memory.recall.vectors import sign_code  # noqa: E402
from app.platform.settings import Settings  # noqa: E402
from app.prompt.core.tokens import count_tokens  # noqa: E402

COMMON = (
    "the road river lamp rain shutters map dawn tower key clock gear harbour boat sail wind dune caravan "
    "salt price weather market bread fish kitchen inn room stairs night war eye keeper lighthouse forest "
    "wolf snow fire sword shield letter king queen guard gate bridge song bard coin ring mirror said went "
    "looked turned smiled walked back again still long door hand face voice light dark cold"
).split()
SYLLABLES = (
    "ka ri mo ve lan tor essa quil bran od uya mar el wen thes cor yse har dor fen gal ion ush".split()
)


class Text:
    """Chat-like text: a few hundred common words and a long Zipf tail of rarer ones and names, so
    word frequencies look like a real chat's (a query's rare words are rare here too)."""

    def __init__(self, rng: random.Random, rare_words: int = 4000, names: int = 200) -> None:
        self.rng = rng
        coined: dict[str, None] = {}
        while len(coined) < rare_words + names:
            coined["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
        made = list(coined)
        self.words = COMMON + made[:rare_words]
        self.weights = [1 / (rank + 1) ** 1.1 for rank in range(len(self.words))]
        self.names = [w.capitalize() for w in made[rare_words:]]

    def sentence(self, words: int) -> str:
        out = self.rng.choices(self.words, self.weights, k=words)
        for i in range(len(out)):
            if self.rng.random() < 0.04:
                out[i] = self.rng.choice(self.names)
        return " ".join(out).capitalize() + "."

    def query(self) -> str:
        rare = self.rng.choice(self.words[300:1500])
        return self.rng.choice(
            [
                f"Where did {self.rng.choice(self.names)} hide the {rare}?",
                f"What did {self.rng.choice(self.names)} say about the {rare} at the {self.rng.choice(COMMON)}?",
                f"Do you remember the {rare} near {self.rng.choice(self.names)}?",
                f"Tell me again about the {self.rng.choice(COMMON)} and the {rare}.",
            ]
        )


def fresh_services(folder: Path):
    """The app's services over an empty data folder, as Sugo builds them (no scheduler)."""
    return build_services(Settings(data_dir=folder, start_scheduler=False))


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


# --- embedding throughput ---------------------------------------------------------------------


def throughput(folder: Path, text: Text, messages: int = 400, rounds: int = 3) -> None:
    services = fresh_services(folder)
    engine = services.engine
    with Session(engine) as s:
        chat = Chat(name="throughput", mode="conversation")
        s.add(chat)
        s.commit()
        chat_id = chat.id
        for i in range(messages):
            user = i % 2 == 0
            s.add(
                new_message(
                    chat_id,
                    "user" if user else "assistant",
                    "Rowan" if user else "Aria",
                    [text.sentence(text.rng.randint(30, 140))],
                )
            )
        s.commit()
        rows = s.exec(
            select(Message.id, Message.name, Message.content, Message.created_at)
            .where(Message.chat_id == chat_id)
            .order_by(Message.id)
        ).all()
    model = MiniLM._load()
    minilm = MiniLM()
    embed_chat(services, chat_id)  # warm-up: first run compiles and allocates
    with Session(engine) as s:
        chunks = list(s.exec(select(MemoryChunk).where(MemoryChunk.chat_id == chat_id)))
        by_id = {r[0]: MessageText(*r) for r in rows}
        texts = [
            w
            for c in chunks
            for w in embedding_windows(
                [by_id[i] for i in c.message_ids], max_words=min(minilm.max_words, WINDOW_WORDS)
            )
        ]
    job_s, direct_s = [], []
    for _ in range(rounds):
        with Session(engine) as s:
            for chunk in s.exec(select(MemoryChunk).where(MemoryChunk.chat_id == chat_id)):
                s.delete(chunk)
            s.commit()
        t0 = time.perf_counter()
        added, _, embedded = embed_chat(services, chat_id)
        job_s.append(time.perf_counter() - t0)
        assert added == embedded == len(chunks)
        t0 = time.perf_counter()
        model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
        direct_s.append(time.perf_counter() - t0)
    job, direct = statistics.median(job_s), statistics.median(direct_s)
    print(f"embed_windows={len(texts)}")
    print(f"embed_chunks={len(chunks)}")
    print(f"embed_job_windows_per_s={len(texts) / job:.1f}")
    print(f"embed_direct_windows_per_s={len(texts) / direct:.1f}")
    print(f"embed_throughput_ratio={direct / job:.3f}")
    services.close()


# --- recall latency ---------------------------------------------------------------------------


def fill_chunks(
    engine, chat_id: int, count: int, text: Text, windows_per_chunk: int = 5, source: str | None = None
) -> int:
    """Raw inserts of `count` chunks with their vectors (random unit vectors) and words; `source`
    marks them imported from another chat (Memory Recall → Import), which the memory job leaves
    alone. Returns the number of windows."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    rng = text.rng
    np_rng = np.random.default_rng(rng.randint(0, 2**31))
    vector_rows = 0
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        for base in range(0, count, 2000):
            n = min(2000, count - base)
            chunk_rows = []
            for i in range(base, base + n):
                blocks = [f"{rng.choice(text.names)}: {text.sentence(rng.randint(20, 60))}" for _ in range(5)]
                at = (start + timedelta(minutes=7 * i)).strftime(
                    "%Y-%m-%d %H:%M:%S.%f"
                )  # as SQLAlchemy stores it
                chunk_rows.append(
                    (
                        chat_id,
                        "\n\n".join(blocks),
                        "[]",
                        "",
                        5,
                        at,
                        at,
                        at,
                        "vectorized",
                        "builtin:all-MiniLM-L6-v2:384",
                        source,
                    )
                )
            cur.executemany(
                "INSERT INTO memory_chunk (chat_id, content, message_ids, fingerprint, message_count, first_message_at,"
                " last_message_at, created_at, status, embedding_space_id, source_chat_id)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                chunk_rows,
            )
            first_id = cur.execute("SELECT max(id) FROM memory_chunk").fetchone()[0] - n + 1
            cur.executemany(
                "INSERT INTO fts_memory_chunk (rowid, body) VALUES (?, ?)",
                [(first_id + k, index_text(row[1], chat_id)) for k, row in enumerate(chunk_rows)],
            )
            vectors = np_rng.standard_normal((n * windows_per_chunk, 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            cur.executemany(
                "INSERT INTO memory_vector (chat_id, chunk_id, space_id, window, embedding, code) VALUES (?,?,?,?,?,?)",
                (
                    (
                        chat_id,
                        first_id + j // windows_per_chunk,
                        "builtin:all-MiniLM-L6-v2:384",
                        j % windows_per_chunk,
                        vectors[j].tobytes(),
                        sign_code(vectors[j]),
                    )
                    for j in range(len(vectors))
                ),
            )
            vector_rows += len(vectors)
        raw.commit()
    finally:
        raw.close()
    return vector_rows


def recall_latency(folder: Path, sizes: list[int], text: Text, runs: int = 30) -> None:
    services = fresh_services(folder)
    engine = services.engine
    embedder = MiniLM()
    embedder.embed_query("warm up")
    for size in sizes:
        with Session(engine) as s:
            chat = Chat(name=f"recall {size}", mode="conversation")
            s.add(chat)
            s.commit()
            chat_id = chat.id
        t0 = time.perf_counter()
        windows = fill_chunks(engine, chat_id, size, text)
        queries = [text.query() for _ in range(runs)]
        fill_s = time.perf_counter() - t0
        label = f"{size // 1000}k"

        def once(query: str, chat_id: int = chat_id) -> float:
            with Session(engine) as s:
                t = time.perf_counter()
                result = recall_for_prompt(
                    s,
                    chat_id,
                    query,
                    context_size=16384,
                    window_start_id=None,
                    count=count_tokens,
                    embedder=embedder,
                    bits=services.recall.index,
                    threads=services.recall.queries,
                )
                elapsed = time.perf_counter() - t
            assert result.note.startswith("Memory Recall"), result.note
            return elapsed

        cold = once(queries[0])
        times = [once(q) for q in queries]
        embed_only = []
        for i in range(runs):
            t = time.perf_counter()
            embedder.embed_query(queries[i])
            embed_only.append(time.perf_counter() - t)
        print(f"recall_windows_{label}={windows}")
        print(f"recall_fill_s_{label}={fill_s:.1f}")
        print(f"recall_ms_cold_{label}={cold * 1000:.1f}")
        print(f"recall_query_embed_ms_p50_{label}={median_ms(embed_only):.1f}")
        print(f"recall_ms_p90_{label}={sorted(times)[int(len(times) * 0.9)] * 1000:.1f}")
        print(f"recall_ms_p50_{label}={median_ms(times):.1f}")
    services.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    text = Text(random.Random(7))
    folder = Path(tempfile.mkdtemp(prefix="sugo-bench-recall-"))
    try:
        if not args.skip_throughput:
            throughput(folder / "throughput", text)
        recall_latency(folder / "recall", [int(s) for s in args.sizes.split(",")], text)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Memory Recall's ranking on SQLite and on PostgreSQL, compared on the long-chat dev set
(`../shared/eval/long-chat-dev/`, or --data). Prints name=value lines.

The dev set's two chats are imported and embedded ONCE, by a real Sugo on SQLite (its own process,
its memory job and built-in model, as bench/recall_quality.py does); the SQLite database is then
copied into a fresh PostgreSQL (tests/support/postgres.py's server from the PyPI wheel) by the
copy command's own code (app/platform/copy_to_postgres.py), and recall's fill
(index.fill_postgres_index, which the memory sweep runs at start) writes the word index and the
HNSW indexes, so both databases hold the same chunks and vectors, bit for bit. Every question is
then asked of both in this process through service.search (the search API's ranking, k=10), the
query embedded once (one QueryVectors cache for both).

- recall_top10_same_share: share of questions whose top 10 chunk ids are identical, in order.
- recall_top10_overlap_mean: mean share of the top 10 found in both (order ignored).
- recall_top1_same_share: share whose first result is the same.
- sqlite_recall_hit_at_10 / postgres_recall_hit_at_10: share of questions with an answering message
  in the first 10 (questions whose every answering message is in no memory left out, as
  recall_quality.py counts them).
- word_pass_same_share: share of questions whose word pass (BM25 over the same rare words) gives
  the same chunks in the same order with scores within 1e-9 relative.
- The same again prefixed `exact_first_pass_`, with both first passes scoring every window of the
  chat (NEAREST_WINDOWS raised past the chats' sizes): SQLite's first pass keeps the 256 windows
  nearest by sign bits (an approximation), PostgreSQL's the 256 nearest by cosine (exact on chats
  this small, HNSW on large ones), so a chat of more windows than that may give them different
  candidates; with both exact, what still differs is the arithmetic of the two cosine functions.
- Each question whose top 10 differ is listed (`# differs: …`).

Run: .venv/bin/python bench/recall_postgres.py [--data DIR] [--model multilingual-e5-small]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import text  # noqa: E402
from sqlmodel import Session  # noqa: E402

from app.memory.recall import index, service  # noqa: E402
from app.memory.recall.core.lexical import candidate_terms, chat_weights, query_terms  # noqa: E402
from app.memory.recall.embedders import E5Small, MiniLM, QueryVectors  # noqa: E402
from app.memory.recall.index import SignIndex  # noqa: E402
from app.models import metadata  # noqa: E402
from app.platform.copy_to_postgres import copy_to_postgres  # noqa: E402
from app.platform.db import make_engine  # noqa: E402
from bench.recall_quality import DATA, K, import_chat, with_settings  # noqa: E402
from bench.sugo_process import running_sugo  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402


def _embed_on_sqlite(data_dir: Path, args, questions) -> dict[str, tuple[int, list[int], set[int]]]:
    """Import and embed each chat in a real Sugo on SQLite; per chat file: (chat id, message ids in
    order, positions of the messages some memory holds)."""
    chats = {}
    with running_sugo(SUGO_DATA_DIR=str(data_dir)) as url, httpx.Client(base_url=url, timeout=120) as client:
        for name in sorted({q["chat"] for q in questions}):
            body = with_settings((args.data / name).read_text(), args.model)
            chat_id, message_ids, seconds = import_chat(client, name, body)
            print(f"embedded_s_{Path(name).stem}={seconds:.1f}")
            position = {mid: i for i, mid in enumerate(message_ids)}
            remembered = {
                position[i]
                for c in client.get(f"/api/chats/{chat_id}/memories").json()
                for i in c["message_ids"]
                if i in position
            }
            chats[name] = (chat_id, message_ids, remembered)
    return chats


def _word_pass(engine, chat_id: int, query: str) -> dict[int, float]:
    """The word pass's scores, as service._word_pass computes them."""
    with Session(engine) as s:
        freq = index.doc_freq(s, query_terms(query, chat_id))
        searched = {t: freq[t] for t in candidate_terms(freq)}
        if not searched:
            return {}
        weights = chat_weights(
            searched, chat_chunks=index.chat_chunk_count(s, chat_id), all_chunks=index.chunk_count(s)
        )
        return index.lexical_candidates(s, weights, limit=service.LEXICAL_DEPTH, doc_freq=searched)


def _same_words(a: dict[int, float], b: dict[int, float]) -> bool:
    return list(a) == list(b) and all(abs(a[c] - b[c]) <= 1e-9 * max(abs(a[c]), 1e-300) for c in a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the dev set's folder")
    parser.add_argument("--model", help="a built-in embedding model other than the default")
    args = parser.parse_args()
    questions = json.loads((args.data / "questions.json").read_text())
    with tempfile.TemporaryDirectory() as tmp, PostgresServer() as server:
        data_dir = Path(tmp) / "data"
        chats = _embed_on_sqlite(data_dir, args, questions)
        sqlite = make_engine(data_dir / "sugo.db")
        postgres_url = server.url(server.create_database())
        copy_to_postgres(sqlite, postgres_url, metadata)
        postgres = make_engine(postgres_url)
        with postgres.begin() as conn:
            index.fill_postgres_index(conn, spaces=True)
            for name, (chat_id, _, _) in chats.items():
                windows = conn.execute(
                    text("SELECT count(*) FROM memory_embedding WHERE chat_id = :c"), {"c": chat_id}
                ).scalar()
                print(f"windows_{Path(name).stem}={windows}")
        embedder = E5Small() if args.model == "multilingual-e5-small" else MiniLM()
        vectors = QueryVectors(size=4096)
        engines = {"sqlite": sqlite, "postgres": postgres}
        default = _compare(engines, chats, questions, embedder, vectors)
        # Both first passes made exact (every window scored, as for a chat smaller than the cut): what
        # differs then is not which windows each first pass found.
        service.NEAREST_WINDOWS = 1_000_000
        exact = _compare(engines, chats, questions, embedder, vectors)
        sqlite.dispose()
        postgres.dispose()
    print(f"embedding_model={embedder.space.model}")
    print(f"questions={len(questions)}")
    _report("", default)
    _report("exact_first_pass_", exact)


def _compare(engines, chats, questions, embedder, vectors) -> dict:
    sqlite, postgres = engines["sqlite"], engines["postgres"]
    bits = SignIndex()
    top: dict[str, list[list[int]]] = {name: [] for name in engines}
    ranks: dict[str, list[int | None]] = {name: [] for name in engines}
    words_same = 0
    with ThreadPoolExecutor(2) as threads:
        for q in questions:
            chat_id, message_ids, remembered = chats[q["chat"]]
            position = {mid: i for i, mid in enumerate(message_ids)}
            evidence = set(q["evidence"])
            for name, engine in engines.items():
                with Session(engine) as s:
                    hits, _ = service.search(
                        s, chat_id, q["question"], embedder, bits=bits, threads=threads, vectors=vectors, k=K
                    )
                top[name].append([h.chunk.id for h in hits])
                rank = next(
                    (
                        r
                        for r, h in enumerate(hits, 1)
                        if evidence & {position.get(i) for i in h.chunk.message_ids}
                    ),
                    None,
                )
                if evidence & remembered:
                    ranks[name].append(rank)
            words_same += _same_words(
                _word_pass(sqlite, chat_id, q["question"]), _word_pass(postgres, chat_id, q["question"])
            )
    return {"questions": questions, "top": top, "ranks": ranks, "words_same": words_same}


def _report(prefix: str, found: dict) -> None:
    questions, top, ranks = found["questions"], found["top"], found["ranks"]
    n = len(questions)
    pairs = list(zip(top["sqlite"], top["postgres"], strict=True))
    same = sum(a == b for a, b in pairs)
    overlap = [len(set(a) & set(b)) / max(1, len(a), len(b)) for a, b in pairs]
    print(f"{prefix}recall_top10_same_share={same / n:.3f}")
    print(f"{prefix}recall_top10_overlap_mean={sum(overlap) / n:.3f}")
    print(f"{prefix}recall_top1_same_share={sum(a[:1] == b[:1] for a, b in pairs) / n:.3f}")
    print(f"{prefix}word_pass_same_share={found['words_same'] / n:.3f}")
    for name, scored in ranks.items():
        hit = sum(1 for r in scored if r is not None and r <= K) / max(1, len(scored))
        print(f"{prefix}{name}_recall_hit_at_10={hit:.3f}")
    differing = [(q["question"], a, b) for q, (a, b) in zip(questions, pairs, strict=True) if a != b]
    print(f"{prefix}top10_differing={len(differing)}")
    for question, a, b in differing:
        print(
            f"# {prefix}differs: {question!r}: only on one side {sorted(set(a) ^ set(b))}; sqlite {a} postgres {b}"
        )


if __name__ == "__main__":
    main()

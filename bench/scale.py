"""Sugo past one machine (issue 26): Memory Recall at 100,000 memories on PostgreSQL + pgvector and on
SQLite, measured in the same run the same way, and two Sugo servers sharing one PostgreSQL under a
locust load. Prints name=value lines; never asserts on time.

Recall (`--only recall`). One chat of `--memories` memories (five windows each) is written into a
SQLite data folder by bench/recall.py's fill (raw bulk inserts: the chunks, their FTS5 words as the
app writes them, their vectors and sign bits; the stored vectors are random unit vectors, the texts
chat-like words with names and rare words), then copied into a fresh PostgreSQL (tests/support/
postgres.py's server from the PyPI wheel) by the copy command's own code
(app/platform/copy_to_postgres.py: its trigger turns each blob into a pgvector `vector`), and
recall's fill (index.fill_postgres_index, which the memory sweep runs at start) writes the word
index and builds the HNSW index, as bench/recall_postgres.py does: both databases hold the same
chunks and vectors, bit for bit. Each database is then asked the same RUNS questions, new ones
each (so each query is embedded inside the time, by the built-in all-MiniLM-L6-v2, as a reply's new
message is), through the calls a reply's recall source makes (service.start_recall, then
finish_recall: the word pass and the vector pass on the app's two recall threads, neighbours,
fusion, the budget), on the app's own services (build_services) over each database; before the
timed ones, WARM_UP other questions untimed, as a server that has been answering has the pages its
searches read in memory. PostgreSQL is measured twice: as it comes (shared_buffers 128 MB), then
restarted with PG_SERVE_MEMORY, as the README advises for a database of this size.
- sqlite_recall_ms_p50_<n>k / _p95_, pg_recall_ms_p50_<n>k / _p95_ (target: pg p50 under 60 ms; with
  PG_SERVE_MEMORY), pg_default_memory_recall_ms_p50_<n>k / _p95_ (the default shared_buffers).
  <n>k is --memories in thousands (100k by default).
- pg_mb_<n>k_hnsw, _embedding_with_indexes, _words_with_indexes: what the searches read, in MB.
- *_recall_ms_cold_<n>k: the first query, apart (SQLite loads the chat's sign bits then).
- sqlite_fill_s_<n>k (SQLite's inserts); pg_copy_s_<n>k (the copy command) and pg_index_s_<n>k (the
  word rows and the HNSW index, with maintenance_work_mem raised to PG_BUILD_MEMORY for the build:
  PostgreSQL's 64 MB default makes it build on disk, ten times slower); recall_windows_<n>k.
- pg_recall_part_ms_p50_<n>k_<part>: where PostgreSQL's time goes, each part timed where the search
  calls it: embed (the query through the model), first_pass (index.nearest_postgres: HNSW),
  rescore (vectors.similarities_by_chunk: exact cosine of the candidates' neighbours), doc_freq and
  word_pass (index.doc_freq, index.lexical_candidates: BM25), neighbours
  (index.chronological_neighbours), rows (index.chunk_rows and the current-text check). The two passes
  run on two threads at once, so the parts add up to more than the whole.
- recall_embed_ms_p50: the model alone on the same questions.

Load (`--only load`). One PostgreSQL database (migrated), shared by two Sugo servers: two real
processes on two loopback ports, one data folder (the key that seals API keys is shared, as it must
be). Each is started by bench/scale_server.py (the app `python -m app` serves: create_app over the
SUGO_* settings, served by uvicorn, access logs off), scheduler on. The model is the test model
server (tests/support/model_server.py: echo replies) on loopback. One chat per user (a character,
SEED_MESSAGES messages written straight into the database), then bench/scale_load.py runs locust
headless in a process of its own (`--users` users for `--seconds`, once each server has written a reply and loaded
the built-in embedding model, as a server that has been answering has; see its doc: each user reads its
chat page three times, then sends a message and reads its whole streamed reply, in turn, 1 to 3 s
apart, each request through either server; a connection idle for 4 s is not reused, as uvicorn
closes it at 5 s).
- two_server_p95_ms: the chat pages' p95 (target under 200 ms); two_server_p50_ms likewise.
- two_server_send_p95_ms / _p50_ms: a message sent and its reply streamed to its end.
- two_server_requests, two_server_failures (target 0; a page that does not show the last message
  sent counts as one), two_server_page_requests, two_server_send_requests, two_server_rps (over the run, its
  last requests' ends included).
- Where the cores go. Before the load, one request at a time on the quiet servers:
  two_server_quiet_page_cpu_ms and _quiet_send_cpu_ms, the CPU (both servers and PostgreSQL) a chat page
  and a message send cost, a send's with the background work it starts (Memory Recall embedding its
  memory, scene checks) waited for to its end. two_server_cpu_demand_cores: what the users' pacing asks
  of the machine were every answer instant (users / the 2 s mean wait, three pages to a send); at or past
  two_server_machine_cores the requests queue for the CPU and the times grow with the queue. During the
  load: two_server_machine_busy_pct (every core), two_server_cores_used_servers / _postgres / _locust /
  _model_server (the test model server is this process's thread).
- The load runs twice (`--load-embeddings both`, the default): with Memory Recall embedding each reply's
  memory with the built-in model on the servers' own cores (two_server_*), and with the embeddings
  asked of the model server's /v1/embeddings (two_server_endpoint_*: every figure above again), as a
  deployment with an embedding endpoint (a GPU machine, a provider) has it.

Run: .venv/bin/python bench/scale.py [--memories 100000] [--users 100] [--seconds 60] [--only recall|load]
     [--load-embeddings both|builtin|endpoint]
A quick check (a minute or two): bench/scale.py --memories 2000 --users 5 --seconds 5
The full run takes about half an hour on two cores, most of it filling and indexing 500,000 windows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import wraps
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import text  # noqa: E402
from sqlmodel import Session  # noqa: E402

from app.chats.models import Chat  # noqa: E402
from app.chats.service import new_message  # noqa: E402
from app.main import build_services  # noqa: E402
from app.memory.recall import index, service  # noqa: E402
from app.memory.recall.embedders import MiniLM, QueryVectors  # noqa: E402
from app.models import metadata  # noqa: E402
from app.platform.copy_to_postgres import copy_to_postgres  # noqa: E402
from app.platform.db import make_engine  # noqa: E402
from app.platform.migrate import upgrade_database  # noqa: E402
from app.platform.settings import Settings  # noqa: E402
from app.prompt.core.tokens import count_tokens  # noqa: E402
from bench.figures import percentile  # noqa: E402
from bench.recall import Text, fill_chunks  # noqa: E402
from bench.sugo_process import free_port, wait_for  # noqa: E402
from tests.support.model_server import ModelServer  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402

RUNS = 40
# Questions asked of each database, untimed, after the cold one and before the timed ones: a server that
# has served chats for a while holds the pages its searches touch in memory.
WARM_UP = 20
CONTEXT_SIZE = 16_384
PG_BUILD_MEMORY = "2GB"
# shared_buffers for the second PostgreSQL measure, as the README advises a server holding 100,000
# memories: enough for the HNSW index, the vectors and the word rows the searches read (their sizes are
# printed). PostgreSQL's default is 128 MB.
PG_SERVE_MEMORY = "3GB"
SEED_MESSAGES = 20
CHARACTER, USER = "Aria", "Rowan"


def label(memories: int) -> str:
    return f"{memories // 1000}k" if memories >= 1000 else str(memories)


def show(name: str, value: float | int | str) -> None:
    print(f"{name}={value:.1f}" if isinstance(value, float) else f"{name}={value}", flush=True)


# --- recall at scale ------------------------------------------------------------------------------


class PartTimes:
    """Wall time spent in named functions of recall's modules, per part, while installed: each is
    wrapped where the search looks it up (a module attribute), and put back afterwards."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()
        self._undo: list[tuple[object, str, Callable]] = []

    def wrap(self, module: object, attribute: str, part: str) -> None:
        original = getattr(module, attribute)

        @wraps(original)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                with self._lock:
                    self.spent[part] += time.perf_counter() - start

        setattr(module, attribute, timed)
        self._undo.append((module, attribute, original))

    def take(self) -> dict[str, float]:
        with self._lock:
            taken, self.spent = dict(self.spent), defaultdict(float)
        return taken

    def restore(self) -> None:
        for module, attribute, original in reversed(self._undo):
            setattr(module, attribute, original)
        self._undo.clear()


def recall_parts() -> PartTimes:
    parts = PartTimes()
    parts.wrap(service, "_embed", "embed")
    parts.wrap(index, "nearest_postgres", "first_pass")
    parts.wrap(service, "similarities_by_chunk", "rescore")
    parts.wrap(index, "doc_freq", "doc_freq")
    parts.wrap(index, "lexical_candidates", "word_pass")
    parts.wrap(index, "chronological_neighbours", "neighbours")
    parts.wrap(index, "chunk_rows", "rows")
    parts.wrap(service, "current_rows", "rows")
    return parts


def one_recall(services, chat_id: int, query: str, embedder, vectors: QueryVectors) -> float:
    """A reply's recall, as RecallSource.begin and contribute run it; seconds."""
    with Session(services.engine) as session:
        start = time.perf_counter()
        pending = service.start_recall(
            session.get_bind(),
            chat_id,
            query,
            embedder,
            bits=services.recall.index,
            threads=services.recall.queries,
            vectors=vectors,
            window_start_id=None,
        )
        result = service.finish_recall(
            session, pending, context_size=CONTEXT_SIZE, window_start_id=None, count=count_tokens
        )
        elapsed = time.perf_counter() - start
    # Words alone would be a different measure: the model must have ranked.
    assert "similarity" in result.note or "nothing recalled" in result.note, result.note
    assert "text matching" not in result.note, result.note
    return elapsed


def measure_recall(
    name: str, services, chat_id: int, queries: list[str], warm_up: list[str], embedder, n: str
) -> None:
    vectors = QueryVectors(size=4096)  # its own: every query is new to it, so embedded in the time
    cold = one_recall(services, chat_id, "What did we find under the old bridge at dawn?", embedder, vectors)
    for query in warm_up:
        one_recall(services, chat_id, query, embedder, vectors)
    parts = recall_parts() if name.startswith("pg") else None
    per_part: dict[str, list[float]] = defaultdict(list)
    times = []
    try:
        for query in queries:
            times.append(one_recall(services, chat_id, query, embedder, vectors))
            if parts is not None:
                for part, seconds in parts.take().items():
                    per_part[part].append(seconds)
    finally:
        if parts is not None:
            parts.restore()
    show(f"{name}_recall_ms_cold_{n}", cold * 1000)
    show(f"{name}_recall_ms_p95_{n}", percentile(times, 0.95) * 1000)
    show(f"{name}_recall_ms_p50_{n}", statistics.median(times) * 1000)
    for part, spent in sorted(per_part.items()):
        show(f"{name}_recall_part_ms_p50_{n}_{part}", statistics.median(spent) * 1000)


@contextmanager
def pg_services(folder: Path, postgres_url: str, secret_key_path: Path) -> Iterator:
    # The copy carries the SQLite folder's API-key check: the PostgreSQL server uses that key.
    postgres = build_services(
        Settings(
            data_dir=folder / "postgres",
            database_url=postgres_url,
            start_scheduler=False,
            secret_key_file=secret_key_path,
        )
    )
    try:
        yield postgres
    finally:
        postgres.close()


def show_relation_sizes(engine, n: str) -> None:
    """What the searches read, in MB: the HNSW index, the vectors' table, the word rows and their index."""
    with engine.connect() as conn:
        sizes = conn.execute(
            text(
                "SELECT coalesce(sum(pg_relation_size(c.oid)) FILTER (WHERE c.relname LIKE "
                "'ix_memory_embedding_hnsw_%'), 0), pg_total_relation_size('memory_embedding'), "
                "pg_total_relation_size('memory_words') FROM pg_class c"
            )
        ).one()
    for part, size in zip(("hnsw", "embedding_with_indexes", "words_with_indexes"), sizes, strict=True):
        show(f"pg_mb_{n}_{part}", int(size) / 1e6)


def recall_figures(memories: int, runs: int) -> None:
    n = label(memories)
    text_maker = Text(random.Random(7))
    asked = list(dict.fromkeys(text_maker.query() for _ in range((runs + WARM_UP) * 3)))
    queries, warm_up = asked[:runs], asked[runs : runs + WARM_UP]
    embedder = MiniLM()
    embedder.embed_query("warm up")  # loaded once, before anything is timed
    with tempfile.TemporaryDirectory(prefix="sugo-bench-scale-") as tmp, PostgresServer() as server:
        folder = Path(tmp)
        sqlite = build_services(Settings(data_dir=folder / "sqlite", start_scheduler=False))
        try:
            with Session(sqlite.engine) as session:
                chat = Chat(name=f"{memories} memories", mode="conversation")
                session.add(chat)
                session.commit()
                chat_id = chat.id
            started = time.perf_counter()
            windows = fill_chunks(sqlite.engine, chat_id, memories, text_maker)
            show(f"sqlite_fill_s_{n}", time.perf_counter() - started)
            show(f"recall_windows_{n}", windows)
            postgres_url = server.url(server.create_database())
            started = time.perf_counter()
            copy_to_postgres(sqlite.engine, postgres_url, metadata)
            show(f"pg_copy_s_{n}", time.perf_counter() - started)
            started = time.perf_counter()
            engine = make_engine(postgres_url)
            with engine.begin() as conn:
                conn.execute(text(f"SET LOCAL maintenance_work_mem = '{PG_BUILD_MEMORY}'"))
                index.fill_postgres_index(conn, spaces=True)
            # As autovacuum leaves tables that have settled: the planner's statistics, the visibility map.
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("VACUUM ANALYZE"))
            engine.dispose()
            show(f"pg_index_s_{n}", time.perf_counter() - started)
            database = postgres_url.split("/")[-1].split("?")[0]
            measure_recall("sqlite", sqlite, chat_id, queries, warm_up, embedder, n)
            # PostgreSQL as it comes (shared_buffers 128 MB), then given the memory the README advises.
            with pg_services(folder, postgres_url, sqlite.settings.secret_key_path) as postgres:
                show_relation_sizes(postgres.engine, n)
                measure_recall("pg_default_memory", postgres, chat_id, queries, warm_up, embedder, n)
            server.restart(f"shared_buffers = '{PG_SERVE_MEMORY}'\n")
            show("pg_shared_buffers", PG_SERVE_MEMORY)
            with pg_services(folder, server.url(database), sqlite.settings.secret_key_path) as postgres:
                measure_recall("pg", postgres, chat_id, queries, warm_up, embedder, n)
        finally:
            sqlite.close()
    embed_only = []
    for query in queries:
        started = time.perf_counter()
        embedder.embed_query(query + " ")  # not the cached text: the model's own time
        embed_only.append(time.perf_counter() - started)
    show("recall_embed_ms_p50", statistics.median(embed_only) * 1000)
    show("embedding_model", embedder.space.model)


# --- two servers under load -----------------------------------------------------------------------


@contextmanager
def scale_server(data_dir: Path, database_url: str, name: str, log: Path) -> Iterator[tuple[str, int]]:
    """bench/scale_server.py in its own process; its URL and process id once /healthz answers."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SUGO_")},
        "SUGO_DATA_DIR": str(data_dir),
        "SUGO_DATABASE_URL": database_url,
        "SUGO_SERVER_NAME": name,
        "SUGO_SCHEDULER": "1",
        "SUGO_DISCOVERY_PORTS": "none=1",  # the first-run page must not probe what else runs here
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
    }
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "scale_server.py"), "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(url + "/healthz")
        except RuntimeError:
            raise RuntimeError(f"{name} did not start: {log.read_text()[-2000:]}") from None
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def seed_chats(
    client: httpx.Client, database_url: str, model_url: str, users: int, *, endpoint_embeddings: bool = False
) -> list[int]:
    """One chat per user with SEED_MESSAGES messages (written straight into the database). Memory Recall
    embeds with the built-in model, or with `endpoint_embeddings` through the model server's
    /v1/embeddings (the connection's embedding model)."""
    client.post(
        "/api/connections",
        json={
            "name": "Test model",
            "kind": "openai",
            "base_url": model_url,
            "model": "test-model",
            "context_size": 8192,
            "max_tokens": 256,
            **({"embedding_model": "test-embedding"} if endpoint_embeddings else {}),
        },
    ).raise_for_status()
    character = client.post(
        "/api/characters",
        json={"name": CHARACTER, "description": "Aria is a wandering bard.", "first_mes": "*Aria waves.*"},
    )
    character.raise_for_status()
    character_id = character.json()["id"]
    chat_ids = []
    for i in range(users):
        answer = client.post("/api/chats", json={"character_ids": [character_id], "name": f"Walk {i}"})
        answer.raise_for_status()
        chat_ids.append(answer.json()["id"])
    text_maker = Text(random.Random(11))
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            for chat_id in chat_ids:
                for k in range(SEED_MESSAGES):
                    user = k % 2 == 1
                    session.add(
                        new_message(
                            chat_id,
                            "user" if user else "assistant",
                            USER if user else CHARACTER,
                            [text_maker.sentence(40)],
                            character_id=None if user else character_id,
                        )
                    )
            session.commit()
    finally:
        engine.dispose()
    return chat_ids


def warm_up(*servers: str) -> None:
    """Each server as one that has been answering for a while: a reply written through it and a memory
    search (which loads the built-in embedding model: a fresh server loads it on first use, and that
    takes seconds of both cores, importing torch and transformers), then its /healthz polled until the
    model is ready. Not timed; the warm-up chat is not one of the users'."""
    with httpx.Client(timeout=120) as client:
        character_id = client.get(f"{servers[0]}/api/characters").json()[0]["id"]
        chat = client.post(
            f"{servers[0]}/api/chats", json={"character_ids": [character_id], "name": "Warm-up"}
        )
        chat.raise_for_status()
        for server in servers:
            client.post(
                f"{server}/api/chats/{chat.json()['id']}/generate",
                json={"action": "send", "content": "A first word before the evening."},
            ).raise_for_status()
            # A search waits for the model (a reply does not, and its memory job may run on the other
            # server's worker): this server's copy starts loading, as a server answering for a while has.
            client.get(
                f"{server}/api/chats/{chat.json()['id']}/memories/search", params={"q": "evening"}
            ).raise_for_status()
        deadline = time.monotonic() + 600
        for server in servers:
            while (state := client.get(f"{server}/healthz").json()["embedder"]) != "ready":
                if state == "failed" or time.monotonic() > deadline:
                    raise RuntimeError(f"{server}'s embedding model did not load: {state}")
                time.sleep(0.5)


# scale_load.py's users wait between 1 and 3 s after each answer, and send one message in four steps.
MEAN_WAIT_S = 2.0
SEND_SHARE = 0.25
QUIET_PAGES = 40
QUIET_SENDS = 12


def process_cpu_s(pid: int, *, reaped: bool = False) -> float:
    """CPU seconds a process has used (user + system), with `reaped` those of its ended children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def postgres_cpu_s(postmaster: int) -> float:
    """The PostgreSQL server's CPU seconds: the postmaster with the backends it reaped, and the live ones."""
    total = process_cpu_s(postmaster, reaped=True)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                total += process_cpu_s(int(entry.name))
        except (OSError, ValueError):
            continue  # a backend that ended meanwhile: the postmaster's reaped time has it
    return total


def machine_busy_s() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine since boot, over every core."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle and iowait
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(values) - idle) / hz, sum(values) / hz


class CpuUse:
    """CPU seconds used by the bench's parts: both Sugo servers, PostgreSQL, and this process (the test
    model server's thread)."""

    def __init__(self, servers: list[int], postmaster: int) -> None:
        self.servers, self.postmaster = servers, postmaster

    def take(self) -> dict[str, float]:
        own = os.times()
        return {
            "servers": sum(process_cpu_s(pid) for pid in self.servers),
            "postgres": postgres_cpu_s(self.postmaster),
            "model_server": own.user + own.system,
        }

    @staticmethod
    def since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {name: after[name] - before[name] for name in before}


def quiet_costs(servers: list[str], cpu: CpuUse, chat_id: int, users: int) -> tuple[float, float]:
    """CPU milliseconds (servers and PostgreSQL) one chat page and one message send cost, asked one at a
    time of the quiet servers (in turn); a send's includes the background work it starts (Memory Recall
    embedding its memory, scene checks), waited for until the servers are idle again. The servers' idle
    use (heartbeats, the queue's polling), measured first, is taken out. Fewer of each for a small
    load (the test's five users)."""
    pages, sends = min(QUIET_PAGES, 4 * users), min(QUIET_SENDS, users)

    def used(before: dict[str, float]) -> float:
        spent = CpuUse.since(before, cpu.take())
        return spent["servers"] + spent["postgres"]

    before, started = cpu.take(), time.monotonic()
    time.sleep(3)
    idle_per_s = used(before) / (time.monotonic() - started)
    with httpx.Client(timeout=120) as client:
        before, started = cpu.take(), time.monotonic()
        for n in range(pages):
            client.get(f"{servers[n % len(servers)]}/chats/{chat_id}").raise_for_status()
        page_s = (used(before) - idle_per_s * (time.monotonic() - started)) / pages
        before, started = cpu.take(), time.monotonic()
        for n in range(sends):
            answer = client.post(
                f"{servers[n % len(servers)]}/api/chats/{chat_id}/generate",
                json={"action": "send", "content": f"What did the ferryman say on day {n}?"},
            )
            if answer.status_code != 200:
                raise RuntimeError(f"a quiet send failed: {answer.status_code} {answer.text[:300]}")
        while True:  # the background work the sends started, to its end
            mark = cpu.take()
            time.sleep(1)
            if used(mark) < idle_per_s * 1.5 + 0.02 or time.monotonic() - started > 300:
                break
        send_s = (used(before) - idle_per_s * (time.monotonic() - started)) / sends
    return page_s * 1000, send_s * 1000


def load_figures(users: int, seconds: float, embeddings: str) -> None:
    """The load with Memory Recall embedding each reply's memory with the built-in model on the
    servers' own cores (two_server_*, the issue's figures), and with the embeddings asked of the model
    server's /v1/embeddings, as a deployment with an embedding endpoint does (two_server_endpoint_*);
    `embeddings` says which ("both": one after the other)."""
    if embeddings in ("both", "builtin"):
        load_pass(users, seconds, "two_server", endpoint_embeddings=False)
    if embeddings in ("both", "endpoint"):
        load_pass(users, seconds, "two_server_endpoint", endpoint_embeddings=True)


def load_pass(users: int, seconds: float, name: str, *, endpoint_embeddings: bool) -> None:
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sugo-bench-load-")))
        server = stack.enter_context(PostgresServer())
        database_url = server.url(server.create_database())
        engine = make_engine(database_url)
        upgrade_database(engine)
        engine.dispose()
        models = stack.enter_context(ModelServer())
        data_dir = folder / "data"
        # One after the other: the first makes the data folder's keys, the second reads them.
        one, one_pid = stack.enter_context(scale_server(data_dir, database_url, "one", folder / "one.log"))
        two, two_pid = stack.enter_context(scale_server(data_dir, database_url, "two", folder / "two.log"))
        with httpx.Client(base_url=one, timeout=60) as client:
            chat_ids = seed_chats(
                client, database_url, models.base_url, users + 1, endpoint_embeddings=endpoint_embeddings
            )
        warm_up(one, two)
        assert server.pid is not None
        cpu = CpuUse([one_pid, two_pid], server.pid)
        # The last chat is not a user's: the quiet costs' sends go there.
        page_ms, send_ms = quiet_costs([one, two], cpu, chat_ids.pop(), users)
        before, busy_before, reaped_before = cpu.take(), machine_busy_s(), os.times()
        locust = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "bench" / "scale_load.py"),
                "--servers",
                f"{one},{two}",
                "--chats",
                ",".join(map(str, chat_ids)),
                "--users",
                str(users),
                "--seconds",
                str(seconds),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = locust.communicate()
        spent, busy_after, reaped = CpuUse.since(before, cpu.take()), machine_busy_s(), os.times()
        # locust is the one child ended (reaped) in that time: the servers run on, PostgreSQL is pg_ctl's.
        locust_s = reaped.children_user + reaped.children_system
        locust_s -= reaped_before.children_user + reaped_before.children_system
        if locust.returncode != 0 or not out.strip():
            raise RuntimeError(f"the locust run failed ({locust.returncode}): {err[-3000:]}")
        found = json.loads(out.strip().splitlines()[-1])
        for server_name in ("one", "two"):  # what a server said went wrong, for the reader of a failure
            logged = (folder / f"{server_name}.log").read_text()
            if "Traceback" in logged:
                print(f"# server {server_name} logged errors: {logged[-1500:]!r}")
    pages, sends = found["times"]["chat page"], found["times"]["send message"]
    failures = found["failures"]
    requests = len(pages) + len(sends) + sum(failures.values())
    ran_s = found["seconds"]
    show(f"{name}_users", users)
    show(f"{name}_seconds", float(seconds))
    show(f"{name}_requests", requests)
    show(f"{name}_failures", sum(failures.values()))
    show(f"{name}_page_requests", len(pages) + failures["chat page"])
    show(f"{name}_send_requests", len(sends) + failures["send message"])
    show(f"{name}_rps", requests / ran_s)
    if pages:
        show(f"{name}_p50_ms", statistics.median(pages))
        show(f"{name}_p95_ms", percentile(pages, 0.95))
    if sends:
        show(f"{name}_send_p50_ms", statistics.median(sends))
        show(f"{name}_send_p95_ms", percentile(sends, 0.95))
    # Where the cores went: a quiet page's and send's cost, what the users' pacing asks of the machine
    # were every answer instant, and what each part used during the run.
    show(f"{name}_quiet_page_cpu_ms", page_ms)
    show(f"{name}_quiet_send_cpu_ms", send_ms)
    demand = users / MEAN_WAIT_S * ((1 - SEND_SHARE) * page_ms + SEND_SHARE * send_ms) / 1000
    show(f"{name}_cpu_demand_cores", demand)
    show(f"{name}_machine_cores", os.cpu_count() or 0)
    busy, every = (after - before for after, before in zip(busy_after, busy_before, strict=True))
    show(f"{name}_machine_busy_pct", 100 * busy / every)
    for part, used in spent.items():
        show(f"{name}_cores_used_{part}", used / ran_s)
    show(f"{name}_cores_used_locust", locust_s / ran_s)
    for name_, reasons in found["reasons"].items():
        for reason, count in reasons:
            print(f"# {name_} failed {count}x: {reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000, help="memories in the recall chat")
    parser.add_argument("--runs", type=int, default=RUNS, help="questions asked of each database")
    parser.add_argument("--users", type=int, default=100, help="simulated users of the load")
    parser.add_argument("--seconds", type=float, default=60, help="how long the load runs")
    parser.add_argument("--only", choices=("recall", "load"), help="run one part alone")
    parser.add_argument(
        "--load-embeddings",
        choices=("both", "builtin", "endpoint"),
        default="both",
        help="the load's Memory Recall embeddings: the built-in model, the model server's, or both runs",
    )
    args = parser.parse_args()
    if args.memories < 1 or args.runs < 1 or args.users < 1 or args.seconds <= 0:
        parser.error("--memories, --runs and --users take a positive number, --seconds more than 0")
    if args.only in (None, "recall"):
        recall_figures(args.memories, args.runs)
    if args.only in (None, "load"):
        load_figures(args.users, args.seconds, args.load_embeddings)


if __name__ == "__main__":
    main()

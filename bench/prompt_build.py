"""The prompt a user's reply is built with, on the path a user's request takes: a 5,000-message
Conversation chat with Memory Recall on over 100,000 stored memories (500,000 embedded windows),
two attached lorebooks of 1,000 entries each (3 keys each), a context note and a character's note;
Sugo runs with its scheduler on (SUGO_SCHEDULER=1), so every reply schedules the memory job.
Every built-in prompt source is registered (app/sources.py). Then the same chat in two variants
(bench/prompt_variants.py says how each is set up): `_summaries`, Roleplay with Chat Summary on
(400 active entries covering the chat, "Hide summarised messages" on, a recent tail of 10) and
Memory Recall kept on; `_adv`, Roleplay with Advanced Memory on over the chat prepared (99 scenes
recapped, the window's new start stored, continuity entries before it), which takes over recall.
Prints name=value lines; never asserts on time.

- prompt_build_ms_p50: `build_chat_prompt` for that chat, in the bench's own process (reading the
  history window, Memory Recall's search over 100,000 memories, the lorebook scan, the notes, the
  builder), everything but the query's embedding: the query's vector is in the app's cache of
  query vectors (as when Peek Prompt or the context grid ask for the same turn again), so the
  figure is the work around the embedding. Nothing else is cached that a new query would not
  find cached too (the sign bits and the compiled lorebooks stay in memory for every turn).
- source_ms_p50_<name>: for each registered source, in registry order, its share of those cached
  builds as the seam times it (Prompt.source_ms: its history limit, begin, contribute and history
  filter; a source whose `begin` started work on a thread pays for the wait on it, not for the work
  the others did meanwhile); a source that is off for the chat shows what asking it costs.
- query_embed_ms_p50: the built-in model (all-MiniLM-L6-v2, CPU) embedding that query, uncached,
  timed alone and interleaved with the builds.
- prompt_build_uncached_ms_p50: the same build with that cache emptied each time: the embedding
  included, overlapping with the rest where it can.
- first_token_overhead_ms: what Sugo adds to the time from the request to the first streamed
  character of the reply, over asking the test model server directly with the same prompt. Each
  Sugo request sends a new user message, so nothing of its search is cached: everything is in it
  (storing the message, embedding it, recall, lore, the build, the provider call, SSE).
- ttfb_overhead_ms: the same up to the first byte of the answer (Sugo's `start` event, sent once
  the user's message is stored, before the prompt is built).
- The same figures with `_summaries` (Memory Recall, the lore and the notes as above, plus Chat
  Summary's 400 entries in the prompt and the summarised messages taken out of the history) and
  with `_adv` (Advanced Memory: its window from the stored start, its ranking of the chat's
  memories for the scenes, up to 3 recalled scenes (its default), the continuity entries; the lore and
  the notes; standard recall off, as Advanced Memory turns it off). The variants run fewer builds
  (40) and replies (30). The `_adv` replies ask the helper model nothing (no scene check due: the
  interval is 100 messages; every recap written; the archived messages covered): the bench
  refuses the figures if a failure, a scene or an entry appeared meanwhile.

Sugo and the test model server each run in their own process, as they do for a user (in one
process their threads would fight over the GIL and blur the figure). The client opens one fresh
connection per request on both paths (Connection: close, TCP_NODELAY); direct and Sugo requests
are interleaved so machine noise hits both alike, with a pause after each reply as a person's
typing would give (the memory job it scheduled runs then).

The memories: the chat's own messages are chunked and embedded by the built-in model, as the
memory job does; 100,000 more are imported memories (Memory Recall → Import) written straight into
the database, with random unit vectors and text from a chat-like vocabulary (bench/recall.py):
embedding 500,000 windows for real would take hours and change nothing in the timing. Queries
share words with them, so both the vector and the word passes do real work. The setup fails unless
Peek Prompt shows recalled memories (recalled scenes or a scene summary block for `_adv`),
keyword-matched lore and both notes, and for `_summaries` all 400 entries.

Run: .venv/bin/python bench/prompt_build.py  [--keep DIR]  [--only main|summaries|adv]
(preparing the chat takes minutes; --keep keeps the prepared data folder in DIR/data and each
variant's in DIR/summaries and DIR/adv, and reuses them next time; each run measures a fresh copy)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlmodel import Session  # noqa: E402

from app.chats.history import history_window  # noqa: E402
from app.chats.service import chat_settings, get_chat, new_message  # noqa: E402
from app.main import build_services  # noqa: E402
from app.memory.recall.embedders import MiniLM  # noqa: E402
from app.memory.recall.jobs import embed_chat  # noqa: E402
from app.memory.recall.source import recall_query  # noqa: E402
from app.memory.scenes.core.continuity import COMBINED_TITLE  # noqa: E402
from app.platform.settings import Settings  # noqa: E402
from app.prompt.service import build_chat_prompt  # noqa: E402
from bench.lore_scan import invented_names  # noqa: E402
from bench.prompt_variants import SUMMARY_ENTRIES, check_adv_quiet, set_up_adv, set_up_summaries  # noqa: E402
from bench.recall import Text, fill_chunks  # noqa: E402
from bench.sugo_process import free_port, wait_for  # noqa: E402

MESSAGES = 5000
MEMORIES = 100_000
BOOKS = ("Places and people", "Creatures and things")
ENTRIES_PER_BOOK = 1000
VARIANTS = ("main", "summaries", "adv")
SUFFIX = {"main": "", "summaries": "_summaries", "adv": "_adv"}
BUILD_RUNS = {"main": 60, "summaries": 40, "adv": 40}
TTFB_RUNS = {"main": 40, "summaries": 30, "adv": 30}
WARM_UPS = 3
PAUSE_S = 0.5  # after each reply: the memory job it scheduled runs, as it would while a person types
CONNECTION = {"name": "bench", "model": "test-model", "context_size": 32768, "max_tokens": 512}
CONTEXT_NOTE = "Keep the answers short and stay in the harbour town unless Rowan leaves it."
CHARACTER_NOTE = "Mirela never reveals where the old map came from."


def first_token(port: int, path: str, body: dict, marker: bytes) -> tuple[float, float]:
    """Seconds from sending the request to the first byte of the streamed body, and to the first
    piece of model text."""
    payload = json.dumps(body).encode()
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode() + payload
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        sock.sendall(request)
        seen = b""
        first_byte = first_text = None
        while chunk := sock.recv(65536):
            seen += chunk
            now = time.perf_counter() - start
            head, sep, body = seen.partition(b"\r\n\r\n")
            if first_byte is None and sep and body:
                first_byte = now
            if first_text is None and marker in body:
                first_text = now
        if first_byte is None or first_text is None:
            raise RuntimeError(f"no model text in the answer from {path}: {seen[:300]!r}")
        return first_byte, first_text


# --- the chat -----------------------------------------------------------------------------------


class Story:
    """Chat text from bench/recall.py's vocabulary, naming the lorebooks' people and places now and
    then, and user questions that share words with the memories."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.text = Text(rng)
        self.lore_names = invented_names(rng, len(BOOKS) * ENTRIES_PER_BOOK * 3)

    def message(self) -> str:
        parts = [self.text.sentence(self.rng.randint(8, 20)) for _ in range(self.rng.randint(2, 3))]
        for _ in range(self.rng.choice([0, 1, 1, 2])):  # most messages name someone or something
            parts.insert(self.rng.randint(0, len(parts)), f"{self.rng.choice(self.lore_names)} was there.")
        return " ".join(parts)

    def question(self) -> str:
        return f"{self.text.query()} {self.rng.choice(self.lore_names)} said it was near the {self.text.query()[:-1]}"


def lorebook_file(story: Story, book: int) -> bytes:
    """A SillyTavern World Info file: 1,000 entries with 3 keys each (one two-word key in ten), a
    few constants, a third recursive, realistic lengths."""
    rng, names = story.rng, story.lore_names
    entries = {}
    for i in range(ENTRIES_PER_BOOK):
        n = (book * ENTRIES_PER_BOOK + i) * 3
        keys = [names[n], names[n + 1].lower(), names[n + 2]]
        if i % 10 == 1:
            keys[2] = f"{names[n + 2]} {rng.choice(['Gate', 'Keep', 'Order', 'Vale'])}"
        mentions = " ".join(rng.choice(names) for _ in range(2)) if i % 3 == 0 else ""
        body = " ".join(story.text.sentence(rng.randint(8, 16)) for _ in range(rng.randint(3, 8)))
        entries[str(i)] = {
            "uid": i,
            "key": keys,
            "keysecondary": [],
            "comment": keys[0],
            "content": f"{{{{char}}}} knows {keys[0]}. {body} {mentions}".strip(),
            "constant": i % 250 == 0,
            "selective": True,
            "order": rng.randint(1, 200),
            "position": 4 if i % 20 == 0 else 1,
            "depth": 4,
            "disable": False,
            "probability": 100,
            "useProbability": True,
            "preventRecursion": i % 3 != 0,
        }
    doc = {
        "entries": entries,
        "sugo": {"scan_depth": 4, "recursive": True, "max_depth": 2, "token_budget": 2048},
    }
    return json.dumps(doc).encode()


def fill_messages(services, chat_id: int, character_id: int, story: Story) -> None:
    with Session(services.engine) as s:
        for i in range(MESSAGES):
            user = i % 2 == 1  # the last one is the user's
            text = story.question() if user and (i % 10 == 9) else story.message()
            msg = new_message(chat_id, "user" if user else "assistant", "Rowan" if user else "Mirela", [text])
            msg.character_id = None if user else character_id
            s.add(msg)
        s.commit()


def setup_chat(client: httpx.Client, model_url: str, story: Story) -> tuple[int, int]:
    client.post("/api/connections", json={**CONNECTION, "base_url": model_url + "/v1"}).raise_for_status()
    char = client.post(
        "/api/characters",
        json={
            "name": "Mirela",
            "description": " ".join(story.message() for _ in range(8)),
            "personality": story.message(),
            "scenario": story.message(),
            "character_note": CHARACTER_NOTE,
        },
    ).json()
    chat = client.post("/api/chats", json={"character_ids": [char["id"]], "mode": "conversation"}).json()
    client.put(
        f"/api/chats/{chat['id']}/options",
        json={"settings": {"context_note": CONTEXT_NOTE}, "mode": "conversation"},
    ).raise_for_status()
    books = []
    for b, name in enumerate(BOOKS):
        answer = client.post(
            "/api/lorebooks/import", files={"file": (f"{name}.json", lorebook_file(story, b))}
        )
        answer.raise_for_status()
        books.append(answer.json()["id"])
    client.put(f"/api/chats/{chat['id']}/lorebooks", json={"book_ids": books}).raise_for_status()
    return chat["id"], char["id"]


def prompt_figures(blocks: list[tuple[str, str]]) -> dict[str, int]:
    """What the path really holds, from a prompt's (name, text) blocks."""
    text = {name: body for name, body in blocks}
    everything = "\n".join(body for _, body in blocks)
    return {
        "recalled_blocks": text.get("recalled_memories", "").count("--- Memory "),
        "lore_keyword_entries": text.get("keyword_lore", "").count("Mirela knows "),
        "lore_entries_active": everything.count("Mirela knows "),
        "context_note_in": int(CONTEXT_NOTE in everything),
        "character_note_in": int(CHARACTER_NOTE in everything),
        "summary_entries_sent": everything.count("## Part "),  # the summaries variant's entries
        "recalled_scenes": everything.count("### Scene "),  # Advanced Memory's Recalled Scenes
        "continuity_entry_in": int(f"## {COMBINED_TITLE}\n" in everything),  # its Chat Summary constants
    }


def check_path(figures: dict[str, int], where: str, variant: str) -> None:
    """A bench that silently measures an empty path is wrong: refuse to go on."""
    wanted = {
        "keyword lore": figures["lore_keyword_entries"],
        "the context note": figures["context_note_in"],
        "the character's note": figures["character_note_in"],
    }
    if variant != "adv":  # Advanced Memory takes over recall: standard Memory Recall sends nothing then
        wanted["recalled memories"] = figures["recalled_blocks"]
    if variant == "summaries":
        wanted[f"all {SUMMARY_ENTRIES} summary entries"] = figures["summary_entries_sent"] == SUMMARY_ENTRIES
    if variant == "adv":
        wanted["recalled scenes or a scene summary block"] = (
            figures["recalled_scenes"] or figures["continuity_entry_in"]
        )
    missing = [name for name, there in wanted.items() if not there]
    if missing:
        raise RuntimeError(f"{where} ({variant}): the prompt lacks {', '.join(missing)}: {figures}")


def peek(client: httpx.Client, chat_id: int) -> tuple[dict[str, int], list[str]]:
    answer = client.get(f"/api/chats/{chat_id}/prompt").json()
    return prompt_figures([(b["name"], b["text"]) for b in answer["blocks"]]), answer["notes"]


def wait_until_vectors(client: httpx.Client, chat_id: int, variant: str) -> tuple[dict[str, int], list[str]]:
    """Sugo loads its model in the background on the first recall (text matching meanwhile) and
    its sign bits on the first search: wait until the prompt's recall uses vectors (Peek Prompt's
    Memory Recall note; with Advanced Memory, which says nothing of it, a memory search's similarity)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        figures, notes = peek(client, chat_id)
        if variant == "adv":
            found = client.get(f"/api/chats/{chat_id}/memories/search", params={"q": "Mirela", "k": 3})
            if any(hit["similarity"] is not None for hit in found.json()["results"]):
                return peek(client, chat_id)
        elif any(n.startswith("Memory Recall: recalled") and "similarity" in n for n in notes):
            return figures, notes
        time.sleep(0.5)
    raise RuntimeError(f"Sugo's Memory Recall never used vectors: {notes}")


# --- the figures ----------------------------------------------------------------------------------


def p(values: list[float], fraction: float) -> float:
    return sorted(values)[int(len(values) * fraction)]


@dataclass
class Built:
    """The in-process builds of one variant: their times, each source's times, the last prompt."""

    cached: list[float] = field(default_factory=list)
    uncached: list[float] = field(default_factory=list)
    embed: list[float] = field(default_factory=list)
    source_ms: dict[str, list[float]] = field(default_factory=dict)
    prompt: object = None


def build_figures(data_dir: Path, chat_id: int, runs: int) -> Built:
    services = build_services(Settings(data_dir=data_dir, start_scheduler=False))
    embedder = MiniLM()
    embedder.embed_query("warm up")  # load the model outside the clock
    built = Built(source_ms={name: [] for name in services.sources.names()})
    try:
        with Session(services.engine) as s:
            chat = get_chat(s, chat_id)
            # Loads the sign bits, compiles the books, starts the model's load for the sources' own use.
            build_chat_prompt(s, chat, services=services)
            limit = chat_settings(chat).recent_message_limit
            query = recall_query(history_window(s, chat_id, before_id=None, limit=limit).messages)
            for _ in range(runs):  # interleaved, so machine noise hits the three alike
                services.recall.query_vectors.clear()
                t = time.perf_counter()
                build_chat_prompt(s, chat, services=services)
                built.uncached.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                prompt, _ = build_chat_prompt(s, chat, services=services)  # the query's vector is cached now
                built.cached.append((time.perf_counter() - t) * 1000)
                for name, ms in prompt.source_ms:
                    built.source_ms.setdefault(name, []).append(ms)
                t = time.perf_counter()
                embedder.embed_query(query)
                built.embed.append((time.perf_counter() - t) * 1000)
                built.prompt = prompt
    finally:
        services.close()
    return built


def prepare(client: httpx.Client, model_url: str, data_dir: Path, story: Story) -> dict:
    """The chat, its books and its memories; what it took."""
    chat_id, char_id = setup_chat(client, model_url, story)
    services = build_services(Settings(data_dir=data_dir, start_scheduler=False))
    try:
        fill_messages(services, chat_id, char_id, story)
        t = time.perf_counter()
        embed_chat(services, chat_id)  # the memory job: the chat's own memories, real vectors
        own_s = time.perf_counter() - t
        t = time.perf_counter()
        windows = fill_chunks(services.engine, chat_id, MEMORIES, story.text, source="bench-import")
        fill_s = time.perf_counter() - t
        with services.engine.connect() as conn:
            own = conn.exec_driver_sql(
                "SELECT count(*) FROM memory_chunk WHERE chat_id = ? AND source_chat_id IS NULL", (chat_id,)
            ).scalar_one()
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        services.close()
    return {
        "chat_id": chat_id,
        "memory_own_chunks": own,
        "memory_own_embed_s": round(own_s, 1),
        "memory_windows_imported": windows,
        "memory_fill_s": round(fill_s, 1),
    }


@contextmanager
def sugo_on(data_dir: Path) -> Iterator[tuple[httpx.Client, int]]:
    """A Sugo process (scheduler on) over `data_dir`: a client for it and its port."""
    port = free_port()
    env = {**os.environ, "SUGO_DATA_DIR": str(data_dir), "SUGO_SCHEDULER": "1", "PYTHONPATH": str(ROOT)}
    sugo = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(url + "/healthz")
        with httpx.Client(base_url=url, timeout=60) as client:
            yield client, port
    finally:
        sugo.terminate()
        sugo.wait(10)


def measure(
    variant: str, data_dir: Path, chat_id: int, model_port: int, story: Story, setup: dict
) -> dict[str, object]:
    """One variant's figures, as name → value, on a Sugo process over `data_dir` (`setup`: what its
    set-up wrote)."""
    model_url = f"http://127.0.0.1:{model_port}"
    with sugo_on(data_dir) as (client, sugo_port):
        for conn in client.get("/api/connections").json():  # a kept folder knew another port
            client.put(f"/api/connections/{conn['id']}", json={**CONNECTION, "base_url": model_url + "/v1"})
        story.rng.seed(11)  # the same questions whether the chat was prepared now or kept
        built = build_figures(data_dir, chat_id, BUILD_RUNS[variant])
        prompt = built.prompt
        in_prompt = prompt_figures([(b.name, b.text) for b in prompt.blocks])
        check_path(in_prompt, "the measured build", variant)
        sugo_path, notes = wait_until_vectors(client, chat_id, variant)
        check_path(sugo_path, "Peek Prompt in Sugo", variant)

        direct_body = {"model": "test-model", "stream": True, "messages": list(prompt.messages)}
        times: dict[str, list[float]] = {
            "direct_byte": [],
            "sugo_byte": [],
            "direct_text": [],
            "sugo_text": [],
        }
        path = f"/api/chats/{chat_id}/generate"
        for i in range(TTFB_RUNS[variant] + WARM_UPS):
            d_byte, d_text = first_token(model_port, "/v1/chat/completions", direct_body, b"Echo")
            s_byte, s_text = first_token(
                sugo_port, path, {"action": "send", "content": story.question()}, b"event: token"
            )
            if i >= WARM_UPS:
                for key, value in zip(times, (d_byte, s_byte, d_text, s_text), strict=True):
                    times[key].append(value * 1000)
            time.sleep(PAUSE_S)
        after, _ = peek(client, chat_id)
        check_path(after, "Peek Prompt after the replies", variant)
        if variant == "adv":
            check_adv_quiet(data_dir, chat_id, setup)
    med = {key: statistics.median(values) for key, values in times.items()}
    suffix = SUFFIX[variant]
    out: dict[str, object] = {"prompt_messages_included": prompt.history_included}
    out.update(in_prompt)
    note_name, note_of = {
        "main": ("recall_note", "Memory Recall"),
        "summaries": ("summary_note", "Chat Summary"),
        "adv": ("adv_note", "Advanced Memory"),
    }[variant]
    out[note_name] = repr(next((n for n in notes if n.startswith(note_of)), ""))
    out["prompt_build_ms_p50"] = f"{statistics.median(built.cached):.2f}"
    out["prompt_build_ms_p90"] = f"{p(built.cached, 0.9):.2f}"
    out["query_embed_ms_p50"] = f"{statistics.median(built.embed):.2f}"
    out["prompt_build_uncached_ms_p50"] = f"{statistics.median(built.uncached):.2f}"
    out["prompt_build_uncached_ms_p90"] = f"{p(built.uncached, 0.9):.2f}"
    for name, values in built.source_ms.items():  # every registered source, in registry order
        out[f"source_ms_p50_{name}"] = f"{statistics.median(values) if values else 0.0:.2f}"
    out["first_byte_direct_ms_p50"] = f"{med['direct_byte']:.2f}"
    out["first_byte_sugo_ms_p50"] = f"{med['sugo_byte']:.2f}"
    out["first_token_direct_ms_p50"] = f"{med['direct_text']:.2f}"
    out["first_token_sugo_ms_p50"] = f"{med['sugo_text']:.2f}"
    out["first_token_sugo_ms_p90"] = f"{p(times['sugo_text'], 0.9):.2f}"
    # Up to Sugo's `start` event (the user's message stored, the prompt not yet built).
    out["ttfb_overhead_ms"] = f"{med['sugo_byte'] - med['direct_byte']:.2f}"
    # What a reader waits for: the first words of the reply; everything included.
    out["first_token_overhead_ms"] = f"{med['sugo_text'] - med['direct_text']:.2f}"
    return {f"{name}{suffix}": value for name, value in out.items()}


def base_folder(keep: Path | None, tmp: Path, model_port: int, story: Story) -> tuple[Path, dict]:
    """The prepared base data folder (kept, or prepared now in `tmp` and kept when asked) and its set-up
    figures."""
    if keep is not None and (keep / "chat.json").exists():
        return keep / "data", json.loads((keep / "chat.json").read_text())
    data_dir = tmp / "base"
    with sugo_on(data_dir) as (client, _):
        setup = prepare(client, f"http://127.0.0.1:{model_port}", data_dir, story)
    if keep is not None:
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(data_dir, keep / "data")
        (keep / "chat.json").write_text(json.dumps(setup))
    return data_dir, setup


def variant_folder(variant: str, base: Path, keep: Path | None, tmp: Path, chat_id: int) -> tuple[Path, dict]:
    """A fresh copy of the variant's data folder to measure on (the base's for main, the kept set-up's
    when there is one) and its set-up figures; a new set-up is kept in keep/<variant> when asked."""
    data_dir = tmp / variant
    kept = keep / variant if keep is not None else None
    if kept is not None and (kept / "setup.json").exists():
        shutil.copytree(kept / "data", data_dir)
        return data_dir, json.loads((kept / "setup.json").read_text())
    shutil.copytree(base, data_dir)
    if variant == "main":
        return data_dir, {}
    t = time.perf_counter()
    if variant == "summaries":
        setup = set_up_summaries(data_dir, chat_id)
    else:
        setup = set_up_adv(data_dir, chat_id, "Mirela")
    setup[f"setup_s{SUFFIX[variant]}"] = round(time.perf_counter() - t, 1)
    if kept is not None:
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(data_dir, kept / "data")
        (kept / "setup.json").write_text(json.dumps(setup))
    return data_dir, setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the prepared data folders here and reuse them next time (preparing them takes minutes)",
    )
    parser.add_argument("--only", choices=VARIANTS, help="measure this part only")
    args = parser.parse_args()
    story = Story(random.Random(7))
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        model_port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        model = subprocess.Popen(
            [sys.executable, "-m", "tests.support.model_server", "--port", str(model_port), "--delay", "0"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        try:
            wait_for(f"http://127.0.0.1:{model_port}/v1/models")
            base, setup = base_folder(args.keep, tmp, model_port, story)
            chat_id = setup["chat_id"]
            print(f"chat_messages={MESSAGES}", flush=True)
            for key, value in setup.items():
                if key != "chat_id":
                    print(f"{key}={value}", flush=True)
            for variant in [args.only] if args.only else VARIANTS:
                data_dir, variant_setup = variant_folder(variant, base, args.keep, tmp, chat_id)
                figures = measure(variant, data_dir, chat_id, model_port, story, variant_setup)
                shutil.rmtree(data_dir)
                for key, value in {**variant_setup, **figures}.items():
                    print(f"{key}={value}", flush=True)
        finally:
            model.terminate()
            model.wait(10)


if __name__ == "__main__":
    main()

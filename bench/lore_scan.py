"""Lorebook scan time: 2,000 entries with 3 keys each against a 5,000-message chat, scan depth 10,
recursive scanning with Max Depth 3. Prints name=value lines; never asserts on time.

The book is synthetic but shaped like real ones: four lorebooks of 500 entries (places, people,
creatures, items) keyed by invented names, some two-word keys, a few regex and CJK keys, a few
constants, secondary keys, inclusion groups, probabilities and timed effects; a third of the
entries have their Recursion switch on and mention other entries. The chat mixes ordinary prose
with those names, so each scan fires some dozens of entries and recursion finds more.

Warm = scan with the lorebooks' compiled matchers cached (what a chat pays per generation);
cold = compile the four lorebooks, then scan (the first generation after a lorebook edit).

Run: .venv/bin/python bench/lore_scan.py
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.lore.core.activation import LoreBook, LoreEntry, ScanRequest, compile_book, scan  # noqa: E402
from app.prompt.core.tokens import count_tokens  # noqa: E402

BOOKS = 4
ENTRIES_PER_BOOK = 500
MESSAGES = 5000
SCAN_DEPTH = 10
MAX_DEPTH = 3
WARM_RUNS = 300
COLD_RUNS = 30
SYLLABLES = [
    "val",
    "dren",
    "ka",
    "mor",
    "thi",
    "el",
    "or",
    "ash",
    "wyn",
    "gar",
    "ro",
    "sel",
    "ith",
    "bar",
    "ne",
    "quor",
    "lin",
    "dus",
    "fa",
    "rek",
    "os",
    "ty",
    "mir",
    "hal",
]
PROSE = (
    "the a and of to in she he they was were had her his it with on at for as but not by from this that "
    "road night rain fire door window old light wind river stone hand eyes voice silence morning town "
    "walked looked said turned smiled waited listened remembered carried opened closed followed"
).split()


def invented_names(rng: random.Random, n: int) -> list[str]:
    names: set[str] = set()
    while len(names) < n:
        names.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize())
    return sorted(names)


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(PROSE) for _ in range(words)).capitalize() + "."


def build_books(rng: random.Random) -> tuple[list[LoreBook], list[LoreEntry], list[str]]:
    books = [
        LoreBook(
            id=b + 1,
            name=name,
            recursive=True,
            max_depth=MAX_DEPTH,
            scan_depth=SCAN_DEPTH,
            token_budget=2048,
            entry_limit=100,
        )
        for b, name in enumerate(["Places", "People", "Creatures", "Items"])
    ]
    total = BOOKS * ENTRIES_PER_BOOK
    names = invented_names(rng, total * 3)
    entries = []
    for i in range(total):
        keys = [names[i * 3], names[i * 3 + 1].lower(), names[i * 3 + 2]]
        if i % 10 == 1:
            keys[2] = f"{names[i * 3 + 2]} {rng.choice(['Gate', 'Keep', 'Order', 'Vale'])}"  # two-word key
        if i % 50 == 2:
            keys[1] = f"/{names[i * 3 + 1]}(s|'s)?\\b/i"  # regex key
        if i % 40 == 3:
            keys[2] = rng.choice(["魔法", "龍の谷", "黒い森", "王都"]) + str(i)  # CJK key, a substring match
        # A third of the entries recurse: their text names two other entries.
        mentions = " ".join(rng.choice(names) for _ in range(2)) if i % 3 == 0 else ""
        content = " ".join(sentence(rng, rng.randint(8, 16)) for _ in range(rng.randint(4, 14)))
        entries.append(
            LoreEntry(
                id=i + 1,
                book_id=i // ENTRIES_PER_BOOK + 1,
                title=keys[0],
                keys=tuple(keys),
                content=f"{{{{char}}}} knows {keys[0]}. {content} {mentions}".strip(),
                secondary_keys=(rng.choice(PROSE),) if i % 17 == 0 else (),
                constant=i % 250 == 0,
                order=rng.randint(1, 200),
                recursion=i % 3 == 0,
                group=f"g{i % 25}" if i % 9 == 0 else "",
                probability=60 if i % 13 == 0 else 100,
                sticky=2 if i % 31 == 0 else 0,
                cooldown=2 if i % 37 == 0 else 0,
            )
        )
    return books, entries, names


def build_chat(rng: random.Random, names: list[str]) -> list[str]:
    messages = []
    for i in range(MESSAGES):
        speaker = "Rowan" if i % 2 else "Mirela"
        words = [sentence(rng, rng.randint(6, 14)) for _ in range(rng.randint(2, 4))]
        for _ in range(rng.choice([0, 0, 1, 1, 2])):  # most messages name someone or something
            words.insert(rng.randint(0, len(words)), f"{rng.choice(names)} was there.")
        messages.append(f"{speaker}: " + " ".join(words))
    return messages


def render(entry: LoreEntry) -> str:
    return entry.content.replace("{{char}}", "Mirela").replace("{{user}}", "Rowan")


def percentile(values: list[float], fraction: float) -> float:
    return sorted(values)[int(len(values) * fraction)]


def main() -> None:
    rng = random.Random(7)
    books, entries, names = build_books(rng)
    chat = build_chat(rng, names)
    by_book = {b.id: [e for e in entries if e.book_id == b.id] for b in books}

    compile_ms, cold_ms = [], []
    compiled: dict = {}
    for run in range(COLD_RUNS):
        end = MESSAGES - run
        compiled = {}  # free the previous run's books outside the clock
        start = time.perf_counter()
        compiled = {b.id: compile_book(b, by_book[b.id]) for b in books}
        compiled_at = time.perf_counter()
        scan(
            ScanRequest(chat[:end], books, entries, message_count=end, seed=run),
            count=count_tokens,
            render=render,
            compiled=compiled,
        )
        compile_ms.append((compiled_at - start) * 1000)
        cold_ms.append((time.perf_counter() - start) * 1000)

    compiled = {b.id: compile_book(b, by_book[b.id]) for b in books}
    warm_ms, active, skipped, rejected, found_by_recursion, passes, tokens = [], [], [], [], [], [], []
    timed: dict = {}
    for run in range(WARM_RUNS):
        end = MESSAGES - WARM_RUNS + run + 1  # the chat grows one message per generation
        request = ScanRequest(chat[:end], books, entries, timed=timed, message_count=end, seed=run)
        start = time.perf_counter()
        result = scan(request, count=count_tokens, render=render, compiled=compiled)
        warm_ms.append((time.perf_counter() - start) * 1000)
        timed = result.timed
        active.append(len(result.active))
        skipped.append(len(result.skipped))
        rejected.append(len(result.rejected))
        found_by_recursion.append(sum(a.found_at_depth > 0 for a in result.active + result.skipped))
        passes.append(result.passes)
        tokens.append(result.chat_used)

    print(f"lore_entries={len(entries)}")
    print(f"lore_books={len(books)}")
    print(f"lore_chat_messages={MESSAGES}")
    print(f"lore_scan_depth={SCAN_DEPTH}")
    print(f"lore_recursion_max_depth={MAX_DEPTH}")
    print(f"lore_scan_ms_p50={statistics.median(warm_ms):.3f}")
    print(f"lore_scan_ms_p90={percentile(warm_ms, 0.9):.3f}")
    print(f"lore_compile_ms_p50={statistics.median(compile_ms):.2f}")
    print(f"lore_scan_cold_ms_p50={statistics.median(cold_ms):.2f}")
    print(f"lore_active_entries_avg={statistics.mean(active):.1f}")
    print(f"lore_skipped_entries_avg={statistics.mean(skipped):.1f}")
    print(f"lore_rejected_entries_avg={statistics.mean(rejected):.1f}")
    print(f"lore_recursion_finds_avg={statistics.mean(found_by_recursion):.1f}")
    print(f"lore_passes_avg={statistics.mean(passes):.2f}")
    print(f"lore_tokens_admitted_avg={statistics.mean(tokens):.0f}")


if __name__ == "__main__":
    main()

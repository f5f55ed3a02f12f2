"""Which recalled memories enter the prompt, within their budget. Pure functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

BUDGET_SHARE = 0.15
BUDGET_MIN, BUDGET_MAX = 384, 1536
PER_MEMORY_MAX = 384
STOP_BELOW = 96
TOP_K = 8
TRUNCATION_MARK = "\n...[recalled memory truncated]...\n"
# Without vectors (no embedding source), a chunk must share at least this much BM25 weight.
LEXICAL_MIN = 1.0
HEADER = (
    "These are fragments of earlier conversation recalled for continuity. Use what is relevant "
    "naturally, without saying that you remembered it."
)


def memory_budget(context_size: int) -> int:
    return max(BUDGET_MIN, min(BUDGET_MAX, int(context_size * BUDGET_SHARE)))


@dataclass(frozen=True)
class Candidate:
    chunk_id: int
    text: str
    similarity: float | None  # None when ranked by text matching only
    lexical: float
    label: str  # e.g. the time span, shown in the prompt


@dataclass(frozen=True)
class Recalled:
    chunk_id: int
    text: str
    tokens: int
    similarity: float | None


def truncate(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """Keep the head (70%) and the tail (30%) of a memory longer than `max_tokens`."""
    if count(text) <= max_tokens:
        return text
    ratio = max_tokens / max(1, count(text))
    keep = int(len(text) * ratio)
    head, tail = int(keep * 0.7), int(keep * 0.3)
    return text[:head].rstrip() + TRUNCATION_MARK + text[len(text) - tail :].lstrip()


def select_memories(
    candidates: Sequence[Candidate],
    *,
    budget: int,
    threshold: float,
    count: Callable[[str], int],
    k: int = TOP_K,
) -> tuple[list[Recalled], str]:
    """The best candidates (already ranked) that clear the threshold and fit the budget, each text
    once (an imported memory may repeat one the messages made); and a reason when none did."""
    relevant: list[Candidate] = []
    texts: set[str] = set()
    for c in candidates:
        if len(relevant) == k:
            break
        passes = c.similarity >= threshold if c.similarity is not None else c.lexical >= LEXICAL_MIN
        if passes and c.text.strip() not in texts:
            texts.add(c.text.strip())
            relevant.append(c)
    if not candidates:
        return [], "no memories yet"
    if not relevant:
        return [], "nothing relevant enough"
    chosen: list[Recalled] = []
    left = budget - count(HEADER)
    for c in relevant:
        if left < STOP_BELOW:
            break
        body = truncate(c.text, min(PER_MEMORY_MAX, left - 8), count)
        text = f"--- Memory {len(chosen) + 1} ({c.label}) ---\n{body}"
        tokens = count(text)
        if tokens > left:
            continue
        chosen.append(Recalled(c.chunk_id, text, tokens, c.similarity))
        left -= tokens
    return chosen, ("" if chosen else "no space left in the memory budget")


def memory_block(recalled: Sequence[Recalled]) -> str:
    if not recalled:
        return ""
    return "<memories>\n" + HEADER + "\n" + "\n".join(r.text for r in recalled) + "\n</memories>"

from app.memory.recall.core.recall import (
    Candidate,
    memory_block,
    memory_budget,
    select_memories,
    truncate,
)
from app.prompt.core.tokens import count_tokens


def c(i, sim, text="x " * 50, lex=0.0):
    return Candidate(i, text, sim, lex, f"span {i}")


def test_budget_is_15_percent_clamped():
    assert memory_budget(8192) == 1228
    assert memory_budget(1000) == 384
    assert memory_budget(200000) == 1536


def test_weak_matches_are_ignored_and_reason_given():
    assert select_memories([c(1, 0.1), c(2, 0.2)], budget=1000, threshold=0.25, count=count_tokens) == (
        [],
        "nothing relevant enough",
    )
    assert select_memories([], budget=1000, threshold=0.25, count=count_tokens) == ([], "no memories yet")


def test_best_first_within_budget():
    big = "x " * 150  # ~83 tokens as a memory
    chosen, why = select_memories(
        [c(1, 0.7, "a " + big), c(2, 0.5, "b " + big), c(3, 0.3, "c " + big)],
        budget=280,
        threshold=0.25,
        count=count_tokens,
    )
    assert [r.chunk_id for r in chosen] == [1, 2] and why == ""
    block = memory_block(chosen)
    assert (
        block.startswith("<memories>")
        and "--- Memory 1 (span 1) ---" in block
        and block.endswith("</memories>")
    )


def test_lexical_only_needs_real_overlap():
    chosen, _ = select_memories(
        [c(1, None, lex=0.2), c(2, None, lex=3.0)], budget=600, threshold=0.25, count=count_tokens
    )
    assert [r.chunk_id for r in chosen] == [2]


def test_long_memories_keep_head_and_tail():
    text = "HEAD " + "middle " * 2000 + " TAIL"
    short = truncate(text, 100, count_tokens)
    assert short.startswith("HEAD") and short.endswith("TAIL") and "[recalled memory truncated]" in short
    assert count_tokens(short) <= 110


def test_the_same_text_enters_the_prompt_once():
    chosen, _ = select_memories(
        [c(1, 0.7, "Aria: the key"), c(2, 0.6, "Aria: the key "), c(3, 0.5, "Aria: a map")],
        budget=1000,
        threshold=0.25,
        count=count_tokens,
    )
    assert [r.chunk_id for r in chosen] == [1, 3]
    assert memory_block(chosen).count("the key") == 1

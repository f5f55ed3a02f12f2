"""A long Conversation day is summarised in parts: split between messages, never more than 12 parts."""

from app.memory.summaries.core.prompts import TranscriptLine, parts_input, transcript_parts


def line(text: str, name: str = "A") -> TranscriptLine:
    return TranscriptLine(name, text)


def test_a_short_day_is_one_part():
    assert transcript_parts([line("hi"), line("there", "B")]) == ["A: hi\n\nB: there"]


def test_empty_messages_make_no_part():
    assert transcript_parts([line(" "), line("")]) == []


def test_parts_split_between_messages():
    assert transcript_parts([line("x" * 6)] * 3, max_chars=12) == ["A: xxxxxx", "A: xxxxxx", "A: xxxxxx"]
    assert transcript_parts([line("x" * 2)] * 3, max_chars=16) == ["A: xx\n\nA: xx", "A: xx"]


def test_a_message_longer_than_a_part_is_a_part_of_its_own():
    assert transcript_parts([line("a"), line("b" * 50), line("c")], max_chars=10) == [
        "A: a",
        "A: " + "b" * 50,
        "A: c",
    ]


def test_never_more_parts_than_the_limit():
    parts = transcript_parts([line("x" * 10)] * 100, max_chars=14, max_parts=12)
    assert len(parts) == 12
    assert sum(p.count("A: ") for p in parts) == 100


def test_parts_input():
    assert (
        parts_input([("One.", ["a", "b"]), ("Two.", [])])
        == "[Part 1]\nOne.\nKey details: a; b\n\n[Part 2]\nTwo."
    )

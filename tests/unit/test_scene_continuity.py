"""Updating continuity's rules (app/memory/scenes/core/continuity.py)."""

from app.memory.scenes.core.continuity import (
    EntryText,
    Refused,
    combine_due,
    combine_max_tokens,
    combine_request,
    continuity_key,
    keeps_as_is,
    parts,
    read_combined,
)
from app.prompt.core.tokens import count_tokens

TEXT = "The caravan crossed the desert. " * 20
TOKENS = count_tokens(TEXT)


def test_due_past_seventy_percent_of_the_budget():
    assert not combine_due([300, 400], 1000)
    assert combine_due([300, 401], 1000)


def test_entries_with_macros_other_than_user_and_char_stay_as_they_are():
    assert not keeps_as_is("{{user}} met {{char}} at the well.")
    assert keeps_as_is('{{#if char == "Kaito"}}Kaito saw it.{{/if}}')
    assert keeps_as_is("{{getvar::gold}} coins")


def test_parts_keep_whole_entries_in_order_within_the_limit():
    entries = [EntryText(i, f"e{i}", t) for i, t in enumerate([5, 5, 8, 20, 1])]
    assert [[e.id for e in p] for p in parts(entries, limit=10)] == [[0, 1], [2], [3], [4]]


def test_the_request_asks_for_half_and_to_keep_macros_when_there_are_some():
    plain = combine_request("", "They met.", 100)[1]["content"]
    assert "about half their length (about 50 tokens)" in plain and "{{user}}" not in plain
    assert (
        "Keep every {{user}} and {{char}} exactly as written"
        in combine_request("P", "{{user}} met {{char}}.", 10)[1]["content"]
    )
    assert combine_request("", "x", 2)[0]["content"].startswith("You keep the continuity")


def test_output_limit_is_the_text_plus_1024_within_8196_or_the_max_output_size():
    assert combine_max_tokens(1000, 4096) == 2024
    assert combine_max_tokens(10_000, 4096) == 8196
    assert combine_max_tokens(20_000, 16_000) == 16_000


def test_answers_that_cannot_replace_the_entries():
    def read(answer, finish=None, text=TEXT):
        return read_combined(
            answer, text=text, tokens=count_tokens(text), finish_reason=finish, count=count_tokens
        )

    assert read("The caravan crossed.") == "The caravan crossed."
    assert isinstance(read("The caravan crossed.", "length"), Refused)
    assert isinstance(read("   "), Refused)
    assert isinstance(read("<think>hm</think>"), Refused)
    assert isinstance(read(TEXT + " More."), Refused)  # not shorter
    assert "added a macro" in read("{{char}} crossed.").reason
    assert read("{{char}} crossed.", text="{{char}} " + TEXT) == "{{char}} crossed."


def test_the_key_changes_with_an_entry_the_helper_or_the_prompt():
    a = [EntryText(1, "one", 1), EntryText(2, "two", 1)]
    key = continuity_key(a, "h", "p")
    assert key == continuity_key(list(a), "h", "p")
    assert key != continuity_key([a[0], EntryText(2, "two!", 1)], "h", "p")
    assert key != continuity_key(a, "h2", "p") != continuity_key(a, "h", "p2")

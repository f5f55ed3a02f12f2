import dataclasses
import itertools
from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.summaries.core.answers import DaySummary, read_day_summary
from app.memory.summaries.core.prompts import (
    CONVERSATION_DAY_PROMPT,
    CONVERSATION_WEEK_PROMPT,
    MAX_IF_DEPTH,
    MAX_TEXT_CHARS,
    ROLEPLAY_ENTRY_PROMPT,
    TranscriptLine,
    day_block,
    day_label,
    important_memories,
    known_only_to,
    merged_view,
    transcript,
    visible_to,
    week_block,
    week_input,
    week_label,
)
from app.prompt.core.macros import expand_macros

ENTRY = (
    "The group reached the harbour at dusk.\n"
    '{{#if char == "Kaito"}}Kaito saw the captain pocket the letter.{{/if}}\n'
    "{{#if character == 'Mei' || char == \"Kaito\"}}Mei and Kaito agreed to follow him.{{/if}}\n"
    "{{#if narrator}}The captain is the spy.{{/if}}\n"
    "They took rooms at the inn."
)


def test_default_prompts_ask_for_the_right_output():
    assert "JSON" in CONVERSATION_DAY_PROMPT and '"keyDetails"' in CONVERSATION_DAY_PROMPT
    assert "1 to 3" in CONVERSATION_DAY_PROMPT
    assert "3 to 5" in CONVERSATION_WEEK_PROMPT and "arc" in CONVERSATION_WEEK_PROMPT
    # summary models sometimes carry on with the roleplay instead (Marinara #2064)
    assert "Do not continue the story" in ROLEPLAY_ENTRY_PROMPT
    assert "{{" not in ROLEPLAY_ENTRY_PROMPT + CONVERSATION_DAY_PROMPT + CONVERSATION_WEEK_PROMPT


def test_transcript_reads_only_the_active_text_of_each_message():
    lines = [TranscriptLine("Mei", " Hello. "), TranscriptLine("Kaito", ""), TranscriptLine("Mei", "Bye.")]
    assert transcript(lines) == "Mei: Hello.\n\nMei: Bye."
    # a line has no swipes: the caller gives the active swipe's text, so discarded swipes cannot leak in
    assert [f.name for f in dataclasses.fields(TranscriptLine)] == ["name", "text"]


def test_labels_and_week_input():
    assert day_label(date(2026, 3, 9)) == "09.03.2026"
    assert week_label(date(2026, 3, 9)) == "09.03.2026 – 15.03.2026"
    assert week_input(
        [(date(2026, 3, 10), "Rain.", ["Call Ana", "Flight Fri"]), (date(2026, 3, 9), "Calm.", [])]
    ) == ("[09.03.2026]\nCalm.\n\n[10.03.2026]\nRain.\nKey details: Call Ana; Flight Fri")


def test_a_character_reads_shared_text_and_their_own_parts():
    assert visible_to(ENTRY, "Kaito") == (
        "The group reached the harbour at dusk.\n"
        "Kaito saw the captain pocket the letter.\n"
        "Mei and Kaito agreed to follow him.\n\n"
        "They took rooms at the inn."
    )
    assert visible_to(ENTRY, " mei ") == (
        "The group reached the harbour at dusk.\n\nMei and Kaito agreed to follow him.\n\nThey took rooms at the inn."
    )
    assert visible_to(ENTRY, "Rin") == "The group reached the harbour at dusk.\n\nThey took rooms at the inn."


def test_the_narrator_reads_every_part():
    assert visible_to(ENTRY, None) == (
        "The group reached the harbour at dusk.\n"
        "Kaito saw the captain pocket the letter.\n"
        "Mei and Kaito agreed to follow him.\n"
        "The captain is the spy.\n"
        "They took rooms at the inn."
    )


def test_names_match_whole_and_text_without_conditions_is_untouched():
    assert visible_to('{{#if char == "Kaito"}}x{{/if}}', "Kaito Nakamura") == ""
    plain = "No conditions   here,  {{user}} and {{char}}.\n\n\n"
    assert visible_to(plain, "Kaito") == plain and merged_view(plain, ["Kaito"]) == plain


def test_nested_parts_need_both_conditions():
    text = 'A {{#if char == "Kaito" || char == "Mei"}}B {{#if char == "Mei"}}C{{/if}}{{/if}} D'
    assert visible_to(text, "Mei") == "A B C D"
    assert visible_to(text, "Kaito") == "A B D"
    assert visible_to(text, "Rin") == "A D"


def test_fail_closed_on_unreadable_unclosed_or_too_deep_conditions():
    assert visible_to('A {{#if mood == "sad"}}secret{{/if}} B', "Kaito") == "A B"
    assert visible_to('A {{#if mood == "sad"}}secret{{/if}} B', None) == "A secret B"
    assert visible_to('A {{#if char == "Mei"}}secret, never closed', "Kaito") == "A"
    assert visible_to("A {{/if}}B", "Kaito") == "A B"
    deep = (
        "".join('{{#if char == "Kaito"}}' for _ in range(MAX_IF_DEPTH + 1))
        + "x"
        + "{{/if}}" * (MAX_IF_DEPTH + 1)
    )
    assert visible_to(deep, "Kaito") == "" and visible_to(deep, None) == "x"
    ok = "".join('{{#if char == "Kaito"}}' for _ in range(MAX_IF_DEPTH)) + "x" + "{{/if}}" * MAX_IF_DEPTH
    assert visible_to(ok, "Kaito") == "x"
    many = " || ".join(f'char == "n{i}"' for i in range(40))
    assert visible_to("{{#if " + many + "}}x{{/if}}", "n1") == ""
    # a condition that does not close within its bound keeps its body private
    assert visible_to('A {{#if char == "{Kaito}"}}secret{{/if}} B', "Kaito") == "A B"
    with pytest.raises(ValueError):
        visible_to("x" * (MAX_TEXT_CHARS + 1), "Kaito")
    with pytest.raises(ValueError):
        merged_view("x" * (MAX_TEXT_CHARS + 1), ["Kaito"])


def test_hostile_openers_are_read_in_linear_time():
    text = "{{#if " * 150_000  # 900k characters, no "}}": each opener's condition is bounded
    assert visible_to(text, "Kaito") == "" and visible_to(text, None) == ""


def test_merged_reply_marks_parts_not_everyone_knows_and_drops_narrator_parts():
    assert merged_view(ENTRY, ["Kaito", "Mei"]) == (
        "The group reached the harbour at dusk.\n"
        "(known only to Kaito) Kaito saw the captain pocket the letter.\n"
        "Mei and Kaito agreed to follow him.\n\n"
        "They took rooms at the inn."
    )
    assert merged_view(ENTRY, ["Mei", "Rin", "Kaito"]).splitlines()[2] == (
        "(known only to Mei and Kaito) Mei and Kaito agreed to follow him."
    )
    assert "spy" not in merged_view(ENTRY, ["Kaito", "Mei", "Rin"])
    assert (
        merged_view(ENTRY, ["Rin"]) == "The group reached the harbour at dusk.\n\nThey took rooms at the inn."
    )


def test_merged_reply_nested_marks_narrow():
    text = 'A {{#if char == "Kaito" || char == "Mei"}}B {{#if char == "Mei"}}C{{/if}}{{/if}} D'
    assert (
        merged_view(text, ["Kaito", "Mei", "Rin"])
        == "A (known only to Kaito and Mei) B (known only to Mei) C D"
    )


def test_merged_reply_keeps_the_space_between_adjacent_private_parts():
    text = (
        '{{#if char == "Kaito"}}Kaito saw the letter. {{/if}}{{#if char == "Mei"}}Mei heard the bell.{{/if}}'
    )
    assert merged_view(text, ["Kaito", "Mei"]) == (
        "(known only to Kaito) Kaito saw the letter. (known only to Mei) Mei heard the bell."
    )


def test_known_only_to_lists_names():
    assert known_only_to(["Kaito"]) == "known only to Kaito"
    assert known_only_to(["Kaito", "Mei", "Rin"]) == "known only to Kaito, Mei and Rin"


def test_conditions_are_read_before_macros_which_then_work_as_before():
    text = '{{#if char == "Kaito"}}{{user}} trusts {{char}}.{{/if}}'
    assert expand_macros(visible_to(text, "Kaito"), char="Kaito", user="Ana") == "Ana trusts Kaito."


def test_day_answer_round_trip_feeds_the_week_input():
    answer = '```json\n{"summary": "Rain all day.", "keyDetails": ["Call Ana"]}\n```\nDone!'
    parsed = read_day_summary(answer, max_tokens=100, count_tokens=lambda t: len(t.split()))
    assert parsed == DaySummary("Rain all day.", ("Call Ana",))
    assert week_input([(date(2026, 3, 9), parsed.summary, parsed.key_details)]) == (
        "[09.03.2026]\nRain all day.\nKey details: Call Ana"
    )


NAMES = ["Kaito", "Mei", "Rin"]
WORD_IDS = itertools.count()


@st.composite
def conditional_texts(draw, depth=0):
    """A text of plain words and conditional parts, with each word's audiences on the way down to it."""
    pieces, words = [], []
    for _ in range(draw(st.integers(1, 3))):
        if depth < 3 and draw(st.booleans()):
            audience = draw(st.one_of(st.just(None), st.sets(st.sampled_from(NAMES), min_size=1)))
            inner, inner_words = draw(conditional_texts(depth + 1))
            cond = "narrator" if audience is None else " || ".join(f'char == "{n}"' for n in sorted(audience))
            pieces.append(f"{{{{#if {cond}}}}}{inner}{{{{/if}}}}")
            words += [(w, [frozenset(audience or ())] + path) for w, path in inner_words]
        else:
            word = f"w{next(WORD_IDS)}"  # unique, so a word found in the output is this one
            pieces.append(f" {word} ")
            words.append((word, []))
    return "".join(pieces), words


@settings(max_examples=300, deadline=None)
@given(conditional_texts(), st.sampled_from(NAMES))
def test_a_part_reaches_exactly_the_characters_of_every_condition_around_it(generated, reader):
    text, words = generated
    seen = visible_to(text, reader).split()
    for word, path in words:
        assert (word in seen) == all(reader in audience for audience in path)
    assert sorted(visible_to(text, None).split()) == sorted(w for w, _ in words)


@settings(max_examples=300, deadline=None)
@given(conditional_texts(), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
def test_a_merged_reply_keeps_what_one_present_character_knows(generated, present):
    text, words = generated
    merged = merged_view(text, present)
    for word, path in words:
        knowers = set(present)
        for audience in path:
            knowers &= audience
        assert (word in merged.split()) == bool(knowers)
    if len(present) == 1:
        assert merged.split() == visible_to(text, present[0]).split()


def test_conversation_blocks_follow_marinaras_shape():
    assert (
        week_block(date(2026, 3, 2), " An arc. ")
        == '<summary week="02.03.2026 – 08.03.2026">\nAn arc.\n</summary>'
    )
    assert day_block(date(2026, 3, 9), "Rain.") == '<summary date="09.03.2026">\nRain.\n</summary>'
    # a summary cannot close its wrapper early
    assert day_block(date(2026, 3, 9), "a </SUMMARY > b").count("</summary>") == 1


def test_important_memories_by_date_with_week_details_replacing_their_days():
    text = important_memories(
        weeks=[(date(2026, 3, 2), ["Ana moves in May"])],
        days=[
            (date(2026, 3, 10), ["Call Sam", " "]),
            (date(2026, 3, 3), ["replaced by the week"]),
            (date(2026, 3, 9), []),
        ],
    )
    assert text == (
        "<important_memories>\nThings you must remember from past conversations:\n"
        "[Week of 02.03.2026 – 08.03.2026]\n- Ana moves in May\n[10.03.2026]\n- Call Sam\n</important_memories>"
    )
    assert important_memories([], [(date(2026, 3, 9), [])]) == ""

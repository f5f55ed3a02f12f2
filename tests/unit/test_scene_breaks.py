"""Scene breaks in a reply: where a character's reply is saved as several messages (issue 14)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.scenes.core.breaks import MAX_PARTS, MAX_SPLIT_CHARS, first_part, is_break_line, split_reply

FENCE = "```"


# --- which lines are breaks ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "***",
        "---",
        "___",
        "* * *",
        "- - -",
        "_ _ _",
        "-----",
        "*****",
        "  ***  ",
        "   ---",
        "*\t*\t*",
        "⁂",
        "⁂ ⁂ ⁂",
        "<hr>",
        "<HR />",
        "***\r\n",
        "---\n",
    ],
)
def test_break_lines(line):
    assert is_break_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "",
        "   ",
        "**",
        "--",
        "*-*",
        "**bold**",
        "--- end",
        "~~~",
        "===",
        "###",
        "• • •",
        "◇",
        "| --- | --- |",
        "    ***",
        "\t***",
        "> ***",
        "- ***",
        "***a",
        "<hr> after",
        "<hr",
    ],
)
def test_not_break_lines(line):
    assert not is_break_line(line)


# --- splitting ----------------------------------------------------------------------------------


def test_no_break_is_one_part_unchanged():
    text = "  She smiled.\n\nHe left.  \n"
    assert split_reply(text) == [text]


def test_empty_and_whitespace_replies_are_one_part_unchanged():
    assert split_reply("") == [""]
    assert split_reply(" \n\n ") == [" \n\n "]


def test_plain_split_into_three_with_each_break_on_top_of_the_part_after_it():
    text = "The tavern emptied.\n\n***\n\nMorning came.\n\n---\n\nElsewhere, Mira woke.\n"
    assert split_reply(text) == [
        "The tavern emptied.",
        "***\n\nMorning came.",
        "---\n\nElsewhere, Mira woke.",
    ]


def test_every_kind_of_break_splits():
    for brk in ["___", "* * *", "- - -", "⁂", "  ***  ", "-----", "<hr/>"]:
        assert split_reply(f"A\n\n{brk}\n\nB") == ["A", f"{brk}\n\nB"], (
            brk
        )  # the break line is kept as written


def test_break_at_the_start_stays_on_top_of_the_first_part():
    text = "***\n\nThe road north.\n\n***\n\nThe gate."
    assert split_reply(text) == ["***\n\nThe road north.", "***\n\nThe gate."]
    assert split_reply("\n\n***\nOnly one scene.") == ["\n\n***\nOnly one scene."]


def test_break_at_the_end_stays_at_the_bottom_and_makes_no_empty_message():
    assert split_reply("One scene.\n\n***\n") == ["One scene.\n\n***\n"]
    assert split_reply("A\n***\nB\n\n---\n  \n") == ["A", "***\nB\n\n---"]


def test_consecutive_breaks_stay_together_on_top_of_the_next_part():
    assert split_reply("A\n\n***\n\n---\n\nB") == ["A", "***\n\n---\n\nB"]


def test_a_reply_of_only_breaks_is_one_part():
    text = "***\n---\n\n⁂\n"
    assert split_reply(text) == [text]


def test_no_part_is_empty_or_only_whitespace():
    text = "\n \n***\n\t\nA\n \n---\n \n \n***\n\nB\n\n***\n \n"
    parts = split_reply(text)
    assert parts == ["***\n\t\nA", "---\n \n \n***\n\nB\n\n***"]
    assert all(p.strip() and p == p.rstrip() for p in parts)


def test_windows_line_endings_are_kept_and_split_like_newlines():
    text = "A\r\n\r\n***\r\n\r\nB\r\n---\r\nC\r\n"
    assert split_reply(text) == ["A", "***\r\n\r\nB", "---\r\nC"]
    assert split_reply("A\r***\rB") == ["A", "***\rB"]


def test_parts_hold_all_the_text():
    text = "Intro.\n\n***\nMiddle *with* emphasis.\n- a list\n\n---\n\nEnd."
    assert "\n\n".join(split_reply(text)).replace("\n", "") == text.replace("\n", "")


# --- setext headings ----------------------------------------------------------------------------


def test_dashes_directly_under_text_are_a_break_not_a_heading():
    assert split_reply("She closed the door.\n---\nMorning came.") == [
        "She closed the door.",
        "---\nMorning came.",
    ]


def test_equals_under_text_is_a_heading_underline_not_a_break():
    text = "Chapter Two\n===\nMorning came."
    assert split_reply(text) == [text]


# --- code ---------------------------------------------------------------------------------------


def test_break_inside_a_code_fence_does_not_count():
    text = f"He typed:\n{FENCE}\n***\n---\n{FENCE}\nThen he left.\n\n***\n\nNight."
    assert split_reply(text) == [f"He typed:\n{FENCE}\n***\n---\n{FENCE}\nThen he left.", "***\n\nNight."]


def test_tilde_fence_and_a_fence_with_an_info_string():
    text = "A\n~~~\n***\n~~~\nB\n```python\n---\n```\nC"
    assert split_reply(text) == [text]


def test_a_longer_fence_holds_shorter_fence_lines():
    text = "A\n````md\n```\n***\n```\n````\nB\n***\nC"
    assert split_reply(text) == ["A\n````md\n```\n***\n```\n````\nB", "***\nC"]


def test_a_fence_closes_only_with_its_own_character():
    text = "A\n```\n~~~\n***\nB"
    assert split_reply(text) == [text]


def test_an_unclosed_fence_runs_to_the_end():
    text = "A\n\n***\n\nB\n```\ncode\n***\nmore\n\n---\n\nC"
    assert split_reply(text) == ["A", "***\n\nB\n```\ncode\n***\nmore\n\n---\n\nC"]


def test_an_indented_fence_inside_a_list_item_counts_as_code():
    text = "- item\n    ```\n***\n    ```\nB"
    assert split_reply(text) == [text]


def test_inline_backticks_are_not_a_fence():
    assert split_reply("A ``` b\n***\nC") == ["A ``` b", "***\nC"]
    assert split_reply("``` `x` ```\n***\nC") == ["``` `x` ```", "***\nC"]


def test_indented_break_is_code_not_a_break():
    text = "A\n\n    ***\n\nB"
    assert split_reply(text) == [text]


# --- HTML ---------------------------------------------------------------------------------------


def test_break_inside_details_with_blank_lines_does_not_count():
    text = "<details>\n<summary>Status</summary>\n\nHP 10\n\n---\n\nMP 4\n</details>\n\n---\n\nLater."
    assert split_reply(text) == [
        "<details>\n<summary>Status</summary>\n\nHP 10\n\n---\n\nMP 4\n</details>",
        "---\n\nLater.",
    ]


def test_nested_tags_of_the_same_name_close_at_their_own_level():
    text = "<div>\n<div>\ninner\n</div>\n***\n</div>\nA\n***\nB"
    assert split_reply(text) == ["<div>\n<div>\ninner\n</div>\n***\n</div>\nA", "***\nB"]


def test_an_unclosed_html_element_runs_to_the_end():
    text = "A\n***\nB\n<details>\n<summary>x</summary>\n---\nC"
    assert split_reply(text) == ["A", "***\nB\n<details>\n<summary>x</summary>\n---\nC"]


def test_a_tag_closed_on_its_own_line_or_void_opens_no_block():
    text = "<span>A</span>\n***\n<br>\n***\n<img src='x.png'>\n***\n<div/>\n***\nB"
    assert split_reply(text) == [
        "<span>A</span>",
        "***\n<br>",
        "***\n<img src='x.png'>",
        "***\n<div/>",
        "***\nB",
    ]


def test_an_unknown_tag_counts_only_when_it_closes():
    assert split_reply("<sigh> Fine.\n---\nB") == ["<sigh> Fine.", "---\nB"]
    text = "<status>\nHP 10\n---\nMP 4\n</status>\nA\n***\nB"
    assert split_reply(text) == ["<status>\nHP 10\n---\nMP 4\n</status>\nA", "***\nB"]


def test_html_comment_hides_breaks():
    text = "A\n<!-- note\n***\n-->\nB"
    assert split_reply(text) == [text]
    assert split_reply("A\n<!-- one line -->\n***\nB") == ["A\n<!-- one line -->", "***\nB"]


# --- reasoning ----------------------------------------------------------------------------------


def test_reasoning_before_the_first_break_goes_with_the_first_part_and_is_never_a_part():
    text = "<think>\nplan\n---\nmore\n</think>\n***\nThe story."
    assert split_reply(text) == [text]
    text = "<think>plan</think>\nA\n***\nB"
    assert split_reply(text) == ["<think>plan</think>\nA", "***\nB"]


def test_reasoning_closer_without_opener_marks_reasoning_up_to_it():
    text = "plan\n***\nstill thinking\n</think>\n***\nThe story."
    assert split_reply(text) == [text]
    assert split_reply("plan\n</think>\nA\n***\nB") == ["plan\n</think>\nA", "***\nB"]


# --- limits -------------------------------------------------------------------------------------


def test_past_the_part_limit_the_rest_stays_in_the_last_part():
    text = "\n***\n".join(f"Scene {n}." for n in range(30))
    parts = split_reply(text)
    assert len(parts) == MAX_PARTS
    assert parts[1] == "***\nScene 1."
    assert parts[-1] == "***\n" + "\n***\n".join(f"Scene {n}." for n in range(MAX_PARTS - 1, 30))
    assert split_reply(text, max_parts=3)[2].startswith("***\nScene 2.\n***\nScene 3.")
    assert split_reply(text, max_parts=1) == [text]


def test_breaks_past_the_size_limit_stay_in_the_last_part():
    filler = ("word " * 20 + "\n") * (MAX_SPLIT_CHARS // 100 + 10)
    text = "A\n***\n" + filler + "***\nB"
    parts = split_reply(text)
    assert len(parts) == 2 and parts[1].endswith("***\nB")


def test_first_part_is_what_a_regenerated_earlier_part_keeps():
    assert first_part("New take.\n\n***\n\nA scene it should not have.\n---\nMore.") == "New take."
    assert first_part("***\nNew take.") == "***\nNew take."
    assert first_part("No break.") == "No break."


def test_hostile_input_stays_linear():
    # Many unclosed unknown tags, many `<a ` without `>`, many fence-like and break lines.
    text = "<sigh>\n" * 5_000 + "<a " * 5_000 + "\n" + "<div>x</div>\n" * 5_000 + "***\nx\n" * 10_000
    assert len(text) < MAX_SPLIT_CHARS
    # No timed assertion (timings belong in bench/): a scan that went back over the text for each
    # tag or fence would run into the suite's per-test timeout here.
    parts = split_reply(text)
    assert len(parts) == MAX_PARTS


def test_the_size_limit_counts_where_a_break_line_starts():
    def text_with_break_at(offset: int) -> str:
        head = "A\n" + "x" * (offset - 3) + "\n"
        assert len(head) == offset
        return head + "***\nB"

    assert len(split_reply(text_with_break_at(MAX_SPLIT_CHARS - 1))) == 2
    assert split_reply(text_with_break_at(MAX_SPLIT_CHARS)) == [text_with_break_at(MAX_SPLIT_CHARS)]


_PIECES = st.sampled_from(
    [
        "A",
        "text",
        " ",
        "\n",
        "\r\n",
        "\n\n",
        "***",
        "---",
        "* * *",
        "⁂",
        "```",
        "~~~",
        "````",
        "<details>",
        "</details>",
        "<div>",
        "</div>",
        "<think>",
        "</think>",
        "<!--",
        "-->",
        "<sigh>",
        "    ",
        "<br>",
        "===",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=40), st.integers(min_value=1, max_value=5))
def test_any_reply_keeps_its_text_in_order_in_non_empty_parts(pieces, max_parts):
    text = "".join(pieces)
    parts = split_reply(text, max_parts=max_parts)
    assert 1 <= len(parts) <= max_parts
    assert "".join("".join(parts).split()) == "".join(text.split())
    if len(parts) > 1:
        assert all(p.strip() and p == p.rstrip() for p in parts)
        assert all(is_break_line(p.lstrip("\r\n").splitlines()[0]) for p in parts[1:])

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.summaries.core.answers import (
    MAX_KEY_DETAIL_CHARS,
    MAX_KEY_DETAILS,
    DaySummary,
    Failure,
    ProseSummary,
    key_details,
    read_day_summary,
    read_prose_summary,
    request_max_tokens,
    retry_delay,
    strip_thinking,
)


def words(text):
    return len(text.split())


def prose(text, **kw):
    kw.setdefault("max_tokens", 4096)
    return read_prose_summary(text, count_tokens=words, **kw)


def day(text, **kw):
    kw.setdefault("max_tokens", 4096)
    return read_day_summary(text, count_tokens=words, **kw)


# Thinking ------------------------------------------------------------------------------------------


def test_think_blocks_are_stripped_wherever_they_are():
    assert strip_thinking("<think>plan it</think>\nThe recap.").answer == "The recap."
    assert strip_thinking("<THINKING>\nhmm\n</THINKING> A. <reasoning>x</reasoning>B.").answer == "A. B."
    assert strip_thinking("The recap.").had_thinking is False


def test_a_closer_without_opener_drops_what_came_before_it():
    # reasoning templates put "<think>" in the prompt, so the answer starts inside it
    stripped = strip_thinking("Let me think about the scene...\n</think>\n\nMira found the key.")
    assert stripped == strip_thinking("<think>x</think>Mira found the key.")
    assert stripped.answer == "Mira found the key." and stripped.had_thinking


def test_an_unclosed_think_is_all_thinking():
    assert strip_thinking("<think>The user wants a summary. First I").answer == ""
    assert strip_thinking("The recap. <think>wait").answer == "The recap."


def test_only_thinking_asks_for_a_larger_budget():
    # Marinara #6470: a reasoning model spent the whole budget thinking and returned nothing
    result = prose("<think>" + "Let me consider each message. " * 200, finish_reason="length")
    assert result == Failure("only_thinking", result.reason, retry_larger=True)
    assert "Only thinking" in result.reason


def test_reasoning_returned_separately_with_an_empty_answer_is_only_thinking():
    result = day("", reasoning="The day was about...", finish_reason="stop")
    assert isinstance(result, Failure) and result.kind == "only_thinking" and result.retry_larger


def test_an_empty_answer_is_a_failure_without_a_larger_budget():
    for text in ("", "   \n", "<think></think>", "```\n```"):
        result = prose(text)
        assert isinstance(result, Failure), text
    assert prose("").kind == "empty" and not prose("").retry_larger
    assert prose("<think></think>").kind == "only_thinking"


def test_request_budget_leaves_room_for_reasoning_then_doubles_once():
    assert request_max_tokens(4096, 0) == 8196
    assert request_max_tokens(4096, 1) == 16392
    assert request_max_tokens(4096, 2) is None
    assert request_max_tokens(32768, 0) == 32768
    assert request_max_tokens(32768, 1) == 65536


# Prose (Roleplay entries) --------------------------------------------------------------------------


def test_prose_answer_is_the_summary():
    assert prose("  Mira found the key and hid it.\n") == ProseSummary("Mira found the key and hid it.")
    assert prose("<think>ok</think>\n**Summary:** Mira left.") == ProseSummary("Mira left.")
    assert prose("```\nMira left.\n```") == ProseSummary("Mira left.")


def test_prose_unwraps_the_older_json_shape():
    assert prose('{"summary": "Mira left the inn."}') == ProseSummary("Mira left the inn.")
    assert prose('```json\n{"summary": "Mira left."}\n```') == ProseSummary("Mira left.")


def test_a_cut_off_prose_answer_is_refused_not_kept():
    result = prose("Mira found the key and then", finish_reason="length")
    assert result == Failure("cut_off", "Cut off (finish_reason=length).", retry_larger=True)
    assert prose("Mira", finish_reason="max_tokens").kind == "cut_off"  # Anthropic's name for it


def test_a_summary_over_the_maximum_output_size_is_refused_with_its_size():
    result = prose("word " * 50, max_tokens=40)
    assert isinstance(result, Failure) and result.kind == "too_long"
    assert "50 tokens" in result.reason and "limit is 40" in result.reason
    assert prose("word " * 40, max_tokens=40) == ProseSummary(("word " * 40).strip())


def test_an_enormous_answer_is_refused_before_parsing():
    result = prose("a" * 400_001, max_tokens=10**9)
    assert isinstance(result, Failure) and result.kind == "too_long"


# Day summaries (Conversation) ----------------------------------------------------------------------


def test_plain_json_day_summary():
    assert day(
        '{"summary": "Quiet day.", "keyDetails": ["Promised to call Ana", "Moving in May"]}'
    ) == DaySummary("Quiet day.", ("Promised to call Ana", "Moving in May"))


def test_json_in_a_fence_followed_by_prose():
    answer = (
        "Here is the summary you asked for:\n```json\n"
        '{"summary": "Talked about the trip {again}.", "keyDetails": ["Flight on Friday"]}\n'
        "```\nLet me know if you want changes! {not json}"
    )
    assert day(answer) == DaySummary("Talked about the trip {again}.", ("Flight on Friday",))


def test_json_after_thinking_and_with_trailing_prose_without_fence():
    answer = '<think>{"draft": 1}</think>Sure! {"summary": "A long talk.", "keyDetails": []} Hope this helps.'
    assert day(answer) == DaySummary("A long talk.", ())


def test_an_answer_cut_off_mid_json_is_a_failure():
    answer = '```json\n{"summary": "They argued about the move and then", "keyDetails": ["Ana'
    result = day(answer)
    assert isinstance(result, Failure) and result.kind == "cut_off" and result.retry_larger
    assert day('{"summary": "Fine."}', finish_reason="length").kind == "cut_off"


def test_single_quotes_and_trailing_commas_are_repaired():
    answer = "{'summary': 'It\\'s been a \"good\" day.', 'keyDetails': ['Ana\\'s birthday',],}"
    assert day(answer) == DaySummary('It\'s been a "good" day.', ("Ana's birthday",))


def test_apostrophes_inside_valid_json_are_left_alone():
    assert day('{"summary": "Ana\'s day, {calm}.", "keyDetails": ["it\'s ok"]}') == DaySummary(
        "Ana's day, {calm}.", ("it's ok",)
    )


def test_prose_in_place_of_json_is_not_json():
    result = day("I'm sorry, I can't summarize this conversation.")
    assert result == Failure("not_json", "The answer is not JSON.")
    assert day("{ this is not json at all }").kind == "not_json"


def test_missing_or_blank_summary_fails():
    assert day('{"keyDetails": ["a"]}').kind == "missing_summary"
    assert day('{"summary": "  ", "keyDetails": []}').kind == "missing_summary"
    assert day('{"summary": 42}').kind == "missing_summary"
    assert day('["summary"]').kind == "not_json"


def test_field_names_are_matched_loosely_and_lists_of_sentences_join():
    result = day('{"Summary": ["Rain.", "Tea."], "key_details": "- Ana is back\\n- Call Sam\\n"}')
    assert result == DaySummary("Rain. Tea.", ("Ana is back", "Call Sam"))


def test_key_details_are_coerced_deduplicated_and_capped():
    assert key_details(["  a ", 3, 2.5, None, {"x": 1}, ["y"], True, "A", "", "1. numbered"]) == (
        "a",
        "3",
        "2.5",
        "numbered",
    )
    assert key_details("x") == ("x",) and key_details(None) == () and key_details(7) == ()
    many = key_details([f"detail {i}" for i in range(100)])
    assert len(many) == MAX_KEY_DETAILS and many[-1] == f"detail {MAX_KEY_DETAILS - 1}"
    (long,) = key_details(["word " * 400])
    assert len(long) <= MAX_KEY_DETAIL_CHARS and long.endswith("word…")


def test_too_deep_json_is_refused_without_recursing():
    result = day("{" + '"a":[' * 5000 + "]" * 5000 + "}")
    assert isinstance(result, Failure) and result.kind == "not_json"


def test_day_summary_over_the_limit_is_refused():
    result = day('{"summary": "' + "word " * 30 + '", "keyDetails": []}', max_tokens=10)
    assert isinstance(result, Failure) and result.kind == "too_long"


def test_failure_reasons_never_quote_the_model():
    for text in ("SELECT * FROM secrets", '{"summary": ""} DROP TABLE', "Traceback (most recent call last)"):
        result = day(text)
        assert isinstance(result, Failure) and text not in result.reason


def test_hostile_answers_are_read_in_linear_time():
    # each would take minutes with a backtracking scan per opener; the budget check is not the point
    assert strip_thinking("<think>" * 50_000).answer == ""
    assert day("{" + '"a": "' * 60_000).kind == "cut_off"
    assert day("```" * 100_000).kind == "not_json"
    assert day("'" + "{" * 100_000).kind == "not_json"


def test_braces_in_prose_before_the_object_are_skipped():
    answer = 'Using the {format} you gave: {"summary": "Tea at noon.", "keyDetails": []}'
    assert day(answer) == DaySummary("Tea at noon.", ())
    assert day('{"mood": "calm"} and nothing else').kind == "missing_summary"


pieces = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<thinking>",
        "```json\n",
        "```",
        "{",
        "}",
        "[",
        "]",
        '"',
        "'",
        ",",
        ":",
        "\n",
        '"summary"',
        '"keyDetails"',
        "Sure!",
        " text ",
        "\\",
    ]
)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.one_of(pieces, st.text(max_size=5)), max_size=40).map("".join),
    st.sampled_from([None, "stop", "length"]),
)
def test_any_answer_gives_a_complete_result_or_a_failure(text, finish):
    for result in (prose(text, finish_reason=finish), day(text, finish_reason=finish)):
        assert isinstance(result, Failure | ProseSummary | DaySummary)
        if finish == "length":
            assert isinstance(result, Failure)
        if isinstance(result, DaySummary):
            assert result.summary.strip() and len(result.key_details) <= MAX_KEY_DETAILS
        if isinstance(result, ProseSummary):
            assert result.text.strip() and "<think>" not in result.text.lower()


def test_failed_summaries_are_retried_with_backoff_and_never_given_up():
    assert [retry_delay(n) for n in (1, 2, 3, 4, 5, 6, 100)] == [
        timedelta(minutes=1),
        timedelta(minutes=5),
        timedelta(minutes=30),
        timedelta(hours=2),
        timedelta(hours=12),
        timedelta(hours=12),
        timedelta(hours=12),
    ]
    assert retry_delay(0) == timedelta(minutes=1)

"""A JSON answer that never closes was cut off, whatever `finish_reason` says (issue 21, item 8): every
reader of a summary answer reports it as cut off with `retry_larger`, so the caller asks again with
twice the room, instead of "JSON with no summary text in it"."""

import json

from hypothesis import given
from hypothesis import strategies as st

from app.memory.summaries.core.answers import (
    DaySummary,
    Failure,
    ProseSummary,
    find_object,
    prose_problem,
    read_day_summary,
    read_prose_summary,
)


def words(text):
    return len(text.split())


def prose(text, finish_reason="stop"):
    return read_prose_summary(text, max_tokens=4096, count_tokens=words, finish_reason=finish_reason)


def day(text, finish_reason="stop"):
    return read_day_summary(text, max_tokens=4096, count_tokens=words, finish_reason=finish_reason)


def cut_off(result) -> bool:
    return isinstance(result, Failure) and result.kind == "cut_off" and result.retry_larger


RECAP = "Mira led Kael through the flooded crypt beneath Vell and found the brass key."


def test_a_roleplay_answer_wrapped_as_json_and_cut_mid_string_is_cut_off():
    for text in (
        '{"summary": "Mira led Kael through the flooded cry',
        '{"summary": "Mira led Kael through the flooded crypt.',  # the closing quote and brace are missing
        '{"summary": "Mira led Kael through the flooded crypt."',
        '```json\n{"summary": "Mira led Kael through',  # the fence never closes either
        'Here is the summary:\n{"summary": "Mira led Kael',  # prose before it
        "{'summary': 'Mira led Kael",  # single quotes, as a model may write them
        "{",
    ):
        assert cut_off(prose(text)), text
        assert cut_off(prose(text, finish_reason=None)), text


def test_a_closed_json_answer_is_still_unwrapped():
    assert prose(json.dumps({"summary": RECAP})) == ProseSummary(RECAP)
    assert prose(f"Here it is: {json.dumps({'summary': RECAP})}\nHope that helps.") == ProseSummary(RECAP)
    assert prose(f"```json\n{json.dumps({'summary': RECAP})}\n```") == ProseSummary(RECAP)


def test_prose_with_braces_that_is_not_the_json_shape_stays_prose():
    assert prose("{{user}} and Mira reached Vell.") == ProseSummary("{{user}} and Mira reached Vell.")
    assert prose("Mira {quietly} reached Vell; {Kael waited") == ProseSummary(
        "Mira {quietly} reached Vell; {Kael waited"
    )


def test_a_complete_object_without_a_summary_is_not_mistaken_for_a_cut():
    result = prose('{"foo": 1}')
    assert isinstance(result, ProseSummary) and prose_problem(result.text) is not None


def test_a_day_answer_cut_mid_string_is_cut_off_even_after_a_complete_object():
    assert cut_off(day('{"summary": "They met at the caf'))
    assert cut_off(day('{"summary": "They met.", "keyDetails": ["Mira likes te'))
    # a complete object without the summary, then the real one cut short: the cut one was the answer
    assert cut_off(day('{"note": "here it comes"} {"summary": "They met at the caf'))
    assert cut_off(find_object('{"ends": [12, 4', "ends"))  # the scene check reads through find_object too


# Text without "<": a "</think>" inside the summary would be read as the end of reasoning (another rule).
TEXT = st.text(alphabet=st.characters(blacklist_characters="<"), min_size=1, max_size=200)


@given(TEXT, st.data())
def test_every_cut_of_a_json_roleplay_answer_is_retried_larger(summary, data):
    whole = json.dumps({"summary": summary})
    cut = data.draw(st.integers(min_value=1, max_value=len(whole) - 1))
    assert cut_off(prose(whole[:cut])), whole[:cut]


@given(
    TEXT,
    st.lists(TEXT, max_size=4),
    st.data(),
)
def test_every_cut_of_a_json_day_answer_is_retried_larger(summary, details, data):
    whole = json.dumps({"summary": summary, "keyDetails": details})
    cut = data.draw(st.integers(min_value=1, max_value=len(whole) - 1))
    assert cut_off(day(whole[:cut])), whole[:cut]


@given(TEXT.filter(lambda s: s.strip() and not s.lstrip().lower().startswith(("summary", "recap", "**"))))
def test_the_whole_answer_is_read(summary):
    assert prose(json.dumps({"summary": summary})) == ProseSummary(summary.strip())
    got = day(json.dumps({"summary": summary, "keyDetails": []}))
    assert got == DaySummary(summary.strip(), ())

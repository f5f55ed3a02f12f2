"""Stop strings kept on Sugo's side (app/connections/core/stops.py): literal cases, and every way a
stream may cut a reply."""

import itertools

import pytest

from app.connections.core.stops import StopScanner, find_stop


def streamed(deltas, stops) -> tuple[list[str], bool]:
    scanner = StopScanner(stops)
    shown = [scanner.feed(d) for d in deltas]
    if not scanner.stopped:
        shown.append(scanner.finish())
    return shown, scanner.stopped


def test_the_reply_ends_where_the_first_stop_string_begins():
    assert find_stop("Hi.\nUser: more", ["\nUser:"]) == 3
    assert find_stop("Hi.", ["\nUser:"]) is None
    assert find_stop("anything", []) is None
    assert find_stop("anything", [""]) is None  # an empty stop string stops nothing


def test_the_stop_string_that_completes_first_wins_and_of_two_the_longer():
    # "c" completes at the third character, "abcdef" only at the sixth: a backend stops at "c".
    assert find_stop("abcdef", ["abcdef", "c"]) == 2
    # Both end at the same character: the one starting earlier takes its newline with it.
    assert find_stop("Hi.\nUser:", ["User:", "\nUser:"]) == 3


def test_text_that_cannot_begin_a_stop_string_is_shown_at_once():
    scanner = StopScanner(["</s>"])
    assert scanner.feed("Hello") == "Hello"
    assert scanner.feed(" there<") == " there"  # "<" may begin "</s>"
    assert scanner.feed("b>") == "<b>"  # it did not
    assert scanner.finish() == ""


def test_a_stop_string_cut_across_deltas_is_never_shown():
    shown, stopped = streamed(["Hi.\nUs", "er: more"], ["\nUser:"])
    assert shown == ["Hi.", ""] and stopped


def test_a_held_end_that_never_became_a_stop_string_comes_back_at_the_finish():
    shown, stopped = streamed(["Hi.\nUs"], ["\nUser:"])
    assert shown == ["Hi.", "\nUs"] and not stopped


def test_after_the_stop_nothing_more_is_shown():
    scanner = StopScanner(["END"])
    assert scanner.feed("aEND") == "a"
    assert scanner.feed("more") == ""
    assert scanner.stopped


@pytest.mark.parametrize(
    ("text", "stops"),
    [
        ("Hello.\nUser: and more", ["\nUser:"]),
        ("a<|im_end|>b", ["<|im_end|>", "\n"]),
        ("abcabcabd tail", ["abcabd"]),  # the stop string begins inside an earlier near-match
        ("no stop here at all", ["\nUser:", "</s>"]),
        ("x</s", ["</s>"]),  # ends on an unfinished stop string
    ],
)
def test_every_way_of_cutting_the_stream_gives_the_whole_texts_answer(text, stops):
    cut = find_stop(text, stops)
    expected = text if cut is None else text[:cut]
    for a, b in itertools.combinations(range(len(text) + 1), 2):
        deltas = [text[:a], text[a:b], text[b:]]
        shown, stopped = streamed(deltas, stops)
        assert "".join(shown) == expected, deltas
        assert stopped == (cut is not None)

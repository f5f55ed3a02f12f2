"""Where a continuation meets the reply it extends."""

from app.generation.core.joining import continuation_joint


def test_a_space_between_words():
    assert continuation_joint("He waits", "and") == " "


def test_no_space_when_either_side_has_one_or_punctuation_follows():
    assert continuation_joint("He waits ", "and") == ""
    assert continuation_joint("He waits", " and") == ""
    assert continuation_joint("He waits", "\n\nLater") == ""
    assert continuation_joint("He waits", ", sword raised") == ""
    assert continuation_joint("He waits", "…") == ""
    assert continuation_joint("", "Hello") == ""

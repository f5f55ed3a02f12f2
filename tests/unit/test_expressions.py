"""The expression tag and the word rule (app/characters/core/expressions.py): literal in, literal out."""

from app.characters.core.expressions import (
    EXPRESSIONS,
    art_image,
    expression_of_file_name,
    guess_expression,
    read_expression_tag,
    reply_expression,
    without_expression_tag,
)


def test_sillytaverns_28_names():
    assert len(EXPRESSIONS) == 28 == len(set(EXPRESSIONS))
    assert EXPRESSIONS[0] == "admiration" and EXPRESSIONS[-1] == "neutral"


class TestReadExpressionTag:
    def test_a_tag_at_the_end_is_read_and_stripped(self):
        assert read_expression_tag("She laughs.\n\n[expression: joy]") == ("joy", "She laughs.")

    def test_case_and_spaces_do_not_matter(self):
        assert read_expression_tag("Hm. [ Expression :  ANGER ]") == ("anger", "Hm.")

    def test_anywhere_and_the_last_one_wins(self):
        assert read_expression_tag("[expression: fear] Run!\n\nSafe. [expression: relief]") == (
            "relief",
            "Run!\n\nSafe.",
        )

    def test_an_unknown_name_is_none_and_still_stripped(self):
        assert read_expression_tag("Ok. [expression: smug]") == (None, "Ok.")

    def test_no_tag_gives_the_text_back_as_it_is(self):
        text = "  Brackets [like this] stay.\n\n\n"
        assert read_expression_tag(text) == (None, text)
        assert without_expression_tag(text) is text

    def test_lines_left_empty_close_up(self):
        assert read_expression_tag("One.\n\n[expression: joy]\n\nTwo.") == ("joy", "One.\n\nTwo.")

    def test_a_tag_never_spans_lines_or_runs_on(self):
        text = "[expression: joy\n] and [expression: " + "x" * 100 + "]"
        assert read_expression_tag(text) == (None, text)


class TestGuessExpression:
    def test_words_point_at_an_expression(self):
        assert guess_expression("He glares at you, furious.") == "anger"
        assert guess_expression("Tears run down her face as she sobs.") == "sadness"
        assert guess_expression("She gasps, startled.") == "surprise"
        assert guess_expression("She smiles happily.") == "joy"
        assert guess_expression("Trembling, he backs away, terrified.") == "fear"

    def test_emoticons(self):
        assert guess_expression("See you! :)") == "joy"
        assert guess_expression("oh no :(") == "sadness"
        assert guess_expression("love you <3") == "love"

    def test_nothing_is_neutral(self):
        assert guess_expression("The road goes on to the west.") == "neutral"
        assert guess_expression("") == "neutral"

    def test_most_hits_win_and_a_tie_goes_to_the_listed_first(self):
        assert guess_expression("She smiles, smiles, and glares.") == "joy"
        assert guess_expression("She smiles and glares.") == "anger"


def test_reply_expression_prefers_the_tag():
    assert reply_expression("She smiles. [expression: sadness]") == "sadness"
    assert reply_expression("She smiles. [expression: smug]") == "joy"
    assert reply_expression("Nothing.") == "neutral"


def test_file_names_like_sillytaverns_sprites():
    assert expression_of_file_name("joy.png") == "joy"
    assert expression_of_file_name("Anger.WEBP") == "anger"
    assert expression_of_file_name("sprites/neutral.gif") == "neutral"
    assert expression_of_file_name("smug.png") is None
    assert expression_of_file_name("joy") == "joy"


def test_art_image_falls_back_from_expression_to_art_to_avatar():
    assert art_image(art_id=2, avatar_id=1, expressions={"joy": 3}, name="joy") == 3
    assert art_image(art_id=2, avatar_id=1, expressions={"joy": 3}, name="anger") == 2
    assert art_image(art_id=None, avatar_id=1, expressions={}, name=None) == 1
    assert art_image(art_id=None, avatar_id=None, expressions={}, name="joy") is None

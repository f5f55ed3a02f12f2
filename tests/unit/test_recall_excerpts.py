"""What the memory viewer's search shows of a memory: the excerpt around matched words, and the floor."""

from app.memory.recall.core.excerpts import Excerpt, Piece, excerpt, worth_showing


def test_short_text_whole_with_the_query_words_marked_by_stem():
    assert excerpt("Aria: The lighthouses were dark.", "lighthouse") == Excerpt(
        (Piece("Aria: The ", False), Piece("lighthouses", True), Piece(" were dark.", False)), False, False
    )


def test_accents_and_case_fold_like_the_index():
    assert [p.text for p in excerpt("Un CAFÉ noir.", "cafe").pieces if p.matched] == ["CAFÉ"]


def test_stopwords_and_single_letters_are_not_marked():
    assert not excerpt("The key is in the tower.", "the is a").matched


def test_window_starts_a_little_before_the_first_match_at_a_word_border():
    text = "filler " * 100 + "Elowen hid the brass key." + " more" * 100
    got = excerpt(text, "brass key", size=120)
    body = "".join(p.text for p in got.pieces)
    assert got.cut_before and got.cut_after
    assert "brass key" in body and body.startswith("filler") and len(body) <= 120
    assert [p.text for p in got.pieces if p.matched] == ["brass", "key"]


def test_no_match_keeps_the_start():
    got = excerpt("word " * 200, "zzzqqq", size=50)
    assert not got.matched and not got.cut_before and got.cut_after
    assert got.pieces[0].text.startswith("word word")


def test_a_match_near_the_end_still_fills_the_window():
    text = "a" * 10 + " " + "x " * 200 + "dragon"
    got = excerpt(text, "dragon", size=100)
    assert got.pieces[-1] == Piece("dragon", True) and not got.cut_after


def test_markup_in_the_text_stays_text():
    assert excerpt("<b>key</b>", "key").pieces == (
        Piece("<b>", False),
        Piece("key", True),
        Piece("</b>", False),
    )


def test_worth_showing_needs_a_shared_word_or_a_similarity_at_the_floor():
    assert worth_showing(shares_word=True, similarity=0.1, floor=0.4)
    assert worth_showing(shares_word=False, similarity=0.4, floor=0.4)
    assert not worth_showing(shares_word=False, similarity=0.39, floor=0.4)
    assert not worth_showing(shares_word=False, similarity=None, floor=0.4)

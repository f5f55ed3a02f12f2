import pytest

from app.memory.recall.core.lexical import (
    CANDIDATE_POSTINGS,
    candidate_terms,
    chat_weights,
    fuse,
    index_text,
    match_expression,
    query_terms,
    stem,
    tokenize,
    word_weight,
)


def test_tokenize_drops_stopwords_stems_and_folds_accents():
    assert tokenize("The lighthouses were walking") == ["lighthous", "walk"]
    assert stem("stories") == stem("story") and stem("is") == "is"
    assert tokenize("Café snake_case Ёлка") == ["cafe", "snake", "case", "елк"]
    assert index_text("The lighthouses were walking", 12) == "c12qlighthous c12qwalk"


def test_word_forms_meet_on_one_stem():
    # The light stemmer before left "adoption" and "mentorship" apart from their verbs.
    assert len({stem(w) for w in ("adoption", "adopted", "adopting", "adopts")}) == 1
    assert stem("mentored") == stem("mentoring") == stem("mentor")
    # Russian words by Russian rules: the same noun in three cases.
    assert len({stem(w) for w in ("книга", "книгами", "книгу")}) == 1


def test_a_query_of_stopwords_has_no_terms():
    assert query_terms("what is the", 3) == []
    assert query_terms("Tobiah, tobiah and the lighthouses", 3) == ["c3qtobiah", "c3qlighthous"]


def test_candidate_search_leaves_out_the_commonest_words():
    freq = {"key": 40, "brass": 12, "said": CANDIDATE_POSTINGS, "absent": 0}
    assert candidate_terms(freq) == ["brass", "key"]
    # Words in too many chunks to tell them apart are not searched at all.
    assert candidate_terms({"said": 50_000, "went": 90_000}) == []
    assert candidate_terms({"absent": 0}) == []


def test_words_are_prefixed_with_their_chat_and_quoted():
    assert match_expression(query_terms("Tobiah NEAR(x)", 7)) == '"c7qtobiah" OR "c7qnear"'
    assert match_expression([]) is None
    # Chat 1's "2abc" and chat 12's "abc" never meet.
    assert index_text("2abc", 1) != index_text("abc", 12)


def test_fusion_normalises_over_the_candidates():
    fused = fuse(
        {1: 0.2, 2: 0.9, 3: 0.1}, {1: 0.0, 2: 2.0, 3: 1.0}, {}, dense_weight=0.5, neighbour_share=0.0
    )
    assert fused == {1: 0.0625, 2: 1.0, 3: 0.25}


def test_neighbours_lend_a_share_of_their_score():
    chain = {1: (None, 2), 2: (1, 3), 3: (2, None)}
    alone = fuse(
        {1: 0.2, 2: 0.9, 3: 0.1}, {1: 0.0, 2: 2.0, 3: 1.0}, {}, dense_weight=0.5, neighbour_share=0.0
    )
    helped = fuse(
        {1: 0.2, 2: 0.9, 3: 0.1}, {1: 0.0, 2: 2.0, 3: 1.0}, chain, dense_weight=0.5, neighbour_share=0.2
    )
    assert helped[1] == alone[1] + 0.2 * alone[2]
    assert helped[2] == alone[2] + 0.2 * (alone[1] + alone[3]) / 2


def test_a_chunk_without_a_vector_counts_as_dissimilar():
    fused = fuse({2: 0.9}, {1: 1.0, 2: 1.0}, {}, dense_weight=0.5, neighbour_share=0.0)
    assert fused[2] > fused[1]


def test_lexical_alone_when_no_embedding_source():
    assert fuse(None, {1: 0.0, 2: 3.0, 3: 1.5}, {}, neighbour_share=0.0) == {1: 0.0, 2: 1.0, 3: 0.5}
    assert fuse(None, {}, {}) == {}


def test_a_word_most_chunks_hold_weighs_almost_nothing():
    assert word_weight(1, 100) > 4
    assert word_weight(50, 100) < 0.01
    assert word_weight(0, 100) > word_weight(1, 100)


def test_a_weak_word_match_does_not_outweigh_a_clear_paraphrase():
    # Chunk 1 is closest in meaning; 2 and 3 share only a word half the chunks hold (BM25 0.05),
    # which min-max scaling would lift to the full lexical weight.
    unit = word_weight(0, 20)
    fused = fuse(
        {1: 0.6, 2: 0.4, 3: 0.3}, {1: 0.0, 2: 0.05, 3: 0.04}, {}, neighbour_share=0.0, lexical_unit=unit
    )
    assert max(fused, key=fused.get) == 1
    # A rare word still wins over a closer meaning, and two rare words count about twice one.
    rare = fuse(
        {1: 0.6, 2: 0.4, 3: 0.3}, {1: 0.0, 2: unit, 3: 2 * unit}, {}, neighbour_share=0.0, lexical_unit=unit
    )
    assert max(rare, key=rare.get) == 3 and rare[2] > rare[1]


def test_word_weights_follow_the_chat_not_the_whole_library():
    # A word in 5 of a chat's 20 chunks weighs about half a word in one; among 20,000 chunks of
    # every chat (what FTS5 counts), it would weigh almost as much as the rare one.
    weights = chat_weights({"five": 5, "one": 1}, chat_chunks=20, all_chunks=20_000)
    chat_ratio = word_weight(5, 20) / word_weight(1, 20)
    assert chat_ratio < 0.5 and word_weight(5, 20_000) / word_weight(1, 20_000) > 0.8
    as_in_chat = {t: w * word_weight(f, 20_000) for (t, w), f in zip(weights.items(), (5, 1), strict=True)}
    assert as_in_chat["five"] / as_in_chat["one"] == pytest.approx(chat_ratio)
    # The chat is the library: nothing changes.
    assert chat_weights({"five": 5}, chat_chunks=20, all_chunks=20) == {"five": 1.0}


def test_words_that_frame_a_question_are_not_searched():
    assert query_terms("Do you remember what Melanie said about the lighthouse?", 1) == [
        "c1qmelani",
        "c1qlighthous",
    ]
    assert query_terms("Tell me what Jon told Gina", 1) == ["c1qjon", "c1qgina"]
    assert query_terms("How many children does Melanie have?", 1) == ["c1qchildren", "c1qmelani"]
    # A memory keeps them: only the query's framing is left out.
    assert "c1qsaid" in index_text("Melanie said the lighthouse was dark.", 1)

from app.memory.recall.lexical import fuse, match_expression


def test_match_expression_keeps_meaningful_words_quoted():
    assert (
        match_expression("What did Tobiah say about the lighthouses?") == '"tobiah" OR "say" OR "lighthouses"'
    )


def test_match_expression_neutralises_fts_syntax():
    assert match_expression('NEAR(a b) "x" OR* col:val') == '"near" OR "col" OR "val"'


def test_a_query_of_stopwords_matches_nothing():
    assert match_expression("what is the") is None
    assert match_expression("") is None


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

from app.memory.recall.lexical import BM25, fuse, stem, tokenize

DOCS = [
    "Rowan: We walked to the harbour.\n\nMirela: The boats were painted blue.",
    "Rowan: Who keeps the lighthouses on Vellmar?\n\nMirela: Old Tobiah keeps them, since the war.",
    "Rowan: I am hungry.\n\nMirela: There is bread and fish in the kitchen.",
]


def test_tokenize_drops_stopwords_and_stems():
    assert tokenize("The lighthouses were walking") == ["lighthouse", "walk"]
    assert stem("stories") == "story" and stem("is") == "is"


def test_rare_names_rank_first():
    scores = BM25(DOCS).scores("Tell me about Tobiah")
    assert scores.index(max(scores)) == 1 and scores[0] == 0 and scores[2] == 0


def test_stemming_matches_plural_and_tense():
    scores = BM25(DOCS).scores("lighthouse")
    assert scores[1] > 0
    assert BM25(DOCS).scores("walking")[0] > 0


def test_a_query_of_stopwords_scores_nothing():
    assert BM25(DOCS).scores("what is the") == [0, 0, 0]


def test_fusion_normalises_and_adds_neighbours():
    fused = fuse([0.2, 0.9, 0.1], [0.0, 2.0, 1.0], dense_weight=0.5, neighbour_share=0.0)
    assert fused == [0.0625, 1.0, 0.25]
    with_neighbours = fuse([0.2, 0.9, 0.1], [0.0, 2.0, 1.0], dense_weight=0.5, neighbour_share=0.2)
    assert with_neighbours[0] > fused[0] and with_neighbours[2] > fused[2]


def test_lexical_alone_when_no_embedding_source():
    assert fuse(None, [0.0, 3.0, 1.5], neighbour_share=0.0) == [0.0, 1.0, 0.5]
    assert fuse(None, []) == []

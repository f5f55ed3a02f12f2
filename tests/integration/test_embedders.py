"""The embedding sources, for real: the built-in models from their packages, and an
OpenAI-compatible endpoint (the test model server) over HTTP."""

import math
import socket

import pytest

from app.memory.recall.embedders import E5Small, EmbeddingError, MiniLM, OpenAICompatible


def cos(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


def test_builtin_minilm_runs_offline_and_ranks_meaning():
    model = MiniLM()
    assert model.space.id == "builtin:all-MiniLM-L6-v2:384"
    lighthouse, bread = model.embed_passages(
        ["The keeper climbed the lighthouse stairs at dusk.", "I baked bread."]
    )
    query = model.embed_query("Who went up the lighthouse?")
    assert len(query) == 384 and abs(math.sqrt(sum(x * x for x in query)) - 1) < 1e-4
    assert cos(query, lighthouse) > cos(query, bread) + 0.2


def test_builtin_minilm_queries_run_traced_and_give_the_models_own_vectors():
    """A query's embedding runs as one TorchScript call (it overlaps with the request's own work);
    the vectors are exactly those of the model's modules called one by one."""
    model = MiniLM()
    texts = [
        "hi",
        "",
        "Where did Mirela hide the old map? " * 3,
        "the lighthouse keeper " * 120,
        "café 日本 ёлка",
    ]
    traced = [model.embed_query(t) for t in texts]
    encoder = MiniLM._query_encoder
    assert encoder is not None, "tracing failed: queries fall back to the slower path (see the log)"
    try:
        MiniLM._query_encoder = None
        assert [model.embed_query(t) for t in texts] == traced
    finally:
        MiniLM._query_encoder = encoder


def test_builtin_e5_is_multilingual_with_query_and_passage_roles():
    model = E5Small()
    assert model.space.id == "builtin:multilingual-e5-small:384"
    pt, other = model.embed_passages(["O farol fica no penhasco do norte.", "Gosto de pão quente."])
    query = model.embed_query("Where is the lighthouse?")
    assert cos(query, pt) > cos(query, other)


def test_openai_compatible_endpoint(models):
    emb = OpenAICompatible(models.base_url, "text-embedding-test")
    vectors = emb.embed_passages(["the lighthouse keeper", "the lighthouse keeper sleeps", "bread and fish"])
    assert emb.space.id == "openai:text-embedding-test:384"
    assert cos(vectors[0], vectors[1]) > cos(vectors[0], vectors[2])
    assert models.last_request.path == "/v1/embeddings"


def test_openai_compatible_refused_connection_says_so():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(EmbeddingError, match="could not be reached"):
        OpenAICompatible(f"http://127.0.0.1:{port}/v1", "m").embed_passages(["x"])


def test_a_query_gives_up_on_a_slow_server_sooner_than_the_background_embedding(models, monkeypatch):
    """A reply waits for its query's vector; memories are embedded in the background: the query gets
    the short timeout (then the search ranks by words), passages the long one."""
    import app.memory.recall.embedders as embedders

    monkeypatch.setattr(embedders, "QUERY_TIMEOUT_S", 0.5)
    models.embedding_delay_s = 1.5
    try:
        source = OpenAICompatible(models.base_url, "test-embed", timeout_s=10)
        assert len(source.embed_passages(["The keeper climbed the stairs."])[0]) > 0
        with pytest.raises(EmbeddingError, match="could not be reached"):
            source.embed_query("Who climbed the stairs?")
    finally:
        models.embedding_delay_s = 0.0

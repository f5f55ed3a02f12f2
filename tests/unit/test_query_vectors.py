"""The app's cache of query vectors: one embedding per space and text, shared by whoever asks
while it runs; failures are not kept."""

import threading
import time

import pytest

from app.memory.recall.embedders import EmbeddingError, EmbeddingSpace, QueryVectors


class Counting:
    space = EmbeddingSpace("builtin", "fake", 2)

    def __init__(self, delay_s: float = 0.0, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.delay_s, self.fail = delay_s, fail

    def embed_query(self, text: str) -> list[float]:
        self.calls.append(text)
        time.sleep(self.delay_s)
        if self.fail:
            raise EmbeddingError("down")
        return [float(len(text)), 1.0]


def test_a_text_is_embedded_once_per_space():
    cache, embedder = QueryVectors(), Counting()
    assert cache.embed(embedder, "where is the map") == [16.0, 1.0]
    assert cache.embed(embedder, "where is the map") == [16.0, 1.0]
    assert embedder.calls == ["where is the map"]
    other_space = Counting()
    other_space.space = EmbeddingSpace("builtin", "other", 2)
    cache.embed(other_space, "where is the map")
    assert other_space.calls == ["where is the map"]


def test_a_text_being_embedded_is_waited_for_not_embedded_again():
    cache, embedder = QueryVectors(), Counting(delay_s=0.2)
    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.embed(embedder, "q"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [[1.0, 1.0]] * 3 and embedder.calls == ["q"]


def test_failures_are_not_kept_and_the_oldest_texts_go_first():
    cache, failing = QueryVectors(size=2), Counting(fail=True)
    with pytest.raises(EmbeddingError):
        cache.embed(failing, "q")
    with pytest.raises(EmbeddingError):
        cache.embed(failing, "q")
    assert failing.calls == ["q", "q"]
    embedder = Counting()
    for text in ("a", "b", "c"):
        cache.embed(embedder, text)
    cache.embed(embedder, "a")
    assert embedder.calls == ["a", "b", "c", "a"]
    cache.clear()
    cache.embed(embedder, "c")
    assert embedder.calls == ["a", "b", "c", "a", "c"]


def test_ready_says_a_vector_is_known_only_once_it_is_done():
    cache, embedder = QueryVectors(), Counting(delay_s=0.2)
    assert not cache.ready("where is the map")
    worker = threading.Thread(target=cache.embed, args=(embedder, "where is the map"))
    worker.start()
    while not embedder.calls:
        time.sleep(0.005)
    assert not cache.ready("where is the map")  # being embedded: the prompt does not wait for it
    worker.join()
    assert cache.ready("where is the map") and not cache.ready("another text")
    failing = Counting(fail=True)
    with pytest.raises(EmbeddingError):
        cache.embed(failing, "broken")
    assert not cache.ready("broken")

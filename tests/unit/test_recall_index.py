import numpy as np

from app.memory.recall.index import _Bits
from app.memory.recall.vectors import sign_code


def _rows(start, vectors):
    return [(start + i, start + i, sign_code(v)) for i, v in enumerate(vectors)]


def test_nearest_by_sign_bits_finds_the_closest_vectors():
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((500, 384)).astype(np.float32)
    bits = _Bits()
    bits.append(_rows(1, vectors[:300]))
    bits.append(_rows(301, vectors[300:]))  # appends keep growing the same arrays
    query = vectors[417] + 0.1 * rng.standard_normal(384).astype(np.float32)
    ids, chunks = bits.nearest(sign_code(query), 5)
    assert 418 in ids.tolist() and 418 in chunks.tolist()
    assert bits.size == 500 and bits.max_id == 500


def test_buried_vectors_are_never_returned():
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((50, 64)).astype(np.float32)
    bits = _Bits()
    bits.append(_rows(10, vectors))
    bits.bury([12, 13, 999])  # 999 is not held (another space): ignored
    ids, _ = bits.nearest(sign_code(vectors[2]), 100)
    assert sorted(ids.tolist()) == [i for i in range(10, 60) if i not in (12, 13)]
    ids, _ = bits.nearest(sign_code(vectors[2]), 3)
    assert 12 not in ids.tolist() and len(ids) == 3
    assert bits.dead_count == 2
    bits.bury([12])
    assert bits.dead_count == 2


def test_sign_code_pads_to_whole_words():
    assert len(sign_code([1.0] * 384)) == 48
    assert len(sign_code([1.0] * 100)) == 16

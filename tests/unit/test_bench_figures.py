"""bench/figures.py: the percentile the benches print."""

import pytest

from bench.figures import percentile


def test_percentile_is_the_nearest_rank_value():
    values = [float(v) for v in range(100, 0, -1)]  # 1..100, unordered
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.95) == 95.0
    assert percentile(values, 1.0) == 100.0
    assert percentile(values, 0.001) == 1.0


def test_percentile_of_few_values_is_one_of_them():
    assert percentile([3.0], 0.95) == 3.0
    assert percentile([10.0, 20.0], 0.5) == 10.0
    assert percentile([10.0, 20.0], 0.51) == 20.0
    assert percentile([5.0, 1.0, 9.0], 0.95) == 9.0


@pytest.mark.parametrize("share", [0, -0.1, 1.5])
def test_percentile_refuses_a_share_outside_zero_to_one(share):
    with pytest.raises(ValueError, match="share"):
        percentile([1.0], share)


def test_percentile_refuses_no_values():
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)

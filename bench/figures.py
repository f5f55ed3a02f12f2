"""Small pure helpers the benches share to turn timings into the figures they print."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value that at least `share` (0 < share <= 1) of the
    values are at or below. No interpolation, so the figure is always a time that was measured."""
    if not values:
        raise ValueError("a percentile of no values")
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], not {share}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]

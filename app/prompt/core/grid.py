"""The context grid: the prompt drawn as a grid of the model's context window, one colour per
block group, each cell a fixed number of tokens; and the cost of a reply. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass

from app.prompt.core.layout import GROUP_LABELS, GROUPS

# Cell sizes to choose from, so the legend reads in round numbers.
NICE_CELL_SIZES = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000)
MAX_CELLS = 400
REPLY = "reply"
FREE = "free"


@dataclass(frozen=True)
class LegendRow:
    key: str
    label: str
    tokens: int
    cells: int
    circle: bool  # smaller than one cell: drawn as a circle instead of squares


@dataclass(frozen=True)
class Grid:
    cell_tokens: int
    cells: tuple[str, ...]  # one key per cell: a group, "reply" or "free"
    legend: tuple[LegendRow, ...]
    used_tokens: int
    free_tokens: int
    over_by: int  # tokens past the context size (0 when it fits)


def cell_size(context_size: int, max_cells: int = MAX_CELLS) -> int:
    for size in NICE_CELL_SIZES:
        if context_size / size <= max_cells:
            return size
    return NICE_CELL_SIZES[-1]


def context_grid(group_tokens: dict[str, int], context_size: int, reply_reserve: int) -> Grid:
    size = cell_size(context_size)
    total_cells = max(1, -(-context_size // size))
    cells: list[str] = []
    legend: list[LegendRow] = []
    for key in (*GROUPS, REPLY):
        tokens = reply_reserve if key == REPLY else group_tokens.get(key, 0)
        if tokens <= 0:
            continue
        count = tokens // size
        cells.extend([key] * count)
        label = "Reserved for the reply" if key == REPLY else GROUP_LABELS[key]
        legend.append(LegendRow(key, label, tokens, count, circle=count == 0))
    used = sum(group_tokens.values())
    over = max(0, used + reply_reserve - context_size)
    free_cells = max(0, total_cells - len(cells))
    cells.extend([FREE] * free_cells)
    free = max(0, context_size - used - reply_reserve)
    legend.append(LegendRow(FREE, "Free", free, free_cells, circle=False))
    return Grid(size, tuple(cells), tuple(legend), used, free, over)


@dataclass(frozen=True)
class Prices:
    """Per million tokens, in the connection's currency (USD for most providers)."""

    input: float | None = None
    output: float | None = None
    cached_input: float | None = None


@dataclass(frozen=True)
class CostEstimate:
    input_cost: float | None  # the whole prompt at the input price
    input_cost_cached: float | None  # the stable prefix at the cached price, the rest at the input price
    output_cost_max: float | None  # a reply as long as the reserve allows


def estimate_cost(
    prices: Prices, *, input_tokens: int, prefix_tokens: int, reply_reserve: int
) -> CostEstimate:
    def per(tokens: int, price: float | None) -> float | None:
        return None if price is None else tokens * price / 1_000_000

    full = per(input_tokens, prices.input)
    cached = None
    if prices.input is not None and prices.cached_input is not None:
        cached = per(prefix_tokens, prices.cached_input) + per(input_tokens - prefix_tokens, prices.input)
    return CostEstimate(full, cached, per(reply_reserve, prices.output))


def cache_hit_rate(usages: list[dict]) -> tuple[float | None, int]:
    """Share of input tokens the provider reported as read from its cache, over the replies that
    reported usage; and how many replies that was."""
    reported = [u for u in usages if u.get("input_tokens")]
    total = sum(u["input_tokens"] for u in reported)
    if not total:
        return None, 0
    return sum(u.get("cached_input_tokens") or 0 for u in reported) / total, len(reported)

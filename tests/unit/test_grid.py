from app.prompt.core.grid import Prices, cache_hit_rate, cell_size, context_grid, estimate_cost


def test_cell_size_keeps_the_grid_small_and_round():
    assert cell_size(8192) == 25
    assert cell_size(128000) == 500
    assert cell_size(200000) == 500
    assert cell_size(4096) == 25


def test_grid_cells_legend_circles_and_free_space():
    grid = context_grid({"system": 1000, "examples": 10, "conversation": 3000}, 8192, 512)
    assert grid.cell_tokens == 25
    assert len(grid.cells) == 8192 // 25 + 1
    legend = {row.key: row for row in grid.legend}
    assert legend["system"].cells == 40 and not legend["system"].circle
    assert legend["examples"].circle and legend["examples"].cells == 0  # smaller than one cell
    assert legend["reply"].tokens == 512
    assert legend["free"].tokens == 8192 - 4010 - 512
    assert grid.cells[:40] == ("system",) * 40 and grid.cells[-1] == "free"
    assert grid.over_by == 0


def test_grid_reports_overflow():
    grid = context_grid({"conversation": 9000}, 8192, 512)
    assert grid.over_by == 9000 + 512 - 8192 and grid.free_tokens == 0


def test_cost_with_and_without_cache():
    cost = estimate_cost(
        Prices(input=3.0, output=15.0, cached_input=0.3),
        input_tokens=10_000,
        prefix_tokens=6_000,
        reply_reserve=1_000,
    )
    assert round(cost.input_cost, 6) == 0.03
    assert round(cost.input_cost_cached, 6) == round(6000 * 0.3 / 1e6 + 4000 * 3 / 1e6, 6)
    assert round(cost.output_cost_max, 6) == 0.015
    assert estimate_cost(Prices(), input_tokens=1, prefix_tokens=0, reply_reserve=1).input_cost is None


def test_cache_hit_rate():
    assert cache_hit_rate([]) == (None, 0)
    rate, n = cache_hit_rate([{"input_tokens": 1000, "cached_input_tokens": 800}, {"input_tokens": 1000}, {}])
    assert (rate, n) == (0.4, 2)

"""The batch-dropping recent-message window (issue 3, acceptance 1)."""

import pytest

from app.chats.core.window import batch_size, fit_window, plan_window


@pytest.mark.parametrize(
    ("limit", "batch"), [(80, 24), (20, 6), (100, 30), (25, 6), (21, 6), (30, 8), (50, 14)]
)
def test_batch_is_30_percent_rounded_down_to_even(limit, batch):
    assert batch_size(limit) == batch


def test_grows_to_the_limit_keeping_everything():
    for total in range(0, 81):
        plan = plan_window(total, 80)
        assert (plan.dropped, plan.size) == (0, total)


def test_limit_80_drops_24_keeps_first_and_58_remain_after_a_two_message_exchange():
    plan = plan_window(82, 80)
    assert plan.pinned == 1 and plan.dropped == 24 and plan.size == 58


def test_between_drops_the_window_start_does_not_move():
    starts = [plan_window(total, 80).dropped for total in range(81, 200)]
    # The start moves only in whole batches, and each position holds while the window regrows.
    assert sorted(set(starts)) == [24, 48, 72, 96, 120]
    assert all(b - a in (0, 24) for a, b in zip(starts, starts[1:], strict=False))
    assert all(plan_window(total, 80).size <= 80 for total in range(0, 500))


@pytest.mark.parametrize("limit", [20, 25, 80, 100])
def test_window_never_exceeds_the_limit_and_drops_are_whole_batches(limit):
    for total in range(0, 400):
        plan = plan_window(total, limit)
        assert plan.size <= limit
        assert plan.dropped % batch_size(limit) == 0 or plan.size == plan.pinned + 1
        if total > limit:
            assert plan.pinned == 1 and plan.size >= limit - batch_size(limit)


def test_odd_product_limit_25():
    assert plan_window(26, 25) == plan_window(26, 25).__class__(1, 6, 20)


def test_limits_20_and_100():
    assert plan_window(22, 20).size == 16  # 22 - 6
    assert plan_window(102, 100).size == 72  # 102 - 30


def test_after_a_refresh_mark_nothing_is_pinned():
    plan = plan_window(82, 80, keep_first=False)
    assert plan.pinned == 0 and plan.dropped == 24 and plan.size == 58


def test_short_chats_keep_everything():
    assert plan_window(1, 80).size == 1 and plan_window(1, 80).pinned == 0
    assert plan_window(3, 80) == plan_window(3, 80).__class__(1, 0, 3)


def test_fit_window_drops_whole_batches_then_the_pinned_message():
    sizes = [50] + [10] * 30  # pinned 50 + 300
    assert fit_window(sizes, 400, pinned=1, batch=6) == (0, 0)
    assert fit_window(sizes, 300, pinned=1, batch=6) == (6, 0)  # 350 - 60 = 290
    assert fit_window(sizes, 100, pinned=1, batch=6) == (29, 0)  # pinned 50 + newest 10 fit
    assert fit_window(sizes, 55, pinned=1, batch=6) == (29, 1)  # only the newest fits

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.summaries.core.coverage import (
    MAX_SCOPE_MESSAGES,
    ChatMessage,
    ScopeError,
    SummaryRange,
    automatic_due,
    automatic_scope,
    check_tail,
    covered,
    scope_last,
    scope_range,
    select_messages,
    summarised_on_page,
    summary_input_ids,
    uncovered_batches,
)


def chat(n, hidden=()):
    """Messages with ids 101.. so ids and message numbers never coincide by accident."""
    return [ChatMessage(100 + i, hidden=i in hidden) for i in range(1, n + 1)]


def ids(*numbers):
    return tuple(100 + n for n in numbers)


def test_without_summaries_everything_is_sent():
    sel = select_messages(chat(12), [], tail=10, hide_summarised=True)
    assert sel.sent_ids == ids(*range(1, 13))
    assert sel.uncovered_ids == ids(1, 2) and sel.summarised_ids == ()


def test_summarised_messages_stay_in_the_prompt_while_the_switch_is_off():
    sel = select_messages(chat(20), [SummaryRange(101, 108)], tail=10, hide_summarised=False)
    assert sel.sent_ids == ids(*range(1, 21)) and sel.summarised_ids == ()
    assert sel.uncovered_ids == ids(9, 10)


def test_hide_with_tail_drops_covered_old_messages_and_keeps_uncovered_ones():
    entries = [SummaryRange(101, 105), SummaryRange(108, 116)]
    sel = select_messages(chat(20), entries, tail=4, hide_summarised=True)
    assert sel.tail_ids == ids(17, 18, 19, 20)
    assert sel.summarised_ids == ids(1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15, 16)
    assert sel.uncovered_ids == ids(6, 7) and sel.uncovered_count == 2
    assert sel.sent_ids == ids(6, 7, 17, 18, 19, 20)


def test_the_tail_is_sent_even_when_a_summary_covers_it():
    sel = select_messages(chat(10), [SummaryRange(101, 110)], tail=3, hide_summarised=True)
    assert sel.sent_ids == ids(8, 9, 10)
    assert select_messages(chat(10), [SummaryRange(101, 110)], tail=0, hide_summarised=True).sent_ids == ()
    assert select_messages(chat(3), [SummaryRange(101, 103)], tail=10, hide_summarised=True).sent_ids == ids(
        1, 2, 3
    )


def test_an_inactive_summary_does_not_hide_anything():
    sel = select_messages(chat(10), [SummaryRange(101, 108, active=False)], tail=2, hide_summarised=True)
    assert sel.sent_ids == ids(*range(1, 11)) and sel.summarised_ids == ()
    # sent, but not offered to Backfill: the user switched that summary off
    assert (
        sel.uncovered_ids == ()
        and uncovered_batches(chat(10), [SummaryRange(101, 108, active=False)], tail=2) == []
    )


def test_messages_hidden_from_the_ai_are_never_sent_and_do_not_use_the_tail():
    sel = select_messages(chat(10, hidden={9, 10}), [SummaryRange(101, 105)], tail=2, hide_summarised=True)
    assert sel.tail_ids == ids(7, 8)
    assert sel.sent_ids == ids(6, 7, 8) and sel.uncovered_ids == ids(6)


def test_a_deleted_message_inside_a_range_leaves_the_rest_covered():
    msgs = [m for m in chat(10) if m.id != 104]
    sel = select_messages(msgs, [SummaryRange(102, 106)], tail=2, hide_summarised=True)
    assert sel.summarised_ids == ids(2, 3, 5, 6)


def test_overlapping_entries_and_covered():
    entries = [SummaryRange(101, 110), SummaryRange(103, 104), SummaryRange(120, 125, active=False)]
    sel = select_messages(chat(14), entries, tail=2, hide_summarised=True)
    assert sel.summarised_ids == ids(*range(1, 11)) and sel.uncovered_ids == ids(11, 12)
    assert select_messages(chat(14), entries, tail=2, hide_summarised=False).summarised_ids == ()
    assert covered(104, entries) and not covered(121, entries) and covered(121, entries, active_only=False)


def test_tail_must_be_a_whole_number_from_zero():
    for bad in (-1, True, 2.5, "10", 100_001):
        with pytest.raises(ScopeError, match="Recent message tail"):
            check_tail(bad)
        with pytest.raises(ScopeError):
            select_messages(chat(3), [], tail=bad)


def test_scope_last_takes_the_newest_messages():
    assert scope_last(chat(20), 5) == (116, 120)
    assert scope_last(chat(20), 20) == (101, 120)


def test_scope_last_errors():
    with pytest.raises(ScopeError, match="only 3 messages"):
        scope_last(chat(3), 4)
    with pytest.raises(ScopeError, match="at least 1"):
        scope_last(chat(3), 0)
    with pytest.raises(ScopeError, match="no messages"):
        scope_last([], 1)
    with pytest.raises(ScopeError, match="at most 500"):
        scope_last(chat(MAX_SCOPE_MESSAGES + 1), MAX_SCOPE_MESSAGES + 1)
    with pytest.raises(ScopeError, match="hidden from the AI"):
        scope_last(chat(5, hidden={4, 5}), 2)


def test_scope_range_uses_message_numbers_and_returns_ids():
    assert scope_range(chat(20), 3, 7) == (103, 107)
    assert scope_range(chat(20), 4, 4) == (104, 104)
    with_gap = [m for m in chat(10) if m.id != 103]  # numbers shift after a delete; ids do not
    assert scope_range(with_gap, 3, 4) == (104, 105)


def test_scope_range_errors_are_clear():
    with pytest.raises(ScopeError, match="starts after it ends \\(7–3\\)"):
        scope_range(chat(20), 7, 3)
    with pytest.raises(ScopeError, match="from 1 to 20"):
        scope_range(chat(20), 0, 5)
    with pytest.raises(ScopeError, match="from 1 to 20"):
        scope_range(chat(20), 5, 21)
    with pytest.raises(ScopeError, match="two message numbers"):
        scope_range(chat(20), "1", 5)
    with pytest.raises(ScopeError, match="hidden from the AI"):
        scope_range(chat(20, hidden={5, 6}), 5, 6)
    with pytest.raises(ScopeError, match="Backfill"):
        scope_range(chat(600), 1, 501)


def test_summary_input_skips_hidden_messages_and_carries_no_swipes():
    assert summary_input_ids(chat(10, hidden={4}), 103, 106) == ids(3, 5, 6)
    # a message here is an id and a flag; the text of its active swipe is read by the caller, so a
    # discarded swipe cannot reach a summary through this module
    assert [f.name for f in dataclasses.fields(ChatMessage)] == ["id", "hidden"]


def test_backfill_batches_cover_every_uncovered_old_message_once():
    entries = [SummaryRange(106, 110), SummaryRange(121, 122, active=False)]
    batches = uncovered_batches(chat(40), entries, tail=10, batch=4)
    assert batches == [(101, 104), (105, 105), (111, 114), (115, 118), (119, 120), (123, 126), (127, 130)]
    covered_once = [i for a, b in batches for i in range(a, b + 1)]
    assert len(covered_once) == len(set(covered_once))


def test_backfill_batches_after_summaries_are_saved_are_empty():
    msgs = chat(30)
    batches = uncovered_batches(msgs, [], tail=10, batch=50)
    assert batches == [(101, 120)]
    assert uncovered_batches(msgs, [SummaryRange(*b) for b in batches], tail=10) == []


def test_backfill_batch_size_is_limited():
    for bad in (0, 501, True):
        with pytest.raises(ScopeError, match="Backfill batch"):
            uncovered_batches(chat(5), [], batch=bad)


def test_every_n_user_messages():
    assert not automatic_due(4) and automatic_due(5) and automatic_due(9)
    assert automatic_due(1, every=1) and not automatic_due(199, every=200)
    for bad in (0, 201, True):
        with pytest.raises(ScopeError, match="1 to 200"):
            automatic_due(5, every=bad)


def test_four_hundred_entries_over_two_thousand_messages():
    entries = [SummaryRange(101 + 5 * i, 105 + 5 * i) for i in range(400)]
    sel = select_messages(chat(2000), entries, tail=10, hide_summarised=True)
    assert sel.sent_ids == ids(*range(1991, 2001)) and len(sel.summarised_ids) == 1990


message_lists = st.lists(st.booleans(), max_size=60).map(
    lambda flags: [ChatMessage(100 + i, hidden=h) for i, h in enumerate(flags, start=1)]
)
range_lists = st.lists(
    st.tuples(st.integers(90, 170), st.integers(0, 30), st.booleans()).map(
        lambda t: SummaryRange(t[0], t[0] + t[1], t[2])
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(message_lists, range_lists, st.integers(0, 70), st.booleans())
def test_no_message_without_an_active_summary_is_ever_dropped(msgs, entries, tail, hide):
    sel = select_messages(msgs, entries, tail=tail, hide_summarised=hide)
    readable = [m.id for m in msgs if not m.hidden]
    assert list(sel.sent_ids) == [i for i in readable if i in set(sel.sent_ids)]  # chat order kept
    assert set(sel.sent_ids) | set(sel.summarised_ids) == set(readable)
    assert not set(sel.sent_ids) & set(sel.summarised_ids)
    assert set(sel.tail_ids) <= set(sel.sent_ids) and len(sel.tail_ids) == min(tail, len(readable))
    for i in readable:
        if not covered(i, entries):
            assert i in sel.sent_ids
    if not hide:
        assert sel.sent_ids == tuple(readable)


@settings(max_examples=300, deadline=None)
@given(message_lists, range_lists, st.integers(0, 70), st.integers(1, 20))
def test_backfill_batches_are_exactly_the_uncovered_old_messages(msgs, entries, tail, batch):
    sel = select_messages(msgs, entries, tail=tail)
    batches = uncovered_batches(msgs, entries, tail=tail, batch=batch)
    in_batches = [i for a, b in batches for i in summary_input_ids(msgs, a, b)]
    assert in_batches == list(sel.uncovered_ids)
    assert all(len(summary_input_ids(msgs, a, b)) <= batch for a, b in batches)


def test_automatic_scope_takes_what_came_after_the_newest_entry():
    assert automatic_scope(chat(12), []) == (101, 112)
    assert automatic_scope(chat(12), [SummaryRange(101, 104), SummaryRange(105, 108, active=False)]) == (
        109,
        112,
    )
    assert automatic_scope(chat(12), [SummaryRange(101, 112)]) is None
    assert automatic_scope(chat(12, hidden={11, 12}), [SummaryRange(101, 110)]) is None
    assert automatic_scope(chat(120), [], batch=50) == (101, 150)
    with pytest.raises(ScopeError, match="batch"):
        automatic_scope(chat(3), [], batch=0)


def _folded_by_pages(messages, entries, tail, page_size):
    """What the chat view folds, page by page, each page knowing only its messages and a count."""
    out = []
    for start in range(0, len(messages), page_size):
        page = messages[start : start + page_size]
        after = sum(1 for m in messages[start + page_size :] if not m.hidden)
        out.extend(summarised_on_page(page, entries, readable_after=after, tail=tail))
    return tuple(out)


@settings(max_examples=300, deadline=None)
@given(
    flags=st.lists(st.booleans(), max_size=60),
    spans=st.lists(
        st.tuples(st.integers(0, 62), st.integers(0, 62), st.booleans()).map(
            lambda t: SummaryRange(101 + t[0], 101 + t[1], t[2])
        ),
        max_size=6,
    ),
    tail=st.integers(0, 70),
    page_size=st.integers(1, 61),
)
def test_a_page_folds_what_the_whole_chat_fold_folds(flags, spans, tail, page_size):
    """Computing the fold from a page and a count of the messages after it gives what select_messages
    gives over the whole chat, for any cut into pages (one message alone included)."""
    messages = [ChatMessage(101 + i, hidden=h) for i, h in enumerate(flags)]
    whole = select_messages(messages, spans, tail=tail, hide_summarised=True).summarised_ids
    assert _folded_by_pages(messages, spans, tail, page_size) == whole


def test_a_page_folds_only_what_lies_before_the_tail():
    # 20 messages, the tail 10, an entry over 1–15: 1–10 fold; the page 6–12 folds 6–10.
    page = chat(20)[5:12]
    assert summarised_on_page(page, [SummaryRange(101, 115)], readable_after=8, tail=10) == ids(
        6, 7, 8, 9, 10
    )
    hidden = [dataclasses.replace(m, hidden=m.id == 110) for m in page]
    assert summarised_on_page(hidden, [SummaryRange(101, 115)], readable_after=8, tail=10) == ids(6, 7, 8, 9)

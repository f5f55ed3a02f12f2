"""Chat Summary's pure rules, with literals."""

import pytest

from app.memory.summaries.core.coverage import SummaryRange
from app.memory.summaries.core.rules import (
    BLOCK_HEADING,
    Coverage,
    EntryText,
    live_positions,
    range_label,
    scope_coverage,
    summary_block,
)


def test_scope_last_and_range_resolve_to_ids():
    ids = [10, 11, 15, 20, 21]
    assert scope_coverage(ids, "last", last=2) == Coverage(4, 5, 20, 21)
    assert scope_coverage(ids, "last", last=99) == Coverage(1, 5, 10, 21)
    assert scope_coverage(ids, "range", start=2, end=3) == Coverage(2, 3, 11, 15)


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        ({"scope": "range", "start": 3, "end": 2}, "backwards"),
        ({"scope": "range", "start": 1, "end": 6}, "has 5 messages"),
        ({"scope": "range", "start": 0, "end": 2}, "start at 1"),
        ({"scope": "last", "last": 0}, "how many"),
        ({"scope": "sideways"}, "Last or Range"),
    ],
)
def test_bad_scopes_say_why(kwargs, reason):
    with pytest.raises(ValueError, match=reason):
        scope_coverage([10, 11, 15, 20, 21], **kwargs)
    with pytest.raises(ValueError, match="no messages"):
        scope_coverage([], "last", last=1)


def test_live_positions_follow_deletions():
    assert live_positions([1, 2, 3, 4, 5], SummaryRange(2, 4)) == (2, 4)
    assert live_positions([1, 3, 5], SummaryRange(2, 4)) == (2, 2)
    assert live_positions([1, 5], SummaryRange(2, 4)) is None
    assert range_label((2, 2)) == "message 2" and range_label((2, 9)) == "messages 2–9"
    assert range_label(None) == "its messages were deleted"


def test_the_block_is_stable_text_in_the_given_order():
    block = summary_block([EntryText("Road", " They walk. "), EntryText("", "They rest.")])
    assert block == f"{BLOCK_HEADING}\n\n## Road\nThey walk.\n\nThey rest."
    assert summary_block([]) == ""

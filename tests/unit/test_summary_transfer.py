"""Chat Summary entries in a chat file: Marinara's ChatSummaryEntry shape, written and read back."""

from datetime import UTC, datetime

from app.memory.summaries.core.transfer import FileEntry, line_span, read_entries, read_hide, write_entries

LIMITS = {"limit": 10, "max_title": 20, "max_content": 100}


def test_line_span_counts_the_lines_the_ids_cover():
    assert line_span([3, 5, 9, 12], 4, 9) == (1, 2)
    assert line_span([3, 5, 9, 12], 3, 3) == (0, 0)
    assert line_span([3, 5, 9, 12], 6, 8) is None


def test_written_entries_read_back_the_same():
    when = datetime(2025, 1, 2, 10, 0, tzinfo=UTC)
    entries = [
        FileEntry(
            "T", "Text.", 0, 2, active=False, origin="model", tokens=3, created_at=when, updated_at=when, id=7
        ),
        FileEntry("", "Held.", 3, 3, active=False, awaiting_review=True),
    ]
    written = write_entries(entries)
    assert written[0] == {
        "id": "7",
        "kind": "rolling",
        "origin": "automated",
        "title": "T",
        "content": "Text.",
        "enabled": False,
        "sourceMode": "range",
        "rangeStartIndex": 0,
        "rangeEndIndex": 2,
        "tokenEstimate": 3,
        "createdAt": "2025-01-02T10:00:00Z",
        "updatedAt": "2025-01-02T10:00:00Z",
    }
    assert written[1]["awaitingReview"] is True and written[1]["enabled"] is False
    back, notes = read_entries({"summaryEntries": written}, line_count=4, **LIMITS)
    assert notes == []
    assert back == [
        FileEntry("T", "Text.", 0, 2, active=False, origin="model", created_at=when, updated_at=when),
        FileEntry("", "Held.", 3, 3, active=False, awaiting_review=True),
    ]


def test_bad_entries_are_left_out_with_a_note_and_missing_keys_read_as_nothing():
    raw = [
        {"content": "Ok.", "rangeStartIndex": 0, "rangeEndIndex": 0, "origin": "legacy", "title": "x" * 50},
        {"content": "Late.", "rangeStartIndex": 1, "rangeEndIndex": 4},
        {"content": "No range."},
        {"content": "Flag.", "rangeStartIndex": True, "rangeEndIndex": 1},
        {"content": "x" * 101, "rangeStartIndex": 0, "rangeEndIndex": 0},
    ]
    back, notes = read_entries({"summaryEntries": raw}, line_count=2, **LIMITS)
    assert back == [FileEntry("x" * 20, "Ok.", 0, 0, origin="user")]
    assert len(notes) == 4 and "do not fit the 2 messages imported" in notes[0]
    assert read_entries({}, line_count=2, **LIMITS) == ([], [])
    assert (
        read_hide({"hideSummarisedMessages": True}) is True
        and read_hide({"hideSummarisedMessages": "yes"}) is None
    )


def test_why_an_entry_is_held_goes_with_it_and_comes_back_held():
    held = FileEntry(
        "",
        "I would rather not say.",
        0,
        0,
        active=False,
        awaiting_review=True,
        review_reason="It mentions none of the names, places or words of the messages it covers.",
    )
    written = write_entries([held, FileEntry("", "Kept.", 1, 1, review_reason="ignored: not held")])
    assert written[0]["reviewReason"] == held.review_reason and "reviewReason" not in written[1]
    back, _ = read_entries({"summaryEntries": written}, line_count=2, **LIMITS)
    assert back[0].review_reason == held.review_reason and back[0].awaiting_review
    # a reason on an entry that is not held, or one too long, is not read as it is
    raw = [{**written[0], "reviewReason": "x" * 900}, {**written[1], "reviewReason": "Not held."}]
    back, _ = read_entries({"summaryEntries": raw}, line_count=2, **LIMITS)
    assert len(back[0].review_reason) == 500 and back[1].review_reason == ""

"""Conversation day and week summaries in a chat file: Marinara's daySummaries / weekSummaries, written
and read back; which of them a branch keeps."""

from datetime import date

from app.memory.days.core.days import ChatDay, kept_by_branch
from app.memory.days.core.transfer import (
    FileSummary,
    Limits,
    date_key,
    has_summaries,
    parse_key,
    read_rollover_hour,
    read_summaries,
    read_tail,
    write_summaries,
)

LIMITS = Limits(days=3, weeks=2, chars=50, details=2, detail_chars=10)
TODAY = date(2025, 3, 20)  # a Thursday


def test_keys_are_zero_padded_dates_and_read_back_padded_or_not():
    assert date_key(date(2025, 1, 3)) == "03.01.2025"
    assert parse_key("03.01.2025") == parse_key("3.1.2025") == date(2025, 1, 3)
    assert parse_key("31.02.2025") is None and parse_key("2025-01-03") is None and parse_key(3) is None


def test_written_summaries_read_back_the_same():
    days = [
        FileSummary(date(2025, 3, 11), "Tea.", ("likes tea",)),
        FileSummary(date(2025, 3, 10), "Rain.", (), "user"),
    ]
    weeks = [FileSummary(date(2025, 3, 3), "A week.", ("moved",))]
    written = {"daySummaries": write_summaries(days), "weekSummaries": write_summaries(weeks)}
    assert written["daySummaries"] == {
        "10.03.2025": {"summary": "Rain.", "keyDetails": [], "origin": "manual"},
        "11.03.2025": {"summary": "Tea.", "keyDetails": ["likes tea"]},
    }
    assert list(written["daySummaries"]) == ["10.03.2025", "11.03.2025"]  # oldest first
    back = read_summaries(written, today=TODAY, limits=LIMITS)
    assert (
        back.days == tuple(sorted(days, key=lambda s: s.on))
        and back.weeks == tuple(weeks)
        and back.notes == ()
    )
    assert read_summaries({}, today=TODAY, limits=LIMITS).days == () and not has_summaries(
        {"daySummaries": {}}
    )
    assert has_summaries({"weekSummaries": {"03.03.2025": {}}})


def test_bad_days_and_weeks_are_left_out_with_a_note_each():
    meta = {
        "daySummaries": {
            "10.03.2025": {
                "summary": " Kept. ",
                "keyDetails": ["ok", "  ", 7, "far too long detail", "two", "three"],
            },
            "yesterday": {"summary": "No date."},
            "20.03.2025": {"summary": "Today is not finished."},
            "11.03.2025": "not an object",
            "12.03.2025": {"summary": "  "},
            "13.03.2025": {"summary": "x" * 51},
            "14.03.2025": {"summary": "Details?", "keyDetails": "one"},
            "10.3.2025": {"summary": "The same day again."},
        },
        "weekSummaries": {
            "04.03.2025": {"summary": "Tuesday."},
            "17.03.2025": {"summary": "This week."},
            "03.03.2025": {"summary": "Good week."},
        },
    }
    read = read_summaries(meta, today=TODAY, limits=LIMITS)
    assert read.days == (FileSummary(date(2025, 3, 10), "Kept.", ("ok", "two")),)
    assert read.weeks == (FileSummary(date(2025, 3, 3), "Good week."),)
    assert read.notes == (
        "Day summary “10.03.2025” in the file: 3 key details left out (a summary keeps at most 2, each of at "
        "most 10 characters of text).",
        "Day summary “yesterday” in the file is not keyed by a date (DD.MM.YYYY) and was left out.",
        "Day summary “20.03.2025” in the file is for a day not finished yet and was left out.",
        "Day summary “11.03.2025” in the file is not a summary and was left out.",
        "Day summary “12.03.2025” in the file has no text and was left out.",
        "Day summary “13.03.2025” in the file is longer than 50 characters and was left out.",
        "Day summary “14.03.2025” in the file has key details that are not a list and was left out.",
        "Day summary “10.3.2025” in the file names a date already read and was left out.",
        "Week summary “04.03.2025” in the file does not start on a Monday and was left out.",
        "Week summary “17.03.2025” in the file is for a week not finished yet and was left out.",
    )
    assert read_summaries({"daySummaries": ["a list"]}, today=TODAY, limits=LIMITS).notes == (
        "The file's day summaries are not keyed by date and were left out.",
    )


def test_past_the_limit_the_newest_are_kept_and_many_bad_keys_make_one_note():
    meta = {"daySummaries": {date_key(date(2025, 3, d)): {"summary": f"Day {d}."} for d in range(1, 6)}}
    read = read_summaries(meta, today=TODAY, limits=LIMITS)
    assert [s.on.day for s in read.days] == [3, 4, 5]
    assert read.notes == ("Only 3 day summaries fit a chat; the file's 2 oldest were left out.",)
    junk = read_summaries({"weekSummaries": {f"junk {n}": {} for n in range(25)}}, today=TODAY, limits=LIMITS)
    assert (
        len(junk.notes) == 21
        and junk.notes[-1] == "…and 5 more notes like these on the file's week summaries."
    )


def test_rollover_hour_and_tail_are_read_within_marinaras_bounds():
    assert read_rollover_hour({"dayRolloverHour": 0}) == (0, []) and read_rollover_hour({}) == (None, [])
    for bad in (12, -1, True, "4", 4.5):
        hour, notes = read_rollover_hour({"dayRolloverHour": bad})
        assert hour is None and len(notes) == 1 and "not a whole hour from 0 to 11" in notes[0]
    assert read_tail({"summaryTailMessages": 50}) == (50, []) and read_tail({}) == (None, [])
    assert read_tail({"summaryTailMessages": 51})[1] == [
        "The file's Recent Message Tail (51) is not a whole number from 0 to 50; the chat keeps the default."
    ]


def test_a_branch_keeps_the_days_that_end_before_its_point_and_the_weeks_whose_days_all_do():
    mon = date(2025, 3, 3)
    days = [
        ChatDay(date(2025, 2, 26), (1, 2)),
        ChatDay(mon, (3, 4)),
        ChatDay(date(2025, 3, 5), (5, 6, 7)),
        ChatDay(date(2025, 3, 11), (8, 9)),
    ]
    summarised = [date(2025, 2, 26), mon, date(2025, 3, 4), date(2025, 3, 5), date(2025, 3, 11)]
    weeks = [date(2025, 2, 24), mon]
    # Branched at message 6: the 5th goes on past it; the 4th (no messages) comes before it.
    assert kept_by_branch(days, 6, summarised, weeks) == (
        [date(2025, 2, 26), mon, date(2025, 3, 4)],
        [date(2025, 2, 24)],
    )
    # At the last message of the 5th: its week's other days have no messages, and none follow the point
    # until the 11th.
    assert kept_by_branch(days, 7, summarised, weeks) == (summarised[:4], weeks)
    assert kept_by_branch(days, 9, summarised, weeks) == (summarised, weeks)
    assert kept_by_branch(days, None, summarised, weeks) == ([], [])
    # Out-of-order times: a day whose messages all lie before the point is kept even after a day that goes on.
    assert kept_by_branch(
        [ChatDay(mon, (1, 3)), ChatDay(date(2025, 3, 4), (2,))], 2, [mon, date(2025, 3, 4)], []
    ) == ([date(2025, 3, 4)], [])

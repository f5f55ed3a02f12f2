"""The dates a query names, and whether a memory was said on one of them. Pure functions.

"What painting did Melanie show on October 13, 2023?" asks about what was said that day: a memory's
words seldom say when they were said, its time span does. Read: English month names, with a day
and a year or not ("October 13, 2023", "1 February, 2023", "in June", "July 2023"), ISO dates
(2023-10-13) and a year after in/of/during ("in 2023"). A month without a year matches that month
of any year. "May" and "March" count only beside a day or a year: they are common words too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_AMBIGUOUS = {"may", "march"}
_ORDINAL = r"(?:st|nd|rd|th)?"
_NAMED = re.compile(
    rf"\b(?:(\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?)?({'|'.join(MONTHS)})\b(?:\s+(\d{{1,2}}){_ORDINAL}\b)?(?:,?\s+(\d{{4}})\b)?",
    re.IGNORECASE,
)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_YEAR = re.compile(r"\b(?:in|of|during)\s+(\d{4})\b", re.IGNORECASE)
MAX_DATES = 4  # a question names one or two; more is not worth the checks
MAX_SPAN_DAYS = 366  # a memory spanning longer is checked over its first year only


@dataclass(frozen=True)
class NamedDate:
    year: int | None
    month: int | None
    day: int | None

    def covers(self, day: date) -> bool:
        return (
            (self.year is None or day.year == self.year)
            and (self.month is None or day.month == self.month)
            and (self.day is None or day.day == self.day)
        )


def dates_named(query: str) -> list[NamedDate]:
    """The dates the query names, in order, each once."""
    found: list[tuple[int, NamedDate]] = []
    taken: list[range] = []
    for m in _ISO.finditer(query):
        year, month, day = (int(g) for g in m.groups())
        if 1 <= month <= 12 and 1 <= day <= 31:
            found.append((m.start(), NamedDate(year, month, day)))
            taken.append(range(m.start(), m.end()))
    for m in _NAMED.finditer(query):
        before, name, after, year = m.groups()
        day = before or after
        if name.lower() in _AMBIGUOUS and not (day or year):
            continue
        day_number = int(day) if day and 1 <= int(day) <= 31 else None
        found.append(
            (m.start(), NamedDate(int(year) if year else None, MONTHS.index(name.lower()) + 1, day_number))
        )
        taken.append(range(m.start(), m.end()))
    for m in _YEAR.finditer(query):
        if not any(m.start(1) in span for span in taken):
            found.append((m.start(), NamedDate(int(m.group(1)), None, None)))
    return list(dict.fromkeys(d for _, d in sorted(found, key=lambda f: f[0])))[:MAX_DATES]


def said_on(dates: list[NamedDate], first: date, last: date) -> bool:
    """Whether a memory said from `first` to `last` (days) falls on one of the dates."""
    days = min(max(0, (last - first).days), MAX_SPAN_DAYS)
    return any(d.covers(first + timedelta(days=offset)) for offset in range(days + 1) for d in dates)

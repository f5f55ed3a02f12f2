from datetime import date

from app.memory.recall.core.dates import NamedDate, dates_named, said_on


def test_a_full_date_in_either_order():
    assert dates_named("What painting did Melanie show on October 13, 2023?") == [NamedDate(2023, 10, 13)]
    assert dates_named("What did Gina find on 1 February, 2023?") == [NamedDate(2023, 2, 1)]
    assert dates_named("and on the 3rd of March 2024") == [NamedDate(2024, 3, 3)]
    assert dates_named("on 2023-10-13") == [NamedDate(2023, 10, 13)]


def test_a_month_or_a_year_alone():
    assert dates_named("When did Melanie go camping in June?") == [NamedDate(None, 6, None)]
    assert dates_named("What did they paint in July 2023?") == [NamedDate(2023, 7, None)]
    assert dates_named("How often did she go to the beach in 2023?") == [NamedDate(2023, None, None)]


def test_may_and_march_as_words_are_not_dates():
    assert dates_named("It may rain on the march to the sea") == []
    assert dates_named("Where were they on May 23, 2023?") == [NamedDate(2023, 5, 23)]
    assert dates_named("What happened in May?") == []


def test_no_date_and_few_dates():
    assert dates_named("What does Melanie paint?") == []
    assert len(dates_named(" ".join(f"in {y}" for y in range(2000, 2020)))) == 4


def test_a_memory_is_said_on_a_date_its_span_covers():
    june = dates_named("in June")
    assert said_on(june, date(2023, 5, 30), date(2023, 6, 2))
    assert not said_on(june, date(2023, 5, 1), date(2023, 5, 31))
    day = dates_named("on October 13, 2023")
    assert said_on(day, date(2023, 10, 13), date(2023, 10, 13))
    assert not said_on(day, date(2022, 10, 13), date(2022, 10, 13))

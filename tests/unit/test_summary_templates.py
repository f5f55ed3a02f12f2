"""The name a duplicated Summary Prompt template gets (issue 12)."""

from app.memory.summaries.templates import MAX_NAME, copy_name


def test_a_copy_takes_the_first_free_name_ignoring_case():
    assert copy_name("Default", []) == "Default (copy)"
    assert copy_name("Terse", ["terse (COPY)", "Terse (copy 2)"]) == "Terse (copy 3)"
    assert copy_name("Terse (copy)", ["Terse (copy) (copy)"]) == "Terse (copy) (copy 2)"


def test_a_copy_of_a_long_name_stays_within_the_limit():
    long = "x" * MAX_NAME
    taken = [copy_name(long, [])]
    for _ in range(200):
        taken.append(copy_name(long, taken))
    assert all(len(n) <= MAX_NAME for n in taken) and len(set(taken)) == len(taken)

"""The pure parts of telling lore that comes twice: a book's fingerprint, a free name, entry text
compared for sameness (app/lore/core/twins.py), and Chat Settings' rows (app/lore/core/chat_books.py)."""

from app.lore.core.chat_books import BookInfo, BookRow, Via, chat_book_rows
from app.lore.core.entries import LoreEntry
from app.lore.core.twins import book_fingerprint, free_name, same_text


def entry(id: int, content: str, *keys: str, **kw) -> LoreEntry:
    return LoreEntry(id=id, book_id=kw.pop("book_id", 1), content=content, keys=keys, **kw)


def test_same_text_ignores_runs_of_whitespace_only():
    assert same_text("  A  wolf\n\thowls. ") == "A wolf howls."
    assert same_text("A wolf howls.") != same_text("a wolf howls.")


def test_the_fingerprint_ignores_ids_order_extras_and_whitespace():
    one = [entry(1, "Wolves howl.", "wolf", title="Wolf"), entry(2, "The glade.", "glade", title="Glade")]
    other = [
        entry(
            8, "The  glade.\n", "glade", book_id=5, title="Glade", extra={"uid": 8}, use_group_scoring=False
        ),
        entry(9, "Wolves howl.", "wolf", book_id=5, title="Wolf"),
    ]
    assert book_fingerprint(one) == book_fingerprint(other)


def test_the_fingerprint_changes_with_what_an_entry_says_or_when_it_fires():
    base = [entry(1, "Wolves howl.", "wolf")]
    assert book_fingerprint(base) != book_fingerprint([entry(1, "Wolves sing.", "wolf")])
    assert book_fingerprint(base) != book_fingerprint([entry(1, "Wolves howl.", "wolves")])
    assert book_fingerprint(base) != book_fingerprint([entry(1, "Wolves howl.", "wolf", constant=True)])
    assert book_fingerprint(base) != book_fingerprint([*base, entry(2, "Wolves howl.", "wolf")])


def test_a_book_without_entries_has_no_fingerprint():
    assert book_fingerprint([]) is None


def test_a_free_name_counts_on_from_the_first_free_number():
    assert free_name("Eldoria", []) == "Eldoria"
    assert free_name(" Eldoria ", ["Other"]) == "Eldoria"
    assert free_name("Eldoria", ["Eldoria"]) == "Eldoria (2)"
    assert free_name("eldoria", ["Eldoria", "Eldoria (2)"]) == "eldoria (3)"
    assert free_name("Eldoria", ["Eldoria", "Eldoria (3)"]) == "Eldoria (2)"
    assert free_name("Eldoria (2)", ["Eldoria", "Eldoria (2)"]) == "Eldoria (3)"
    assert free_name("Eldoria (2)", ["Eldoria"]) == "Eldoria (2)"


def test_a_free_name_fits_the_limit():
    long = "x" * 200
    assert free_name(long, [long]) == "x" * 196 + " (2)"
    assert len(free_name("y" * 300, [])) == 200


def test_chat_settings_rows_say_where_each_book_comes_from():
    books = [
        BookInfo(1, "Eldoria", True, False),
        BookInfo(2, "Eldoria (2)", True, False),
        BookInfo(3, "Weather", True, True),
        BookInfo(4, "Old", False, False),
        BookInfo(5, "Spare", True, False),
    ]
    rows = chat_book_rows(
        books, in_chat={2, 4}, characters={1: [(7, "Seraphina")]}, personas={2: [(3, "Ann")]}
    )
    assert rows == [
        BookRow(1, "Eldoria", True, False, (Via("character", "Seraphina", "/characters/7"),)),
        BookRow(2, "Eldoria (2)", True, True, (Via("persona", "Ann", "/personas"),)),
        BookRow(3, "Weather", True, False, (Via("global", "", "/lorebooks/3"),)),
        BookRow(4, "Old", False, True),
        BookRow(5, "Spare", True, False),
    ]
    assert [(r.locked, r.applies) for r in rows] == [
        (True, True),
        (True, True),
        (True, True),
        (False, False),
        (False, False),
    ]
    assert [v.label for r in rows for v in r.via] == ["the character Seraphina", "the persona Ann", "global"]
    assert rows[0].via[0].change == "change on the character page"

"""Issue 21 (19): a full disk gave a generic 500. SQLite is made to run out of room for real: every
connection of the app's engine gets `PRAGMA max_page_count` at the database's size, so a write that needs
a new page fails inside SQLite with SQLITE_FULL, "database or disk is full", as on a full disk. The answer
is 507 with "The disk is full; nothing was changed." on the JSON API, a page and an HTMX form alike; the
write is rolled back, and the same request works once there is room again."""

import html
from contextlib import contextmanager

import pytest
from sqlalchemy import event, text

MESSAGE = "The disk is full; nothing was changed."
BIG = "The lighthouse keeper's long story. " * 6000  # ~200 KB: new pages, whatever is free in the old ones


@contextmanager
def full_disk(sugo):
    """The database cannot grow past its size now, on every connection the app opens meanwhile."""
    engine = sugo.engine
    with engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()

    def limit(dbapi_conn, _record) -> None:
        dbapi_conn.execute(f"PRAGMA max_page_count = {pages}")

    event.listen(engine, "connect", limit)
    engine.dispose()  # pooled connections opened before the limit are closed
    try:
        yield
    finally:
        event.remove(engine, "connect", limit)
        engine.dispose()


def _characters(sugo) -> int:
    with sugo.engine.connect() as conn:
        return conn.execute(text("select count(*) from character")).scalar_one()


@pytest.mark.sqlite_only
def test_a_full_disk_answers_507_with_a_sentence_and_changes_nothing(api, sugo):
    before = _characters(sugo)
    with full_disk(sugo):
        r = api.post("/api/characters", json={"name": "Aria", "description": BIG})
        assert r.status_code == 507, (r.status_code, r.text[:300])
        assert r.json() == {"detail": MESSAGE}

        page = api.post(
            "/characters", data={"name": "Aria", "description": BIG}, headers={"Accept": "text/html"}
        )
        assert page.status_code == 507 and page.headers["content-type"].startswith("text/html"), page.text[
            :300
        ]
        assert MESSAGE in html.unescape(page.text) and "Traceback" not in page.text

        toast = api.post(
            "/characters", data={"name": "Aria", "description": BIG}, headers={"HX-Request": "true"}
        )
        assert toast.status_code == 507 and toast.headers["HX-Retarget"] == "#toasts", toast.text[:300]
        assert MESSAGE in html.unescape(toast.text)
        assert _characters(sugo) == before
    # Room again: the same request goes through.
    r = api.post("/api/characters", json={"name": "Aria", "description": BIG})
    assert r.status_code == 201, r.text[:300]
    assert _characters(sugo) == before + 1


def test_no_room_for_a_file_is_a_full_disk_too(api, sugo):
    """ENOSPC from a file write (not SQLite's own): the same 507, through the app's error handler. (Sugo
    writes no file in a request today; a route of the test's raises what a full disk raises.)"""

    @sugo.app.get("/_test/write-file")
    def _write() -> None:
        raise OSError(28, "No space left on device")

    r = api.get("/_test/write-file")
    assert r.status_code == 507 and r.json() == {"detail": MESSAGE}, r.text

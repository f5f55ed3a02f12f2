"""Issue 21 (19), in a real browser at desktop and phone sizes: a name holding a control character and a
disk that is full are each refused with their sentence, shown where the user looks after pressing Save
(a toast inside the viewport), and nothing is stored. The disk is full for real: SQLite cannot grow the
database past its size (`PRAGMA max_page_count` on every connection), as on a full disk."""

from __future__ import annotations

from playwright.sync_api import Page, expect
from sqlalchemy import text

from tests.integration.test_disk_full import full_disk


def _characters(live) -> list[str]:
    with live.engine.connect() as conn:
        return list(conn.execute(text("select name from character")).scalars())


def test_a_name_with_a_control_character_is_refused_where_the_user_looks(page: Page, live, shot):
    page.goto(f"{live.url}/characters/new")
    # A text field drops typed line breaks; a pasted or scripted value can still carry other controls.
    page.get_by_label("Name").evaluate("(el) => { el.value = 'Aria\\u0007 the bard'; }")
    page.get_by_role("button", name="Save").click()
    toast = page.locator("#toasts .toast-error")
    expect(toast).to_have_text(
        "A character's name cannot contain line breaks, tabs or other control characters."
    )
    expect(toast).to_be_in_viewport()
    shot("name-refused")
    assert _characters(live) == []
    page.get_by_label("Name").fill("Aria the bard")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{live.url}/characters/1")
    assert _characters(live) == ["Aria the bard"]


def test_a_full_disk_is_said_where_the_user_looks_and_nothing_is_saved(page: Page, live, shot):
    page.goto(f"{live.url}/characters/new")
    page.get_by_label("Name").fill("Aria")
    page.get_by_label("Description").fill("The lighthouse keeper's long story. " * 6000)  # needs new pages
    with full_disk(live):
        page.get_by_role("button", name="Save").click()
        toast = page.locator("#toasts .toast-error")
        expect(toast).to_have_text("The disk is full; nothing was changed.")
        expect(toast).to_be_in_viewport()
        shot("disk-full")
        assert _characters(live) == []
    # Room again: the same Save goes through, with what was typed still in the form.
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{live.url}/characters/1")
    assert _characters(live) == ["Aria"]

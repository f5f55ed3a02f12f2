"""The chat list on the home page (issue 11 item 10 b, c, e), desktop and phone: Back keeps the
search and its filtered list, a phone shows a name's end and the date, previews are plain text."""

import re

from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.service import new_message


def _chat(live, name: str, last: str | None = None) -> int:
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        chat = c.post(
            "/api/chats", json={"character_ids": [char["id"]], "name": name, "mode": "conversation"}
        ).json()
    if last is not None:
        with Session(live.engine) as s:
            s.add(new_message(chat["id"], "assistant", "Aria", [last]))
            s.commit()
    return chat["id"]


def test_back_keeps_the_search_and_its_filtered_list(page: Page, live):
    _chat(live, "Harbour walk")
    _chat(live, "Mountain pass")
    page.goto(live.url)
    expect(page.locator(".chat-row")).to_have_count(2)
    page.fill("input[name=q]", "harbour")
    expect(page.locator(".chat-row")).to_have_count(1)
    page.locator(".chat-row", has_text="Harbour walk").click()
    expect(page.locator("#chat")).to_be_visible()
    page.go_back()
    expect(page.locator("input[name=q]")).to_have_value("harbour")
    expect(page.locator(".chat-row")).to_have_count(1)
    expect(page.locator(".chat-row")).to_contain_text("Harbour walk")


def test_a_long_name_keeps_its_end_and_the_row_shows_its_date(page: Page, live, shot):
    long = "Aria and the long walk along the northern coast road – 2026-11-30 23:21 (branch)"
    _chat(live, long)
    page.goto(live.url)
    name = page.locator(".chat-row-name").first
    expect(name).to_contain_text("(branch)")
    # Nothing of the name is cut off: it wraps instead of ending in an ellipsis.
    name.scroll_into_view_if_needed()
    assert name.evaluate("el => el.scrollWidth <= el.clientWidth && el.scrollHeight <= el.clientHeight + 1")
    expect(page.locator(".chat-row time").first).to_be_visible()
    expect(page.locator(".chat-row time").first).to_have_text(re.compile(r"^Today at \d"))
    expect(name).to_have_attribute("title", long)  # the whole name, on hover
    shot("chat-list")


def test_previews_are_plain_text(page: Page, live):
    _chat(live, "Markup", '*She smiles.* "Hello, **friend**!" <b>Welcome</b> to the `inn`.')
    page.goto(live.url)
    preview = page.locator(".chat-row-preview").first
    expect(preview).to_have_text('Aria: She smiles. "Hello, friend!" Welcome to the inn.')

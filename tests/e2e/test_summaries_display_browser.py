"""Issue 12, Chat Summary display: the "Summarise" button for messages no summary covers, the panel as
its own page on desktop, and summarised messages collapsed in the chat view. Desktop and phone."""

from playwright.sync_api import Page, expect

from tests.e2e.test_summaries_browser import _chat, _connect, _entries
from tests.support.model_server import Reply


def test_summarise_the_uncovered_messages_writes_an_entry_for_the_oldest_stretch(page: Page, live, models, shot):
    chat_id = _chat(live, 69)  # 70 messages; 60 older than the tail of 10
    _connect(live, models)
    with live.client() as c:
        c.post(f"/api/chats/{chat_id}/summaries", json={"content": "Written.", "scope": "range", "start": 1, "end": 5})
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#chat-summary")
    gap = section.locator("#summary-uncovered")
    gap.scroll_into_view_if_needed()
    expect(gap).to_contain_text("55 messages older than the recent tail (10) are covered by no summary.")
    expect(gap).to_contain_text("The button summarises the oldest stretch (50 messages, at most 50 at a time); 5 more will remain.")
    shot("uncovered")

    models.script(Reply("They argued about the map for fifty steps.", first_delay_s=1.0))
    gap.locator("#summary-uncovered-generate").click()
    expect(section.locator("#summary-running")).to_contain_text("Writing a summary of messages 6–55")
    expect(section.locator("#summary-uncovered-generate")).to_be_disabled()
    expect(section.locator(".summary-item")).to_have_count(2)
    expect(section.locator(".summary-item").nth(1)).to_contain_text("messages 6–55")
    expect(gap).to_contain_text("5 messages older than the recent tail (10) are covered by no summary.")
    expect(section.locator("#summary-uncovered-generate")).to_have_text("Summarise messages 56–60")
    gap.scroll_into_view_if_needed()
    shot("after")
    assert [(e["first_position"], e["last_position"], e["origin"]) for e in _entries(live, chat_id)] == [
        (1, 5, "user"), (6, 55, "model")]


def test_the_chat_summary_page_on_desktop_works_like_the_settings_panel(page: Page, live, screen, shot):
    chat_id = _chat(live, 12)
    with live.client() as c:
        c.post(f"/api/chats/{chat_id}/summaries", json={"content": "They set out.", "title": "Start", "scope": "range",
                                                        "start": 1, "end": 4})  # fmt: skip
    page.goto(f"{live.url}/chats/{chat_id}")
    link = page.locator("#summary-page-link")
    if screen == "phone":
        # Phones keep Chat Summary in Chat Settings; the page still works when opened.
        expect(link).to_be_hidden()
        page.goto(f"{live.url}/chats/{chat_id}/summaries")
    else:
        shot("chat-header")
        link.click()
    expect(page).to_have_url(f"{live.url}/chats/{chat_id}/summaries")
    expect(page.locator("h1")).to_contain_text("Chat Summary")
    items = page.locator(".summary-item")
    expect(items).to_have_count(1)
    shot("page")

    items.nth(0).locator(".summary-active").click()
    expect(items.nth(0).locator(".summary-active")).to_have_attribute("aria-checked", "false")
    page.locator("#summary-scope-range").check()
    page.locator("#summary-start").fill("5")
    page.locator("#summary-end").fill("7")
    page.locator("#summary-title").fill("Camp")
    page.locator("#summary-content").fill("They make camp by the river.")
    page.locator("#summary-add").click()
    expect(items).to_have_count(2)
    expect(items.nth(1)).to_contain_text("messages 5–7")
    expect(page.locator("h1")).to_have_count(1)  # the panel came back in place, not a page inside the page
    shot("page-after")
    assert [(e["first_position"], e["last_position"], e["active"]) for e in _entries(live, chat_id)] == [
        (1, 4, False), (5, 7, True)]
    page.locator("#summary-back").click()
    expect(page).to_have_url(f"{live.url}/chats/{chat_id}")


def test_chat_settings_links_to_the_page_on_desktop(page: Page, live, screen):
    chat_id = _chat(live, 3)
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    link = page.locator("#summary-open-page")
    if screen == "phone":
        expect(link).to_be_hidden()
        return
    link.click()
    expect(page).to_have_url(f"{live.url}/chats/{chat_id}/summaries")
    expect(page.locator("#summary-panel")).to_be_visible()

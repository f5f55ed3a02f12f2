"""Lorebooks in a real browser, desktop and phone: write a book, test its keywords, chat so that
one entry fires and a bigger one is skipped by the budget, and read why in Active Context."""

import re

from playwright.sync_api import Page, expect

LIBRARY = "The great library of Vellmar holds " + "dusty scrolls and sea charts " * 420  # ~3,000 tokens


def test_lorebook_entries_fire_and_a_skipped_one_is_explained(page: Page, live, models, shot):
    with live.client() as c:
        c.post(
            "/api/connections",
            json={
                "name": "Local",
                "base_url": models.base_url,
                "model": "test-model",
                "context_size": 16384,
                "max_tokens": 200,
            },
        )
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The harbour is quiet."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    page.on("dialog", lambda d: d.accept())

    page.goto(live.url + "/lorebooks")
    expect(page.locator(".empty")).to_contain_text("No lorebooks yet")
    shot("empty-list")
    page.fill("input[name=name]", "Vellmar")
    page.get_by_role("button", name="Create").click()
    expect(page.locator("h1")).to_contain_text("Vellmar")
    expect(page.locator("#token-budget")).to_have_value("2048")

    for title, keys, content in (
        ("Library", "library, archive", LIBRARY),
        ("Tobiah", "Tobiah", "Tobiah keeps the lighthouse and lost an eye in the war."),
    ):
        page.get_by_role("link", name="New entry").click()
        page.fill("input[name=title]", title)
        page.fill("#entry-keys", keys)
        page.fill("#entry-content", content)
        if title == "Tobiah":
            shot("entry-editor")
        page.get_by_role("button", name="Save entry").click()
        expect(page.locator("#book-message")).to_contain_text("Entry added")
    expect(page.locator(".lore-entry")).to_have_count(2)
    shot("book")
    page.fill("input[name=q]", "lighthouse")
    expect(page.locator(".lore-entry")).to_have_count(1)
    expect(page.locator(".lore-entry")).to_contain_text("Tobiah")
    page.fill("input[name=q]", "")
    expect(page.locator(".lore-entry")).to_have_count(2)

    # The keyword test panel: Tobiah fires, the library entry never fits 2,048 tokens.
    page.locator("#keyword-test summary").click()
    page.fill("#keyword-test-text", "Take me to the library, then to Tobiah.")
    page.get_by_role("button", name="Test keywords").click()
    expect(page.locator("#test-skipped-notice")).to_contain_text(
        "1 matching lore entry was skipped by token budget."
    )
    expect(page.locator(".lore-skipped")).to_contain_text("lorebook budget")
    expect(page.locator(".lore-fires")).to_contain_text("Tobiah")
    shot("keyword-test")

    # Attach it to the chat in Chat Settings, then chat.
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    panel.get_by_label("Vellmar").check()
    panel.get_by_role("button", name="Save settings").click()
    expect(panel.get_by_text("Saved.")).to_be_visible()
    panel.get_by_role("button", name="Close Chat Settings").click()
    page.fill("#composer-input", "Tell me about the library and Tobiah.")
    page.click("#send-button")
    expect(page.locator("#send-button")).to_be_visible(timeout=15000)
    assert "Tobiah keeps the lighthouse" in "\n".join(
        m["content"] for m in models.last_request.json["messages"]
    )

    page.click("#settings-button")
    expect(panel.locator("#active-context")).to_contain_text("1 active, 1 skipped")
    notice = panel.locator("#lore-skipped-notice")
    expect(notice).to_contain_text("1 matching lore entry was skipped by token budget.")
    expect(notice).to_contain_text("Token Budget of “Vellmar” (2048 tokens")
    notice.locator("summary").click()
    expect(notice).to_contain_text("Library (Vellmar) — lorebook budget; matched library")
    notice.scroll_into_view_if_needed()
    shot("active-context")


def test_entry_actions_swap_fragments_not_the_page(page: Page, live, shot):
    """Toggle, search, bulk enable, delete, Overview and Attached to each change their own part of
    the page: the page is never reloaded (a marker set by script survives), and no answer is a
    whole page."""
    with live.client() as c:
        book = c.post("/api/lorebooks", json={"name": "Vellmar"}).json()
        for i in range(12):
            c.post(
                f"/api/lorebooks/{book['id']}/entries",
                json={
                    "title": f"Place {i}",
                    "keys": [f"place{i}", "harbour" if i % 3 == 0 else "hills"],
                    "content": f"Place {i} lies by the water; its people fish and trade salt.",
                },
            )
        c.post("/api/characters", json={"name": "Aria"})
    answers: list[str] = []
    page.on("response", lambda r: answers.append(r.text()) if r.request.headers.get("hx-request") else None)
    page.on("dialog", lambda d: d.accept())
    page.goto(f"{live.url}/lorebooks/{book['id']}")
    page.evaluate("window.sugoMarker = 'still here'")
    expect(page.locator(".lore-entry")).to_have_count(12)

    row = page.locator(".lore-entry", has_text="Place 4")
    row.get_by_role("button", name="Disable Place 4").click()
    expect(row.locator(".badge-warn")).to_have_text("off")
    expect(row).to_have_class(re.compile("is-off"))
    expect(page.locator("#entry-count")).to_contain_text("12 · 1 off")
    row.get_by_role("button", name="Enable Place 4").click()
    expect(row).not_to_have_class(re.compile("is-off"))
    expect(page.locator("#entry-count")).not_to_contain_text("off")

    page.fill("input[name=q]", "harbour")
    expect(page.locator(".lore-entry")).to_have_count(4)
    expect(page.locator("#entry-count")).to_contain_text("4 matching “harbour”")
    page.get_by_role("button", name="Disable these").click()
    expect(page.locator("#book-message")).to_have_text("Disabled 4 entries.")
    expect(page.locator(".lore-entry.is-off")).to_have_count(4)
    expect(page.locator("input[name=q]")).to_have_value("harbour")
    shot("bulk-disabled")
    page.get_by_role("button", name="Enable these").click()
    expect(page.locator("#book-message")).to_have_text("Enabled 4 entries.")
    expect(page.locator(".lore-entry.is-off")).to_have_count(0)
    page.fill("input[name=q]", "")
    expect(page.locator(".lore-entry")).to_have_count(12)
    expect(page.get_by_role("button", name="Disable all")).to_be_visible()

    page.locator(".lore-entry", has_text="Place 7").get_by_role("button", name="Delete entry Place 7").click()
    expect(page.locator(".lore-entry")).to_have_count(11)
    expect(page.locator("#book-message")).to_have_text("Entry deleted.")
    expect(page.locator("#entry-count")).to_contain_text("11")

    page.locator("#overview summary").click()
    page.locator("#overview input[name=name]").fill("Vellmar Isles")
    page.locator("#overview").get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#book-title")).to_contain_text("Vellmar Isles")
    expect(page.locator("#book-message")).to_have_text("Saved.")
    expect(page.locator("#overview")).to_have_attribute("open", "")
    page.locator("#attachments summary").click()
    page.locator("#attachments").get_by_label("Aria").check()
    page.get_by_role("button", name="Save attachments").click()
    expect(page.locator("#book-message")).to_have_text("Attachments saved.")
    expect(page.locator("#attachments summary")).to_contain_text("1 place")
    shot("fragments")

    assert page.evaluate("window.sugoMarker") == "still here"
    assert answers and not [a for a in answers if "<html" in a]

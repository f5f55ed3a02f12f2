"""Issue 11 item 5: one vocabulary for where lorebook text goes. An entry found by its keys is sent
just above the newest turns whatever its position, and the entry list, Active Context and Peek
Prompt all say so; a constant entry keeps its position's name. Desktop and phone."""

from playwright.sync_api import Page, expect


def test_keyword_and_constant_entries_are_placed_in_the_same_words_everywhere(page: Page, live, models, shot):
    with live.client() as c:
        c.post("/api/connections", json={"name": "Local", "base_url": models.base_url, "model": "test-model"})
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The harbour is quiet."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        book = c.post("/api/lorebooks", json={"name": "Vellmar"}).json()
        for entry in (
            {
                "title": "Tobiah",
                "keys": ["Tobiah"],
                "content": "Tobiah keeps the lighthouse.",
                "position": "before_char",
            },
            {
                "title": "Tides",
                "keys": [],
                "constant": True,
                "content": "The tides rule Vellmar.",
                "position": "before_char",
            },
        ):
            assert c.post(f"/api/lorebooks/{book['id']}/entries", json=entry).status_code == 201
        c.put(f"/api/chats/{chat['id']}/lorebooks", json={"book_ids": [book["id"]]})

    page.goto(f"{live.url}/lorebooks/{book['id']}")
    tobiah = page.locator(".lore-entry", has_text="Tobiah keeps")
    expect(tobiah).to_contain_text("just above the newest turns")
    expect(tobiah).not_to_contain_text("before the character")
    tides = page.locator(".lore-entry", has_text="The tides")
    expect(tides).to_contain_text("sent every turn, no keys needed · order 100 · before the character")
    shot("entry-list")

    page.goto(f"{live.url}/chats/{chat['id']}")
    page.fill("#composer-input", "Is Tobiah still at the lighthouse?")
    page.click("#send-button")
    expect(page.locator("#send-button")).to_be_visible(timeout=15000)
    page.click("#settings-button")
    active = page.locator("#settings-panel #active-context")
    expect(active.locator("li", has_text="Tobiah")).to_contain_text("just above the newest turns")
    expect(active.locator("li", has_text="Tides")).to_contain_text("before the character")
    active.scroll_into_view_if_needed()
    shot("active-context")
    page.get_by_role("button", name="Close Chat Settings").click()

    page.click("#peek-button")
    peek = page.locator("#peek-dialog")
    expect(peek).to_contain_text("Just above the newest turns")
    expect(peek).to_contain_text("Tobiah keeps the lighthouse.")

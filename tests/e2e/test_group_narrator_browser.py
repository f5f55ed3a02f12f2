"""A group's narrator of its own, in the browser (issue 27): chosen in Chat Settings, Sugo's Narrator
card joins the group muted as its narrator, and can be picked under the message box. Desktop and phone."""

from playwright.sync_api import Page, expect


def test_give_a_group_a_narrator_of_its_own(page: Page, live, models, shot):
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        ids = [
            c.post("/api/characters", json={"name": n, "first_mes": ""}).json()["id"]
            for n in ("Aria", "Bram")
        ]
        chat = c.post("/api/chats", json={"character_ids": ids}).json()
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    group = panel.locator("#group-turns")
    group.get_by_label("Narrator").select_option("standalone")
    group.get_by_label("Narrator").scroll_into_view_if_needed()
    shot("narrator-choice")
    panel.get_by_role("button", name="Save settings").click()
    expect(panel.get_by_text("Saved.")).to_be_in_viewport()
    row = panel.locator("#group-turns .member-row", has_text="Narrator")
    expect(row.get_by_label("Muted")).to_be_checked()
    expect(panel.locator("#group-turns select[name=narrator_id] option:checked")).to_have_text("Narrator")
    row.scroll_into_view_if_needed()
    shot("narrator-joined")
    panel.get_by_role("button", name="Close Chat Settings").click()
    page.reload()
    expect(page.locator("#speaker-select option", has_text="Narrator")).to_have_count(1)
    models.script("*The lanterns flicker over the square.*")
    page.locator("#speaker-select").select_option(label="Narrator")
    page.fill("#composer-input", "Describe the square.")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".msg-name")).to_have_text("Narrator")
    expect(reply).to_be_in_viewport()
    shot("narrator-spoke")

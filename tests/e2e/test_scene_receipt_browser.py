"""The memory receipt under a reply (issue 14): with Advanced Memory on, each reply version shows the
estimated context against the ceiling, and opened, what was recalled or why nothing was."""

from playwright.sync_api import Page, expect

from tests.support.scenes import stored_scene


def test_a_reply_shows_its_memory_receipt_and_an_earlier_version_keeps_its_own(
    page: Page, live, models, shot
):
    with live.client() as c:
        conn = c.post(
            "/api/connections",
            json={
                "name": "Local test",
                "base_url": models.base_url,
                "model": "test-model",
                "context_size": 8192,
                "max_tokens": 200,
            },
        ).json()
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "connection_id": conn["id"]}).json()
    stored_scene(
        live,
        chat["id"],
        [("You", "We cross the rope bridge."), ("Aria", "I hold the line.")],
        state="written",
        summary="Aria and the user crossed the rope bridge at dusk.",
    )
    with live.client() as c:
        r = c.put(
            f"/api/chats/{chat['id']}/options",
            json={"settings": {"advanced_memory": True, "adv_max_context": 20000, "adv_check_interval": 100}},
        )
        assert r.status_code == 200, r.text
    page.goto(f"{live.url}/chats/{chat['id']}")
    models.script("The wind picks up over the valley.", "A second telling of the wind.")
    page.fill("#composer-input", "Where are we headed now?")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".msg-text")).to_contain_text("The wind picks up")
    receipt = reply.locator(".receipt")
    expect(receipt.locator("summary")).to_contain_text("Memory · Context: ~")
    expect(receipt.locator("summary")).to_contain_text("of 20,000 tokens")
    receipt.locator("summary").click()
    # The scene's messages are still in the window (it never reached the ceiling): nothing is recalled.
    expect(receipt.locator("li")).to_contain_text(
        ["Nothing recalled: no earlier scenes outside the current window."]
    )
    receipt.scroll_into_view_if_needed()
    shot("receipt")

    # A new version has its own receipt; going back shows the first one's.
    reply.locator("[data-action='swipe-new']").click()
    expect(reply.locator(".msg-text")).to_contain_text("A second telling")
    expect(reply.locator(".swipe-counter")).to_have_text("2/2")
    expect(reply.locator(".receipt summary")).to_contain_text("Memory · Context: ~")
    reply.locator(".swipe-left").click()
    expect(reply.locator(".swipe-counter")).to_have_text("1/2")
    expect(reply.locator(".msg-text")).to_contain_text("The wind picks up")
    expect(reply.locator(".receipt summary")).to_contain_text("of 20,000 tokens")

    # Turned off, new replies carry no receipt.
    with live.client() as c:
        c.put(f"/api/chats/{chat['id']}/options", json={"settings": {"advanced_memory": False}})
    models.script("Plain reply.")
    page.fill("#composer-input", "And now?")
    page.click("#send-button")
    plain = page.locator("article.msg-assistant").last
    expect(plain.locator(".msg-text")).to_contain_text("Plain reply.")
    expect(plain.locator(".receipt")).to_have_count(0)

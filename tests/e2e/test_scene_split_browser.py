"""A reply split at its scene breaks (issue 14, Advanced Memory on): once it ends, the page shows
each part as its own message, as a reload does. Desktop and phone."""

import threading

from playwright.sync_api import Page, expect

from tests.support.model_server import Reply

REPLY = "Bram sets the blade down and wipes his hands.\n\n***\n\nFar away, in the capital, the queen reads a letter."


def test_the_parts_of_a_split_reply_show_as_messages_once_it_ends(page: Page, live, models, shot):
    with live.client() as c:
        r = c.post(
            "/api/connections",
            json={
                "name": "Local test",
                "base_url": models.base_url,
                "model": "test-model",
                "context_size": 8192,
                "max_tokens": 200,
            },
        )
        assert r.status_code == 201, r.text
        char = c.post("/api/characters", json={"name": "Bram", "first_mes": "Hm?"}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        settings = {"advanced_memory": True, "adv_check_interval": 100}
        assert c.put(f"/api/chats/{chat['id']}/options", json={"settings": settings}).status_code == 200
    page.goto(f"{live.url}/chats/{chat['id']}")
    # The model holds its answer until the test has seen the reply being written.
    held = threading.Event()
    models.script(Reply(text=REPLY, chunk_size=3, delay_s=0.02, hold=held))
    page.fill("#composer-input", "Forge me a blade")
    page.click("#send-button")
    expect(page.locator("#stop-button")).to_be_visible()
    held.set()
    expect(page.locator("#send-button")).to_be_visible()  # the reply ended
    replies = page.locator("article.msg-assistant")
    expect(replies).to_have_count(3)  # the greeting and the two parts
    expect(replies.nth(1).locator(".msg-text")).to_have_text("Bram sets the blade down and wipes his hands.")
    expect(replies.nth(2).locator(".msg-text")).to_contain_text(
        "Far away, in the capital, the queen reads a letter."
    )
    expect(replies.nth(2).locator(".msg-text hr")).to_have_count(1)  # the break line heads the second part
    expect(page.locator("article.msg")).to_have_count(4)
    shot("split")
    with live.client() as c:
        stored = c.get(f"/api/chats/{chat['id']}/messages").json()
    assert [
        int(i) for i in page.locator("article.msg").evaluate_all("els => els.map(e => e.dataset.id)")
    ] == [m["id"] for m in stored]
    page.reload()
    expect(page.locator("article.msg")).to_have_count(4)

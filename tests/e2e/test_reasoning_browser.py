"""Issue 21 items 4 and 5 in the browser, desktop and phone: a reasoning model's thinking streams into a
live "Thinking…" fold above the reply, ends folded as "Thought for N s" and opens on a click, never in
the reply text; a reply that is only thinking is shown failed with its sentence and Regenerate at hand."""

import re
import threading

from playwright.sync_api import Page, expect

from app.generation.reasoning import ONLY_THINKING
from tests.support.model_server import Reply

THOUGHT = "The traveller greets Aria; she should bow and ask about the road north."
SAID = "Aria bows low. Safe travels, friend?"


def _open_chat(page: Page, live, models) -> None:
    with live.client() as c:
        r = c.post(
            "/api/connections",
            json={
                "name": "Local R1",
                "base_url": models.base_url,
                "model": "test-model",
                "context_size": 8192,
                "max_tokens": 200,
            },
        )
        assert r.status_code == 201, r.text
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Welcome, traveller."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    page.goto(f"{live.url}/chats/{chat['id']}")


def _send(page: Page, text: str) -> None:
    page.fill("#composer-input", text)
    page.click("#send-button")


def test_thinking_streams_into_a_fold_that_ends_as_thought_for_and_opens_on_click(
    page: Page, live, models, shot
):
    _open_chat(page, live, models)
    hold = threading.Event()  # the model thinks until the test has looked at the page
    try:
        models.script(Reply(text=SAID, reasoning=THOUGHT, hold=hold, chunk_size=6))
        _send(page, "Hello there")
        reply = page.locator("article.msg-assistant").last
        fold = reply.locator("details.reasoning")
        expect(fold.locator(".reasoning-label")).to_have_text("Thinking…")
        expect(fold).to_be_in_viewport()
        expect(fold.locator(".reasoning-text")).to_be_hidden()  # folded unless the user opens it
        expect(reply.locator(".msg-text .typing")).to_be_visible()
        fold.locator("summary").click()
        expect(fold.locator(".reasoning-text")).to_have_text(THOUGHT)  # the thinking so far, live
        shot("thinking")
    finally:
        hold.set()
    expect(page.locator("#send-button")).to_be_visible()
    expect(reply.locator(".msg-text")).to_have_text(SAID)
    fold = reply.locator("details.reasoning")
    expect(fold.locator(".reasoning-label")).to_have_text(
        re.compile(r"^Thought for (less than a second|\d+ (s|min))")
    )
    expect(fold.locator(".reasoning-text")).to_be_hidden()  # the finished reply shows it folded
    expect(reply.locator(".msg-text")).not_to_contain_text("bow and ask")
    fold.locator("summary").click()
    expect(fold.locator(".reasoning-text")).to_be_visible()
    expect(fold.locator(".reasoning-text")).to_have_text(THOUGHT)
    expect(fold.locator(".reasoning-text")).to_be_in_viewport()
    shot("opened")
    # after a reload too, from what was stored
    page.reload()
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".reasoning-label")).to_have_text(re.compile(r"^Thought for"))
    expect(reply.locator(".msg-text")).to_have_text(SAID)


def test_a_reply_that_is_only_thinking_fails_with_regenerate_at_hand(page: Page, live, models, shot):
    _open_chat(page, live, models)
    models.script(Reply(text="<think>Hmm. What would Aria say to this? Perhaps nothing", chunk_size=5))
    _send(page, "Hello there")
    reply = page.locator("article.msg-assistant").last
    error = reply.locator(".msg-error")
    expect(error).to_contain_text(ONLY_THINKING)
    regenerate = error.get_by_role("button", name="Regenerate")
    expect(regenerate).to_be_visible()
    expect(regenerate).to_be_in_viewport()
    expect(reply.locator(".reasoning-label")).to_have_text(re.compile(r"^Thought for"))
    expect(reply.locator(".msg-text")).to_have_text("")
    shot("only-thinking")
    models.script(Reply(text=SAID))
    regenerate.click()
    expect(reply.locator(".msg-text")).to_have_text(SAID)
    expect(reply.locator(".swipe-counter")).to_have_text("2/2")
    expect(reply.locator(".msg-error")).to_have_count(0)
    expect(reply.locator("details.reasoning")).to_have_count(0)  # this version did not think

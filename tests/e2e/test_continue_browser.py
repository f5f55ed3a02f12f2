"""Issue 11 item 7: a visible Reply when the chat ends on the user's message, Continue, Impersonate,
and their shortcuts on desktop. Desktop and phone."""

import re
import threading
import time

import pytest
from playwright.sync_api import Page, expect

from app.prompt.core.builder import CONTINUE_NUDGE
from tests.support.model_server import Reply


def _chat_with_a_reply(page: Page, live, models, reply: str = "The hammer rises") -> int:
    """A chat with Bram whose last message is his reply to the user, open in the page."""
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
    page.goto(f"{live.url}/chats/{chat['id']}")
    models.script(reply)
    page.fill("#composer-input", "Forge me a blade")
    page.click("#send-button")
    expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text(reply)
    expect(page.locator("#send-button")).to_be_visible()
    return chat["id"]


def _continuation(halfway: threading.Event) -> Reply:
    """The continuation of "The hammer rises", held after four deltas until the test sets `halfway`."""
    return Reply(
        text="and falls, and the sparks fly across the dark forge.",
        chunk_size=3,
        delay_s=0.03,
        hold=halfway,
        hold_after_chunks=4,
    )


def _stored(live, chat_id: int) -> list[dict]:
    with live.client() as c:
        return c.get(f"/api/chats/{chat_id}/messages").json()


def test_reply_shows_once_the_last_reply_is_deleted_and_asks_for_one(page: Page, live, models, shot):
    chat_id = _chat_with_a_reply(page, live, models)
    expect(page.locator("#reply-button")).to_be_hidden()
    page.on("dialog", lambda d: d.accept())
    last = page.locator("article.msg-assistant").last
    last.hover()
    last.get_by_role("button", name="Delete message").click()
    expect(page.locator("article.msg")).to_have_count(2)
    expect(page.locator("#reply-button")).to_be_visible()
    shot("reply-button")

    # The model holds its answer until the test has seen the reply being written.
    held = threading.Event()
    models.script(
        Reply(text="Bram hammers the glowing steel until it sings.", chunk_size=3, delay_s=0.03, hold=held)
    )
    page.click("#reply-button")
    expect(page.locator("#stop-button")).to_be_visible()
    expect(page.locator("#reply-button")).to_be_hidden()
    held.set()
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".msg-text")).to_have_text("Bram hammers the glowing steel until it sings.")
    expect(page.locator("#reply-button")).to_be_hidden()
    assert [m["role"] for m in _stored(live, chat_id)] == ["assistant", "user", "assistant"]


def test_continue_extends_the_shown_reply_and_keeps_it(page: Page, live, models, shot):
    chat_id = _chat_with_a_reply(page, live, models)
    page.click("#more-button")
    menu = page.locator("#composer-menu")
    expect(menu).to_be_visible()
    shot("menu")
    # The model pauses after four deltas until the test has seen the continuation half-way.
    halfway = threading.Event()
    models.script(_continuation(halfway))
    menu.get_by_role("menuitem", name="Continue").click()
    expect(menu).to_be_hidden()
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".continuation")).to_contain_text("and falls")  # streaming after the kept text
    expect(reply.locator(".msg-text")).to_contain_text("The hammer rises and falls")
    expect(page.locator("#stop-button")).to_be_visible()  # still streaming
    shot("continuing")
    halfway.set()
    expect(reply.locator(".msg-text")).to_have_text(
        "The hammer rises and falls, and the sparks fly across the dark forge."
    )
    expect(page.locator("article.msg")).to_have_count(3)
    assert models.last_request.json["messages"][-1] == {"role": "system", "content": CONTINUE_NUDGE}
    page.reload()
    expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text(
        "The hammer rises and falls, and the sparks fly across the dark forge."
    )
    assert len(_stored(live, chat_id)) == 3


def test_impersonate_fills_the_composer_and_sends_nothing(page: Page, live, models, shot):
    chat_id = _chat_with_a_reply(page, live, models)
    models.script(Reply(text="I take the blade and test its edge on my thumb.", chunk_size=3, delay_s=0.02))
    page.click("#more-button")
    page.locator("#composer-menu").get_by_role("menuitem", name="Impersonate").click()
    composer = page.locator("#composer-input")
    expect(composer).to_have_value("I take the blade and test its edge on my thumb.")
    expect(composer).to_be_focused()
    expect(page.locator("#send-button")).to_be_visible()
    shot("impersonated")
    assert len(_stored(live, chat_id)) == 3
    assert "point of view of User" in models.last_request.json["messages"][-1]["content"]
    # The user edits it, then sends it as their own.
    composer.press("End")
    composer.type(" Fine work.")
    models.script("Bram nods.")
    page.click("#send-button")
    expect(page.locator("article.msg-user").last.locator(".msg-text")).to_have_text(
        "I take the blade and test its edge on my thumb. Fine work."
    )
    expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text("Bram nods.")


@pytest.mark.parametrize("screen", ["desktop"])
def test_alt_enter_continues_and_alt_i_impersonates(page: Page, live, models):
    chat_id = _chat_with_a_reply(page, live, models)
    page.focus("#composer-input")
    models.script("and falls.")
    page.keyboard.press("Alt+Enter")
    expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text(
        "The hammer rises and falls."
    )
    expect(page.locator("#send-button")).to_be_visible()
    assert page.locator("#composer-input").input_value() == ""  # Alt+Enter did not send
    models.script("I wipe my brow.")
    page.keyboard.press("Alt+i")
    expect(page.locator("#composer-input")).to_have_value("I wipe my brow.")
    assert len(_stored(live, chat_id)) == 3
    # The menu by keyboard: it opens on its first action, arrows move, Esc closes it.
    page.focus("#more-button")
    page.keyboard.press("Enter")
    expect(page.locator("#continue-button")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.locator("#impersonate-button")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#composer-menu")).to_be_hidden()
    expect(page.locator("#more-button")).to_be_focused()


def test_stop_keeps_a_partial_continuation_and_ends_an_impersonation(page: Page, live, models):
    chat_id = _chat_with_a_reply(page, live, models)
    models.script(Reply(text="and falls " * 300, chunk_size=4, delay_s=0.02))
    page.click("#more-button")
    page.locator("#composer-menu").get_by_role("menuitem", name="Continue").click()
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".continuation")).to_contain_text("and falls and falls")
    page.click("#stop-button")
    expect(page.locator("#send-button")).to_be_visible()
    expect(reply.locator(".badge-warn")).to_have_text("incomplete")
    expect(reply.locator(".msg-text")).to_contain_text("The hammer rises and falls and falls")
    last = _stored(live, chat_id)[-1]
    assert last["status"] == "partial" and last["content"].startswith("The hammer rises and falls and falls")

    models.script(Reply(text="I step back " * 300, chunk_size=4, delay_s=0.02))
    page.click("#more-button")
    page.locator("#composer-menu").get_by_role("menuitem", name="Impersonate").click()
    composer = page.locator("#composer-input")
    expect(composer).to_have_value(re.compile(r"^I step back I step back"))
    page.click("#stop-button")
    expect(page.locator("#send-button")).to_be_visible()
    expect(composer).to_be_editable()
    kept = composer.input_value()
    assert 0 < len(kept) < len("I step back " * 300)
    assert len(_stored(live, chat_id)) == 3


def test_continue_shows_its_words_once_while_the_server_has_stored_some(page: Page, live, models):
    """Found by a run under load: Continue fetched the message again when its stream began, and the
    answer already held the continuation's first words (the server stores a reply as it streams), so
    they showed twice ("rises and fa and falls"). The page holds what is continued: nothing is fetched."""
    _chat_with_a_reply(page, live, models)
    halfway = threading.Event()
    models.script(_continuation(halfway))
    fetched: list[str] = []

    def slow_message(route) -> None:
        # A loaded machine: the message's page part comes back after the server stored the first words.
        fetched.append(route.request.url)
        time.sleep(1.5)
        route.continue_()

    page.route(re.compile(r".*/chats/\d+/messages/\d+$"), slow_message)
    page.click("#more-button")
    page.locator("#composer-menu").get_by_role("menuitem", name="Continue").click()
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".continuation")).to_have_text("and falls, a")
    expect(reply.locator(".msg-text")).to_have_text("The hammer rises and falls, a")
    assert fetched == []  # the server's render replaces the message at the end, not before
    halfway.set()
    expect(reply.locator(".msg-text")).to_have_text(
        "The hammer rises and falls, and the sparks fly across the dark forge."
    )

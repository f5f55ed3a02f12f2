"""Two Sugo servers on one PostgreSQL database (issue 26), in a real browser: a page served by one
server shows the reply the other writes as it grows, and its Stop button stops it there."""

from __future__ import annotations

import re
import threading

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres

TEXT = "The lantern sways and then " * 60


def test_a_page_of_one_server_shows_the_reply_the_other_writes_growing_and_stops_it(
    page: Page, two_servers, models, shot
):
    writer, reader = two_servers
    with writer.client() as api:
        add_connection(api, models)
        chat_id = new_chat(api, [add_character(api)["id"]])["id"]
        held = threading.Event()
        models.script(Reply(text=TEXT, chunk_size=9, delay_s=0.05, hold=held, hold_after_chunks=4))
        events: list = []
        writing = threading.Thread(
            target=lambda: events.extend(
                read_sse(
                    api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Go on"})
                )
            ),
            daemon=True,
        )
        writing.start()
        wait_for(
            lambda: (
                (last := api.get(f"/api/chats/{chat_id}/messages").json()[-1])["status"] == "streaming"
                and last["content"]
            ),
            what="the writing server's partial reply stored",
        )
        # The page comes from the other server: it knows a reply is being written, and follows it.
        page.goto(f"{reader.url}/chats/{chat_id}")
        reply = page.locator("article.msg-assistant").last
        expect(reply).to_have_class(re.compile(r"\bis-streaming\b"))
        expect(reply.locator(".msg-text")).to_contain_text("The lantern sways and then")
        expect(page.locator("#stop-button")).to_be_visible()
        expect(page.locator("#send-button")).to_be_hidden()
        shot("following-held")
        held.set()  # the model goes on: the reply grows on the page
        expect(reply.locator(".msg-text")).to_contain_text("and then The lantern sways and then The lantern")
        page.click("#stop-button")
        expect(page.locator("#send-button")).to_be_visible()
        expect(reply.locator(".badge-warn")).to_have_text("incomplete")
        expect(page.locator("#stop-button")).to_be_hidden()
        writing.join(30)
        assert [name for name, _ in events][-1] == "stopped"
        last = api.get(f"/api/chats/{chat_id}/messages").json()[-1]
        assert last["status"] == "partial" and 0 < len(last["content"]) < len(TEXT)
        expect(reply.locator(".msg-text")).to_contain_text(last["content"].strip()[-40:])
        reply.scroll_into_view_if_needed()
        shot("stopped")

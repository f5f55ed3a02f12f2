"""Issue 24: a reminder that comes due while its chat is open appears there without a reload, desktop
and phone: the open page asks now and then whether Sugo started a reply by itself (SUGO_CHAT_WATCH_S,
half a second here) and follows it as it streams; a message written from elsewhere (another tab, the
API) appears the same way."""

import asyncio
import threading
from datetime import timedelta

from playwright.sync_api import Page, expect

from app.generation.reply import start as start_reply
from app.tools.registry import ToolContext
from app.tools.tasks.firing import fire_due_tasks
from tests.support.live import LiveSugo
from tests.support.model_server import Reply


def test_a_reminder_coming_due_appears_in_the_open_chat(page: Page, tmp_path, models, shot):
    with LiveSugo(tmp_path / "data", chat_watch_s=0.5) as live, live.client() as c:
        c.post(
            "/api/connections", json={"name": "m", "base_url": models.base_url, "model": "test-model"}
        ).raise_for_status()
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Welcome back."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        services = live.app.state.services
        tool = services.tools.get("create_task")
        ctx = ToolContext(services, chat["id"], char["id"], None, None, services.clock.now())
        tool.run(ctx, tool.args.model_validate({"purpose": "Stretch your legs.", "minutes_from_now": 1}))
        page.goto(f"{live.url}/chats/{chat['id']}")
        expect(page.locator("article.msg-assistant")).to_have_count(1)
        hold = threading.Event()
        models.script(Reply(text="Time to stretch your legs, as you asked!", hold=hold, chunk_size=5))
        services.clock.advance(timedelta(minutes=2))
        loop = services.scheduler._eventloop  # the loop the app's replies run on
        try:
            started = asyncio.run_coroutine_threadsafe(fire_due_tasks(services, start_reply), loop).result(30)
            assert started == 1
            reply = page.locator("article.msg-assistant").nth(1)
            expect(reply).to_be_visible()
            shot("streaming")
        finally:
            hold.set()
        expect(reply.locator(".msg-text")).to_have_text("Time to stretch your legs, as you asked!")
        expect(reply).to_be_in_viewport()
        expect(reply.locator(".tool-notice")).to_contain_text("Written for a reminder that came due")
        shot("arrived")


def test_a_message_written_elsewhere_appears_without_a_reload(page: Page, tmp_path, models):
    with LiveSugo(tmp_path / "data", chat_watch_s=0.5) as live, live.client() as c:
        c.post(
            "/api/connections", json={"name": "m", "base_url": models.base_url, "model": "test-model"}
        ).raise_for_status()
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Welcome back."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        page.goto(f"{live.url}/chats/{chat['id']}")
        expect(page.locator("article.msg")).to_have_count(1)
        models.script(Reply(text="Answered in another tab."))
        r = c.post(
            f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "From my other tab"}
        )
        r.read()
        expect(page.locator("article.msg-user .msg-text")).to_have_text("From my other tab")
        expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text(
            "Answered in another tab."
        )

"""Issue 12, Automatic Summaries and Backfill Summary in Chat Settings → Chat Summary: the automatic
switch and its "every N user messages" are saved with the settings (a bad number is refused with a
sentence); Backfill shows its progress bar and step, Stop ends it after the call in hand, and the
finished entries are listed. Desktop and phone."""

import threading

from playwright.sync_api import Page, expect

from tests.conftest import read_sse
from tests.e2e.test_summaries_browser import _chat, _connect, _entries
from tests.support.model_server import Reply
from tests.support.waiting import wait_for


def test_enable_automatic_summaries_and_save(page: Page, live, shot):
    chat_id = _chat(live, 3)
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    group = page.locator("#summary-automatic")
    group.scroll_into_view_if_needed()
    expect(group).to_contain_text("Automatic Summaries")
    expect(group.locator("#summary-auto")).not_to_be_checked()
    expect(group.locator("#summary-every")).to_have_value("5")
    group.locator("#summary-auto").check()
    group.locator("#summary-every").fill("3")
    shot("automatic")
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    expect(page.locator("#chat-settings-form .notice-ok")).to_be_visible()
    with live.client() as c:
        settings = c.get(f"/api/chats/{chat_id}").json()["settings"]
    assert settings["summary_auto"] is True and settings["summary_every"] == 3
    page.reload()
    expect(page.locator("#summary-auto")).to_be_checked()
    expect(page.locator("#summary-every")).to_have_value("3")


def test_backfill_shows_progress_and_stop_keeps_the_finished_entries(page: Page, live, models, shot):
    chat_id = _chat(live, 69)  # 70 messages; older than the tail of 10: 60, two steps of 50 and 10
    _connect(live, models)
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#chat-summary")
    start = section.locator("#summary-backfill-start")
    start.scroll_into_view_if_needed()
    expect(section.locator("#summary-backfill")).to_contain_text(
        "Summarises the 60 uncovered older messages, 50 per model call"
    )

    # The first step is held at the model until Stop was pressed: a step that ended before the click
    # landed would have let the second begin, and Stop would come after it.
    first = threading.Event()
    models.script(Reply("The first fifty steps along the road.", gate=first), "Never asked for.")
    start.click()
    running = section.locator("#summary-backfill-running")
    expect(running.locator("#summary-backfill-step")).to_have_text("Backfill: step 1 of 2: messages 1–50")
    expect(running.locator("progress")).to_have_attribute("max", "2")
    expect(running.locator("progress")).to_have_attribute("value", "0")
    running.scroll_into_view_if_needed()
    shot("backfill-running")
    running.locator("#summary-backfill-stop").click()
    expect(running.locator("#summary-backfill-step")).to_contain_text("(stopping after this step)")
    first.set()
    expect(section.locator("#summary-backfill-stopped")).to_have_text(
        "Backfill was stopped after 1 of 2 steps; the finished entries are kept.", timeout=15_000
    )
    items = section.locator(".summary-item")
    expect(items).to_have_count(1)
    expect(items.nth(0)).to_contain_text("The first fifty steps along the road")
    expect(items.nth(0)).to_contain_text("messages 1–50")
    assert [(e["first_position"], e["last_position"]) for e in _entries(live, chat_id)] == [(1, 50)]
    assert models.pending_replies == 1
    expect(section.locator("#summary-backfill")).to_contain_text("Summarises the 10 uncovered older messages")
    section.locator("#summary-backfill").scroll_into_view_if_needed()
    shot("backfill-stopped")


def test_an_automatic_summary_shows_while_it_is_written_then_is_listed(page: Page, live, models, shot):
    chat_id = _chat(live, 1)
    _connect(live, models)
    # The summary is held at the model until the page has shown it running: a page opened before the
    # background run had started, or after it had ended, would have nothing running to show.
    held = threading.Event()
    models.script("A reply.", Reply("They set out at dawn and met on the road.", gate=held))
    with live.client() as c:
        assert (
            c.put(
                f"/api/chats/{chat_id}/options", json={"settings": {"summary_auto": True, "summary_every": 1}}
            ).status_code
            == 200
        )
        read_sse(c.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Shall we go?"}))
    wait_for(lambda: models.pending_replies == 0, timeout=30, what="the automatic summary asked of the model")
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#chat-summary")
    running = section.locator("#summary-auto-running")
    running.scroll_into_view_if_needed()
    expect(running).to_have_text("Writing the automatic summary of messages 1–4…")
    shot("automatic-running")
    held.set()
    items = section.locator(".summary-item")
    expect(items).to_have_count(1, timeout=15_000)
    expect(items.nth(0)).to_contain_text("messages 1–4")
    expect(running).to_have_count(0)


def test_a_failed_automatic_summary_shows_its_reason_and_retry_writes_it(page: Page, live, models, shot):
    chat_id = _chat(live, 1)
    _connect(live, models)
    models.script("A reply.", Reply(status=500, error="upstream exploded"))
    with live.client() as c:
        assert (
            c.put(
                f"/api/chats/{chat_id}/options", json={"settings": {"summary_auto": True, "summary_every": 1}}
            ).status_code
            == 200
        )
        read_sse(c.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Shall we go?"}))
    # Opened once the run has begun (a page opened before it had would have no run to show or poll).
    wait_for(lambda: models.pending_replies == 0, timeout=30, what="the automatic summary asked of the model")
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#chat-summary")
    failed = section.locator("#summary-auto-failed")
    failed.scroll_into_view_if_needed()
    expect(failed).to_contain_text("The automatic summary of messages 1–4 failed:", timeout=15_000)
    expect(failed).to_contain_text("(tried 1 time; trying again at ")
    shot("automatic-failed")
    assert _entries(live, chat_id) == []
    models.script("They set out at dawn.")
    failed.get_by_role("button", name="Retry").click()
    items = section.locator(".summary-item")
    expect(items).to_have_count(1, timeout=15_000)
    expect(items.nth(0)).to_contain_text("They set out at dawn")
    expect(failed).to_have_count(0)

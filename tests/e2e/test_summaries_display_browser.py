"""Issue 12, Chat Summary display: the "Summarise" button for messages no summary covers, the panel as
its own page on desktop, and summarised messages collapsed in the chat view. Desktop and phone."""

import threading

from playwright.sync_api import Page, expect

from tests.e2e.test_summaries_browser import _chat, _connect, _entries
from tests.support.model_server import Reply


def test_summarise_the_uncovered_messages_writes_an_entry_for_the_oldest_stretch(
    page: Page, live, models, shot
):
    chat_id = _chat(live, 69)  # 70 messages; 60 older than the tail of 10
    _connect(live, models)
    with live.client() as c:
        c.post(
            f"/api/chats/{chat_id}/summaries",
            json={"content": "Written.", "scope": "range", "start": 1, "end": 5},
        )
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#chat-summary")
    gap = section.locator("#summary-uncovered")
    gap.scroll_into_view_if_needed()
    expect(gap).to_contain_text("55 messages older than the recent tail (10) are covered by no summary.")
    expect(gap).to_contain_text(
        "The button summarises the oldest stretch (50 messages, at most 50 at a time); 5 more will remain; Backfill Summary above does them all."
    )
    shot("uncovered")

    # Held at the model until the page has shown it being written (a quick answer could end it first).
    held = threading.Event()
    models.script(Reply("They argued about the map for fifty steps.", gate=held))
    gap.locator("#summary-uncovered-generate").click()
    expect(section.locator("#summary-running")).to_contain_text("Writing a summary of messages 6–55")
    expect(section.locator("#summary-uncovered-generate")).to_be_disabled()
    held.set()
    expect(section.locator(".summary-item")).to_have_count(2)
    expect(section.locator(".summary-item").nth(1)).to_contain_text("messages 6–55")
    expect(gap).to_contain_text("5 messages older than the recent tail (10) are covered by no summary.")
    expect(section.locator("#summary-uncovered-generate")).to_have_text("Summarise messages 56–60")
    gap.scroll_into_view_if_needed()
    shot("after")
    assert [(e["first_position"], e["last_position"], e["origin"]) for e in _entries(live, chat_id)] == [
        (1, 5, "user"),
        (6, 55, "model"),
    ]


def test_the_chat_summary_page_on_desktop_works_like_the_settings_panel(page: Page, live, screen, shot):
    chat_id = _chat(live, 12)
    with live.client() as c:
        c.post(
            f"/api/chats/{chat_id}/summaries",
            json={"content": "They set out.", "title": "Start", "scope": "range", "start": 1, "end": 4},
        )
    page.goto(f"{live.url}/chats/{chat_id}")
    link = page.locator("#summary-page-link")
    if screen == "phone":
        # Phones keep Chat Summary in Chat Settings; the page still works when opened.
        expect(link).to_be_hidden()
        page.goto(f"{live.url}/chats/{chat_id}/summaries")
    else:
        shot("chat-header")
        link.click()
    expect(page).to_have_url(f"{live.url}/chats/{chat_id}/summaries")
    expect(page.locator("h1")).to_contain_text("Chat Summary")
    items = page.locator(".summary-item")
    expect(items).to_have_count(1)
    shot("page")

    items.nth(0).locator(".summary-active").click()
    expect(items.nth(0).locator(".summary-active")).to_have_attribute("aria-checked", "false")
    page.locator("#summary-scope-range").check()
    page.locator("#summary-start").fill("5")
    page.locator("#summary-end").fill("7")
    page.locator("#summary-title").fill("Camp")
    page.locator("#summary-content").fill("They make camp by the river.")
    page.locator("#summary-add").click()
    expect(items).to_have_count(2)
    expect(items.nth(1)).to_contain_text("messages 5–7")
    expect(page.locator("h1")).to_have_count(1)  # the panel came back in place, not a page inside the page
    shot("page-after")
    assert [(e["first_position"], e["last_position"], e["active"]) for e in _entries(live, chat_id)] == [
        (1, 4, False),
        (5, 7, True),
    ]
    page.locator("#summary-back").click()
    expect(page).to_have_url(f"{live.url}/chats/{chat_id}")


def test_chat_settings_links_to_the_page_on_desktop(page: Page, live, screen, shot):
    chat_id = _chat(live, 3)
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    link = page.locator("#summary-open-page")
    page.locator("#chat-summary h3").evaluate("e => e.scrollIntoView({block: 'center'})")
    shot("settings-section")
    if screen == "phone":
        expect(link).to_be_hidden()
        return
    link.click()
    expect(page).to_have_url(f"{live.url}/chats/{chat_id}/summaries")
    expect(page.locator("#summary-panel")).to_be_visible()


def _options(live, chat_id: int, **settings) -> None:
    with live.client() as c:
        r = c.put(f"/api/chats/{chat_id}/options", json={"settings": settings})
        assert r.status_code == 200, r.text


def test_summarised_messages_fold_into_a_line_that_shows_them_in_place(page: Page, live, shot):
    chat_id = _chat(live, 24)  # 25 messages; older than the tail of 10: 1–15
    with live.client() as c:
        ids = [m["id"] for m in c.get(f"/api/chats/{chat_id}/messages").json()]
        c.post(
            f"/api/chats/{chat_id}/summaries",
            json={"content": "The long walk.", "scope": "range", "start": 3, "end": 12},
        )
        c.patch(f"/api/chats/{chat_id}/messages/{ids[6]}", json={"hidden": True})  # #7, hidden by the user
    _options(live, chat_id, summary_hide_messages=True, summary_recent_tail=10)
    page.goto(f"{live.url}/chats/{chat_id}")
    folds = page.locator(".summary-fold")
    expect(folds).to_have_count(2)
    expect(folds.nth(0)).to_contain_text("Messages 3–6 are summarised and not sent")
    expect(folds.nth(1)).to_contain_text("Messages 8–12 are summarised and not sent")
    for i in (2, 3, 4, 5, 7, 8, 9, 10, 11):
        expect(page.locator(f"#msg-{ids[i]}")).to_be_hidden()
    for i in (0, 1, 12, 13):
        expect(page.locator(f"#msg-{ids[i]}")).to_be_visible()
    # The message hidden from the AI keeps its look, between the two runs.
    expect(page.locator(f"#msg-{ids[6]}")).to_be_visible()
    expect(page.locator(f"#msg-{ids[6]}")).to_contain_text("hidden from AI")
    folds.nth(0).scroll_into_view_if_needed()
    shot("folded")

    show = folds.nth(0).get_by_role("button", name="Show")
    show.click()
    for i in (2, 3, 4, 5):
        expect(page.locator(f"#msg-{ids[i]}")).to_be_visible()
    expect(folds.nth(0).get_by_role("button", name="Hide")).to_have_attribute("aria-expanded", "true")
    expect(page.locator(f"#msg-{ids[8]}")).to_be_hidden()
    shot("shown")
    # From the keyboard: the line's button folds the run again.
    folds.nth(0).get_by_role("button", name="Hide").focus()
    page.keyboard.press("Enter")
    expect(page.locator(f"#msg-{ids[3]}")).to_be_hidden()

    # Deleting a message above the runs renumbers them; the runs stay folded.
    page.once("dialog", lambda d: d.accept())
    page.locator(f"#msg-{ids[1]}").hover()
    page.locator(f"#msg-{ids[1]}").get_by_role("button", name="Delete message").click()
    expect(page.locator(f"#msg-{ids[1]}")).to_have_count(0)
    expect(folds.nth(0)).to_contain_text("Messages 2–5 are summarised and not sent")
    expect(folds.nth(1)).to_contain_text("Messages 7–11 are summarised and not sent")


def test_edits_streaming_and_swipes_work_around_folded_runs(page: Page, live, models):
    chat_id = _chat(live, 24)
    _connect(live, models)
    with live.client() as c:
        ids = [m["id"] for m in c.get(f"/api/chats/{chat_id}/messages").json()]
        c.post(
            f"/api/chats/{chat_id}/summaries",
            json={"content": "The long walk.", "scope": "range", "start": 3, "end": 12},
        )
    _options(live, chat_id, summary_hide_messages=True, summary_recent_tail=10)
    page.goto(f"{live.url}/chats/{chat_id}")
    fold = page.locator(".summary-fold")
    expect(fold).to_have_count(1)
    expect(fold).to_contain_text("Messages 3–12 are summarised and not sent")
    # An edited message inside an opened run comes back in it, still shown.
    fold.get_by_role("button", name="Show").click()
    msg = page.locator(f"#msg-{ids[4]}")
    msg.hover()
    msg.get_by_role("button", name="Edit message").click()
    page.locator(".edit-form textarea").fill("Step five, rewritten.")
    page.locator(".edit-form").get_by_role("button", name="Save").click()
    expect(msg.locator(".msg-text")).to_have_text("Step five, rewritten.")
    expect(msg).to_be_visible()
    expect(msg).to_have_attribute("data-summarised", "")
    expect(fold).to_contain_text("Messages 3–12 are summarised and not sent")
    fold.get_by_role("button", name="Hide").click()
    expect(msg).to_be_hidden()

    # A reply streams in below; its numbers follow on, and a new version can be swiped to.
    models.script(Reply("They reach the gate.", chunk_size=4, delay_s=0.02), Reply("They turn back."))
    page.fill("#composer-input", "Onward.")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".msg-text")).to_have_text("They reach the gate.")
    expect(reply.locator(".msg-num")).to_have_text("#27")
    reply.locator(".swipe-right").click()
    expect(page.locator("article.msg-assistant").last.locator(".swipe-counter")).to_have_text("2/2")
    expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text("They turn back.")
    expect(fold).to_have_count(1)
    expect(fold).to_contain_text("Messages 3–12 are summarised and not sent")
    expect(page.locator(f"#msg-{ids[4]}")).to_be_hidden()


def test_with_hiding_off_nothing_folds(page: Page, live):
    chat_id = _chat(live, 24)
    with live.client() as c:
        c.post(
            f"/api/chats/{chat_id}/summaries",
            json={"content": "The long walk.", "scope": "range", "start": 3, "end": 12},
        )
    _options(live, chat_id, summary_hide_messages=False, summary_recent_tail=10)
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator("article.msg")).to_have_count(25)
    expect(page.locator(".summary-fold")).to_have_count(0)
    expect(page.locator("article.msg[data-summarised]")).to_have_count(0)
    # Nor, with Collapse hidden messages off, are any marked.
    _options(live, chat_id, summary_collapse_hidden=False)
    page.reload()
    expect(page.locator("article.msg")).to_have_count(25)
    expect(page.locator(".summary-fold")).to_have_count(0)
    expect(page.locator(".badge-summarised")).to_have_count(0)


def _save_collapse(page: Page, live, chat_id: int, on: bool) -> None:
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    box = page.locator("#summary-collapse-hidden")
    box.scroll_into_view_if_needed()
    box.set_checked(on)
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    expect(page.locator("#chat-settings-form .notice-ok")).to_be_visible()


def test_with_collapse_off_summarised_messages_stay_in_the_story_dimmed_and_marked(
    page: Page, live, models, shot
):
    chat_id = _chat(live, 24)  # 25 messages; older than the tail of 10: 1–15
    _connect(live, models)
    with live.client() as c:
        ids = [m["id"] for m in c.get(f"/api/chats/{chat_id}/messages").json()]
        c.post(
            f"/api/chats/{chat_id}/summaries",
            json={"content": "The long walk.", "scope": "range", "start": 3, "end": 12},
        )
        c.patch(f"/api/chats/{chat_id}/messages/{ids[6]}", json={"hidden": True})  # #7, hidden by the user
        assert (
            c.get(f"/api/chats/{chat_id}").json()["settings"]["summary_collapse_hidden"] is True
        )  # on by default
    _options(live, chat_id, summary_hide_messages=True, summary_recent_tail=10, summary_collapse_hidden=False)
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator("article.msg")).to_have_count(25)
    expect(page.locator(".summary-fold")).to_have_count(0)
    summarised = (2, 3, 4, 5, 7, 8, 9, 10, 11)
    for i in summarised:
        msg = page.locator(f"#msg-{ids[i]}")
        expect(msg).to_be_visible()
        expect(msg.locator(".badge-summarised")).to_have_text("summarised · not sent")
    expect(page.locator(".badge-summarised")).to_have_count(len(summarised))
    # The message hidden from the AI keeps its own look; the two can be told apart.
    hidden = page.locator(f"#msg-{ids[6]}")
    expect(hidden).to_contain_text("hidden from AI")
    expect(hidden.locator(".badge-summarised")).to_have_count(0)
    edge = "el => getComputedStyle(el.querySelector('.msg-body')).borderLeftStyle"
    assert page.locator(f"#msg-{ids[5]}").evaluate(edge) == "dotted" and hidden.evaluate(edge) == "dashed"
    page.locator(f"#msg-{ids[5]}").evaluate("e => e.scrollIntoView({block: 'center'})")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    shot("marked")

    # An edited summarised message comes back marked, still in view.
    msg = page.locator(f"#msg-{ids[4]}")
    msg.hover()
    msg.get_by_role("button", name="Edit message").click()
    page.locator(".edit-form textarea").fill("Step five, rewritten.")
    page.locator(".edit-form").get_by_role("button", name="Save").click()
    expect(msg.locator(".msg-text")).to_have_text("Step five, rewritten.")
    expect(msg).to_be_visible()
    expect(msg.locator(".badge-summarised")).to_be_visible()
    expect(page.locator(".summary-fold")).to_have_count(0)
    # A reply streams in below and is swiped; the marked messages stay as they are.
    models.script(Reply("They reach the gate.", chunk_size=4, delay_s=0.02), Reply("They turn back."))
    page.fill("#composer-input", "Onward.")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".msg-text")).to_have_text("They reach the gate.")
    reply.locator(".swipe-right").click()
    expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text("They turn back.")
    expect(page.locator(".summary-fold")).to_have_count(0)
    expect(page.locator(".badge-summarised")).to_have_count(len(summarised))
    expect(page.locator(f"#msg-{ids[9]}")).to_be_visible()

    # Turned on in Chat Settings and saved, the runs fold after a reload; off again, they open out.
    _save_collapse(page, live, chat_id, True)
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator(".summary-fold")).to_have_count(2)
    expect(page.locator(".badge-summarised")).to_have_count(0)
    expect(page.locator(f"#msg-{ids[4]}")).to_be_hidden()
    _save_collapse(page, live, chat_id, False)
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator(".summary-fold")).to_have_count(0)
    expect(page.locator(".badge-summarised")).to_have_count(len(summarised))
    expect(page.locator(f"#msg-{ids[4]}")).to_be_visible()

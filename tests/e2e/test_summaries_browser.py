"""Issue 12, Chat Summary in Chat Settings (the user-written slice): write an entry for a Range and
for the Last messages, turn one off, shift-click a range of entries and disable them, edit one,
delete one, hide and show the inactive ones; "Hide summarised messages" is saved with the settings. Desktop and phone."""

import threading

from playwright.sync_api import Page, expect

from tests.support.model_server import Reply
from tests.support.waiting import wait_for


def _chat(live, n: int = 12) -> int:
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Road"}).json()
        for i in range(2, n + 2):
            assert (
                c.post(f"/api/chats/{chat['id']}/messages", json={"content": f"Step {i}."}).status_code == 201
            )
    return chat["id"]


def _write(
    panel,
    *,
    scope: str,
    content: str,
    title: str = "",
    last: int | None = None,
    start: int | None = None,
    end: int | None = None,
) -> None:
    panel.locator(f"input[name=summary_scope][value={scope}]").check()
    if last is not None:
        panel.locator("#summary-last").fill(str(last))
    if start is not None:
        panel.locator("#summary-start").fill(str(start))
        panel.locator("#summary-end").fill(str(end))
    panel.locator("#summary-title").fill(title)
    panel.locator("#summary-content").fill(content)
    panel.locator("#summary-add").click()


def _entries(live, chat_id: int) -> list[dict]:
    with live.client() as c:
        return c.get(f"/api/chats/{chat_id}/summaries").json()


def test_write_toggle_select_a_range_edit_and_delete_summaries(page: Page, live, shot):
    chat_id = _chat(live)
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#chat-summary")
    section.scroll_into_view_if_needed()
    expect(section.locator("#summary-empty")).to_contain_text("No summaries yet. Write one below")
    shot("empty")

    _write(section, scope="range", start=2, end=6, title="Salt flats", content="They cross the salt flats.")
    items = section.locator(".summary-item")
    expect(items).to_have_count(1)
    expect(items.nth(0)).to_contain_text("Salt flats")
    expect(items.nth(0)).to_contain_text("messages 2–6")
    _write(section, scope="range", start=7, end=9, title="The well", content="They find a dry well.")
    _write(section, scope="last", last=3, title="Camp", content="They make camp.")
    expect(items).to_have_count(3)
    expect(items.nth(2)).to_contain_text("messages 11–13")
    assert [(e["first_position"], e["last_position"]) for e in _entries(live, chat_id)] == [
        (2, 6),
        (7, 9),
        (11, 13),
    ]
    # Older than the tail of 10: messages 1–3, of which 2 and 3 are covered.
    expect(section.locator("#summary-uncovered")).to_contain_text(
        "1 message older than the recent tail (10) is covered by no summary."
    )
    expect(section.locator("#summary-uncovered-generate")).to_have_text("Summarise message 1")
    items.nth(0).scroll_into_view_if_needed()
    shot("three-entries")

    # One entry off with its switch.
    items.nth(0).locator(".summary-active").click()
    expect(items.nth(0).locator(".summary-active")).to_have_attribute("aria-checked", "false")
    expect(items.nth(0)).to_have_class("summary-item is-inactive")
    # Hide Inactive leaves it out of the list; Show Inactive brings it back.
    section.locator("#summary-toggle-inactive").click()
    expect(items).to_have_count(2)
    expect(section.locator("#summary-count")).to_have_text("3 entries, 1 inactive")
    section.locator("#summary-toggle-inactive").click()
    expect(items).to_have_count(3)
    items.nth(0).locator(".summary-active").click()
    expect(items.nth(0).locator(".summary-active")).to_have_attribute("aria-checked", "true")

    # Shift-click selects the range between two clicks; Disable selected turns all of them off.
    items.nth(0).locator(".summary-select").click()
    items.nth(2).locator(".summary-select").click(modifiers=["Shift"])
    for i in range(3):
        expect(items.nth(i).locator(".summary-select")).to_be_checked()
    section.locator("#summary-disable-selected").scroll_into_view_if_needed()
    shot("range-selected")
    section.locator("#summary-disable-selected").click()
    expect(section.locator(".summary-item.is-inactive")).to_have_count(3)
    assert [e["active"] for e in _entries(live, chat_id)] == [False, False, False]
    section.locator("#summary-activate-all").click()
    expect(section.locator(".summary-item.is-inactive")).to_have_count(0)

    # Edit the second entry.
    items.nth(1).locator("summary").click()
    items.nth(1).get_by_role("button", name="Edit").click()
    items.nth(1).locator("textarea[name=summary_edit_content]").fill("They find a well with sweet water.")
    items.nth(1).scroll_into_view_if_needed()
    shot("editing")
    items.nth(1).get_by_role("button", name="Save summary").click()
    expect(items.nth(1).locator(".summary-content")).to_have_text("They find a well with sweet water.")

    # Delete the first.
    page.once("dialog", lambda d: d.accept())
    items.nth(0).locator("summary").click()
    items.nth(0).get_by_role("button", name="Delete").click()
    expect(items).to_have_count(2)
    assert [e["title"] for e in _entries(live, chat_id)] == ["The well", "Camp"]

    # The display settings are saved with the form.
    section.locator("#summary-hide-messages").check()
    section.locator("#summary-recent-tail").fill("4")
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    expect(page.locator("#chat-settings-form .notice-ok")).to_be_visible()
    with live.client() as c:
        settings = c.get(f"/api/chats/{chat_id}").json()["settings"]
    assert settings["summary_hide_messages"] is True and settings["summary_recent_tail"] == 4
    expect(page.locator("#chat-summary .summary-item")).to_have_count(2)
    page.locator("#summary-write").scroll_into_view_if_needed()
    shot("saved")


def test_the_chat_numbers_its_messages_as_summary_ranges_count_them(page: Page, live, shot):
    chat_id = _chat(live, 70)  # 71 messages: the page shows the newest 60, then the earlier ones
    with live.client() as c:
        ids = [m["id"] for m in c.get(f"/api/chats/{chat_id}/messages").json()]
        c.post(f"/api/chats/{chat_id}/refresh")  # a refresh mark is no message: it takes no number
        c.post(f"/api/chats/{chat_id}/messages", json={"content": "After the mark."})
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator(f"#msg-{ids[-1]} .msg-num")).to_have_text("#71")
    expect(page.locator(f"#msg-{ids[20]} .msg-num")).to_have_text("#21")
    expect(page.locator(f"#msg-{ids[11]}")).to_have_count(0)  # on the earlier page
    expect(page.locator("article.msg").last.locator(".msg-num")).to_have_text("#72")
    page.locator("#load-earlier button").click()
    expect(page.locator(f"#msg-{ids[0]} .msg-num")).to_have_text("#1")
    expect(page.locator(f"#msg-{ids[11]} .msg-num")).to_have_text("#12")
    page.locator(f"#msg-{ids[69]}").scroll_into_view_if_needed()
    shot("numbers")

    # Deleting a message renumbers the ones after it, as the summary ranges are recounted.
    page.once("dialog", lambda d: d.accept())
    page.locator(f"#msg-{ids[2]}").hover()
    page.locator(f"#msg-{ids[2]}").get_by_role("button", name="Delete message").click()
    expect(page.locator(f"#msg-{ids[2]}")).to_have_count(0)
    expect(page.locator(f"#msg-{ids[11]} .msg-num")).to_have_text("#11")
    expect(page.locator("article.msg").last.locator(".msg-num")).to_have_text("#71")


def test_summaries_work_in_the_chat_pages_settings_panel_and_peek_prompt_shows_them(page: Page, live, shot):
    chat_id = _chat(live, 6)
    page.goto(f"{live.url}/chats/{chat_id}")
    page.click("#settings-button")
    panel = page.locator("#settings-panel #chat-summary")
    panel.scroll_into_view_if_needed()
    _write(panel, scope="last", last=4, title="The crossing", content="They cross the river at dawn.")
    expect(panel.locator(".summary-item")).to_have_count(1)
    expect(panel.locator(".summary-item")).to_contain_text("messages 4–7")
    panel.locator(".summary-item").scroll_into_view_if_needed()
    shot("side-panel")
    page.locator("#settings-panel").get_by_role("button", name="Close Chat Settings").click()
    page.click("#peek-button")
    block = page.locator("#peek-dialog .prompt-block").filter(has_text="They cross the river at dawn.")
    expect(block).to_have_count(1)
    expect(page.locator("#peek-dialog")).to_contain_text("Chat Summary: 1 active summary entry sent")


def _generate_status_once_ended(live, chat_id: int, timeout_s: float = 60) -> dict:
    """The chat's newest Generate run once it is no longer running (a loaded machine can take a while)."""
    with live.client() as c:

        def ended() -> dict | None:
            run = c.get(f"/api/chats/{chat_id}/summaries/generate").json()
            return run if run["status"] != "running" else None

        return wait_for(ended, timeout=timeout_s, what="the Generate run's end")


def _connect(live, models) -> None:
    with live.client() as c:
        r = c.post(
            "/api/connections",
            json={"name": "Local test", "base_url": models.base_url, "model": "test-model", "kind": "openai"},
        )
        assert r.status_code == 201, r.text


def test_generate_a_range_fail_retry_and_approve_under_review(page: Page, live, models, shot):
    """Generate for a Range: the spinner, then the entry; a failing model shows the reason and Retry, and
    Retry succeeds; with Review outputs on the entry waits inactive until Approve."""
    chat_id = _chat(live)
    _connect(live, models)
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#chat-summary")
    section.scroll_into_view_if_needed()
    items = section.locator(".summary-item")

    # Held at the model until the page has shown it being written (a quick answer could end it first).
    held = threading.Event()
    models.script(Reply("The travellers crossed the salt flats.", gate=held))
    section.locator("#summary-scope-range").check()
    section.locator("#summary-start").fill("2")
    section.locator("#summary-end").fill("6")
    section.locator("#summary-generate").click()
    expect(section.locator("#summary-running")).to_contain_text("Writing a summary of messages 2–6")
    expect(
        section.locator("#summary-generate")
    ).to_be_enabled()  # a second Generate would wait its turn (issue 21)
    shot("generating")
    held.set()
    expect(items).to_have_count(1)
    expect(items.nth(0)).to_contain_text("The travellers crossed the salt flats")
    expect(items.nth(0)).to_contain_text("messages 2–6")
    expect(items.nth(0)).to_contain_text("by the model")
    expect(section.locator("#summary-running")).to_have_count(0)

    models.script(
        Reply("<think>Where to start", finish_reason="length"),
        Reply("<think>Still thinking", finish_reason="length"),
    )
    # The panel came back after Generate with the scope as it was set.
    expect(section.locator("#summary-scope-range")).to_be_checked()
    expect(section.locator("#summary-start")).to_have_value("2")
    expect(section.locator("#summary-end")).to_have_value("6")
    section.locator("#summary-start").fill("7")
    section.locator("#summary-end").fill("9")
    section.locator("#summary-generate").click()
    failed = section.locator("#summary-failed")
    expect(failed).to_contain_text("The model's answer could not be used: Only thinking, no answer")
    expect(failed).to_contain_text("messages 7–9")
    expect(items).to_have_count(1)
    failed.scroll_into_view_if_needed()
    shot("failed")

    # Wait for the switch's own save (a Retry sent meanwhile could write the entry before it lands) and for
    # the panel it returns to replace this one (a Retry clicked on the old panel answers into a detached panel).
    old_panel = section.locator("#summary-panel").element_handle()
    with page.expect_response(lambda r: r.url.endswith("/summaries/review") and r.ok):
        section.locator("#summary-review").check()
    page.wait_for_function("panel => !panel.isConnected", arg=old_panel)
    expect(section.locator("#summary-review")).to_be_checked()
    models.script("They found a dry well.")
    # In stages, so a failure says which one: the click's request, the run on the server, the page.
    with page.expect_response(lambda r: r.url.endswith("/summaries/generate/retry")) as retried:
        section.locator("#summary-retry").click()
    assert retried.value.ok, retried.value.text()
    run = _generate_status_once_ended(live, chat_id)
    assert run["status"] == "done", (run, f"{models.pending_replies} scripted replies left")
    expect(items).to_have_count(2)
    held = items.nth(1)
    expect(held).to_contain_text("They found a dry well")
    expect(held).to_contain_text("messages 7–9")
    expect(held).to_contain_text("awaiting review")
    expect(held.locator(".summary-active")).to_have_attribute("aria-checked", "false")
    expect(section.locator("#summary-failed")).to_have_count(0)
    held.scroll_into_view_if_needed()
    shot("awaiting-review")
    held.get_by_role("button", name="Approve").click()
    expect(items.nth(1).locator(".summary-active")).to_have_attribute("aria-checked", "true")
    expect(items.nth(1)).not_to_contain_text("awaiting review")
    entries = _entries(live, chat_id)
    assert [(e["first_position"], e["last_position"], e["active"], e["origin"]) for e in entries] == [
        (2, 6, True, "model"),
        (7, 9, True, "model"),
    ]
    shot("approved")

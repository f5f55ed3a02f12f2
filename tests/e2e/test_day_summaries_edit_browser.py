"""Issue 21, item 17, in Chromium at desktop and phone sizes: Edit Summaries shows each week with its days
under it, each to check and fix; saving a week unchanged keeps a Key Detail written over several lines
as it was; a deleted week (and a day its week speaks for) is written again by Write now, whose result
shows beside the button pressed, in view; the Missing Summaries panel counts again after it."""

import threading
from datetime import UTC, date, datetime, time, timedelta

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.models import Message
from app.memory.days import service as conversation
from app.memory.days.core.days import chat_day, week_start
from app.platform.timeutil import utcnow
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

MULTI = "She promised to call on Friday,\nafter the night shift,\nand to bring the letters."


def _answer(n: int, details: list[str]) -> str:
    import json

    return json.dumps({"summary": f"Summary number {n}.", "keyDetails": details})


def _chat_with_a_summarised_week(live, models) -> tuple[int, date, list[date]]:
    with live.client() as c:
        c.post(
            "/api/connections",
            json={"name": "Local test", "base_url": models.base_url, "model": "test-model", "kind": "openai"},
        )
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hi!"}).json()
        chat_id = c.post(
            "/api/chats", json={"character_ids": [char["id"]], "name": "Talk", "mode": "conversation"}
        ).json()["id"]
    today = chat_day(utcnow(), conversation.local_zone(), 4)
    monday = week_start(today) - timedelta(days=7)
    days = [monday + timedelta(days=n) for n in range(7)]
    with Session(live.engine) as session:
        for day in days:
            at = datetime.combine(day, time(12)).astimezone().astimezone(UTC)
            session.add(
                Message(
                    chat_id=chat_id,
                    role="user",
                    name="You",
                    content=f"Talk of {day}",
                    created_at=at,
                    updated_at=at,
                )
            )
        session.commit()
    models.script(*[_answer(n, [f"detail {n}"]) for n in range(1, 8)], _answer(100, [MULTI, "A plain one"]))
    with live.client() as c:  # a Backfill (its thread: this one runs Playwright's event loop)
        assert c.post(f"/api/chats/{chat_id}/days/backfill").status_code == 202
        wait_for(
            lambda: c.get(f"/api/chats/{chat_id}/days/backfill").json()["status"] == "done",
            timeout=60,
            what="the Backfill",
        )
        assert [w["date"] for w in c.get(f"/api/chats/{chat_id}/weeks").json()] == [monday.isoformat()]
    models.reset()
    return chat_id, monday, days


def _open_window(page: Page, live, chat_id: int):
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    page.locator("#edit-summaries").scroll_into_view_if_needed()
    page.locator("#edit-summaries").click()
    dialog = page.locator("#day-summaries-dialog")
    expect(dialog).to_be_visible()
    return dialog


def test_days_under_their_week_an_unchanged_save_and_write_now(page: Page, live, models, shot):
    chat_id, monday, days = _chat_with_a_summarised_week(live, models)
    page.on("dialog", lambda d: d.accept())  # the Delete buttons ask first
    dialog = _open_window(page, live, chat_id)
    week = monday.isoformat()
    group = dialog.locator(f"#week-group-{week}")
    expect(group.locator(".week-title")).to_have_text(f"Week of {monday:%d.%m.%Y} – {days[-1]:%d.%m.%Y}")
    expect(group.locator(f"details#week-{week}")).to_be_visible()
    under = group.locator(".week-days details.day-summary")
    expect(under).to_have_count(7)  # every day of the week, each its own item
    for n, day in enumerate(days):
        expect(under.nth(n)).to_have_attribute("id", f"day-{day.isoformat()}")
    expect(under.nth(2).locator("summary")).to_contain_text("Summary number")
    shot("days-under-week")

    # The week saved as it is: its multi-line detail stays one detail, the week stays the model's.
    with live.client() as c:
        before = c.get(f"/api/chats/{chat_id}/weeks").json()[0]
    week_item = group.locator(f"details#week-{week}")
    week_item.locator("summary").click()
    details = week_item.locator(f"textarea[name=k_week-{week}]")
    expect(details).to_have_count(2)
    expect(details.nth(0)).to_have_value(MULTI)
    shot("week-open")
    found = Axe().run(page, context="#day-summaries-dialog")
    assert found.violations_count == 0, found.generate_report()
    week_item.get_by_role("button", name="Save", exact=True).click()
    expect(dialog.locator(f"details#week-{week}")).to_contain_text("No changes.")
    with live.client() as c:
        assert c.get(f"/api/chats/{chat_id}/weeks").json()[0] == before

    # A day of the week fixed on its own, its one detail replaced by one over two lines.
    day_item = dialog.locator(f"details#day-{days[3].isoformat()}")
    day_item.locator("summary").click()
    key = f"day-{days[3].isoformat()}"
    day_item.locator(f"textarea[name=s_{key}]").fill("We went to the lake.")
    day_item.get_by_role("button", name="Remove key detail 1").click()
    day_item.get_by_role("button", name="Add key detail").click()
    day_item.locator(f"textarea[name=k_{key}]").fill("Swim at six\nbring towels")
    day_item.get_by_role("button", name="Save", exact=True).click()
    expect(dialog.locator(f"details#{key}")).to_contain_text("Saved.")
    expect(dialog.locator(f"details#{key} > summary")).to_be_focused()  # the answer keeps the place, in view
    expect(dialog.locator(f"details#{key} > summary")).to_be_in_viewport()
    with live.client() as c:
        saved = next(
            d for d in c.get(f"/api/chats/{chat_id}/days").json() if d["date"] == days[3].isoformat()
        )
    assert (saved["summary"], saved["key_details"], saved["origin"]) == (
        "We went to the lake.",
        ["Swim at six\nbring towels"],
        "user",
    )

    # Delete the week: Write now is offered in its place and writes it again; the result shows there, in view.
    week_item = dialog.locator(f"details#week-{week}")
    week_item.locator("summary").click()
    week_item.get_by_role("button", name="Delete").click()
    button = dialog.locator(f"#write-now-week-{week}")
    expect(button).to_be_focused()  # where the deleted week was
    shot("week-deleted")
    # Held at the model until the window has shown the week being written.
    held = threading.Event()
    models.script(Reply(_answer(200, ["Week detail"]), gate=held))
    button.click()
    expect(dialog.locator(f"#write-progress-week-{week}")).to_contain_text("Consolidating the week of")
    held.set()
    result = dialog.locator(f"#write-result-week-{week}")
    expect(result).to_have_text(f"Wrote the summary of the week of {monday:%d.%m.%Y} – {days[-1]:%d.%m.%Y}.")
    expect(result).to_be_in_viewport()
    expect(result).to_be_focused()
    expect(dialog.locator(f"details#week-{week} summary")).to_contain_text("Summary number 200.")
    shot("week-written")

    # A day its week speaks for, deleted: Write now for that day, further down the window; in view too.
    last = days[-1].isoformat()
    item = dialog.locator(f"details#day-{last}")
    item.scroll_into_view_if_needed()
    item.locator("summary").click()
    item.get_by_role("button", name="Delete").click()
    button = dialog.locator(f"#write-now-day-{last}")
    expect(button).to_be_focused()
    expect(button).to_be_in_viewport()
    # Held until its progress shows, so the result comes with the progress line's poll, as a slow model's does.
    held = threading.Event()
    models.script(Reply(_answer(7, ["Seventh"]), gate=held))
    button.click()
    expect(dialog.locator(f"#write-progress-day-{last}")).to_be_visible()
    held.set()
    result = dialog.locator(f"#write-result-day-{last}")
    expect(result).to_have_text(f"Wrote the summary of {days[-1]:%d.%m.%Y}.")
    expect(result).to_be_in_viewport()
    expect(result).to_be_focused()
    shot("day-written")
    dialog.locator("[data-close-dialog]").click()
    expect(page.locator("#missing-count")).to_have_text("Every finished day has a summary.")


def test_write_now_that_fails_says_why_beside_the_button(page: Page, live, models, shot):
    chat_id, monday, days = _chat_with_a_summarised_week(live, models)
    with live.client() as c:
        assert c.delete(f"/api/chats/{chat_id}/weeks/{monday.isoformat()}").status_code == 204
        assert c.delete(f"/api/chats/{chat_id}/days/{days[0].isoformat()}").status_code == 204
    dialog = _open_window(page, live, chat_id)
    week = monday.isoformat()
    expect(dialog.locator(f"#week-{week}")).to_contain_text(
        "no summary yet; Write now writes its 1 day without one first"
    )
    models.script(Reply("not a summary at all"), Reply("still not one"))
    dialog.locator(f"#write-now-week-{week}").click()
    result = dialog.locator(f"#write-result-week-{week}")
    expect(result).to_contain_text(f"Could not write {days[0]:%d.%m.%Y}:")
    expect(result).to_contain_text("The week waits for it.")
    expect(result).to_be_in_viewport()
    expect(dialog.locator(f"#write-now-week-{week}")).to_be_visible()  # offered again
    shot("write-failed")
    found = Axe().run(page, context="#day-summaries-dialog")
    assert found.violations_count == 0, found.generate_report()
    page.keyboard.press("Escape")
    expect(page.locator("#missing-count")).to_have_text("1 finished day lacks a summary.")

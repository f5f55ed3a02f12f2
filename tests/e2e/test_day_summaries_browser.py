"""Issue 12, Automatic Summarization of a Conversation chat in Chat Settings: the Missing Summaries
panel runs Backfill with a progress line and says what it added, the Day Rollover Hour warns that
existing summaries used the old hour, and the Edit Summaries window edits a day's Summary and Key
Details. Desktop and phone."""

import threading
from datetime import UTC, datetime, time, timedelta

from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.models import Message
from app.memory.days import service as conversation
from app.memory.days.core.days import chat_day
from app.platform.timeutil import utcnow
from tests.support.model_server import Reply


def _answer(n: int) -> str:
    return f'{{"summary": "Summary number {n}.", "keyDetails": ["detail {n}"]}}'


def _chat(live, models, days_back: int = 3) -> int:
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
    with Session(live.engine) as session:
        for back in range(days_back, 0, -1):
            day = today - timedelta(days=back)
            at = datetime.combine(day, time(10)).astimezone().astimezone(UTC)
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
    return chat_id


def test_backfill_rollover_warning_and_edit_summaries(page: Page, live, models, shot):
    chat_id = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#day-summaries")
    section.scroll_into_view_if_needed()
    expect(section.locator("#missing-count")).to_have_text("3 finished days lack a summary.")
    expect(section.locator("#rollover-warning")).to_have_count(0)  # nothing to warn about yet
    shot("missing")

    # The first day is held at the model until the page has shown Backfill at work.
    held = threading.Event()
    models.script(Reply(_answer(1), gate=held), *[_answer(n) for n in range(2, 5)])
    section.locator("#backfill-start").click()
    expect(section.locator("#backfill-progress")).to_contain_text("of 3 days")
    expect(section.locator("#backfill-stop")).to_be_visible()
    shot("backfill-running")
    held.set()
    expect(section.locator("#backfill-result")).to_have_text("Added 3 summaries", timeout=20_000)
    expect(section.locator("#missing-count")).to_have_text("Every finished day has a summary.")
    shot("backfill-done")

    with live.client() as c:
        weeks = c.get(f"/api/chats/{chat_id}/weeks").json()
    section.locator("#edit-summaries").click()
    dialog = page.locator("#day-summaries-dialog")
    expect(dialog).to_be_visible()
    if weeks:  # the week's summary first, its days under it
        expect(dialog.locator("details.day-summary").nth(0)).to_have_attribute(
            "id", f"week-{weeks[0]['date']}"
        )
        shot("weeks-first")
    dialog.locator("[data-close-dialog]").click()

    with live.client() as c:  # a finished week speaks for its days: delete it so they are listed to edit
        for w in weeks:
            assert c.delete(f"/api/chats/{chat_id}/weeks/{w['date']}").status_code == 204
        days = c.get(f"/api/chats/{chat_id}/days").json()
    assert len(days) == 3

    page.reload()
    section.locator("#summary-rollover-hour").scroll_into_view_if_needed()
    section.locator("#summary-rollover-hour").select_option("6")
    expect(section.locator("#rollover-warning")).to_be_visible()
    expect(section.locator("#rollover-warning")).to_have_text(
        "Existing summaries used the old hour; they are not redone. Save settings to apply."
    )
    shot("rollover-warning")
    section.locator("#summary-rollover-hour").select_option("4")
    expect(section.locator("#rollover-warning")).to_be_hidden()

    section.locator("#edit-summaries").click()
    expect(dialog).to_be_visible()
    items = dialog.locator("details.day-summary")
    expect(items).to_have_count(3)
    first = items.nth(0)
    key = f"day-{days[0]['date']}"
    expect(first).to_have_attribute("id", key)
    expect(first.locator("summary")).to_contain_text(days[0]["summary"])
    first.locator("summary").click()  # expand it to edit
    first.locator(f"textarea[name=s_{key}]").fill("We planned the trip to the coast.")
    first.locator(f"textarea[name=k_{key}]").fill("Leave on Friday")  # one field per key detail
    first.get_by_role("button", name="Add key detail").click()
    expect(first.locator(f"textarea[name=k_{key}]").nth(1)).to_be_focused()
    first.locator(f"textarea[name=k_{key}]").nth(1).fill("Bring the maps")
    shot("edit-window")
    first.get_by_role("button", name="Save").click()
    saved = dialog.locator(f"#{key}")
    expect(saved).to_contain_text("Saved.")
    expect(saved).to_contain_text("edited")
    expect(saved.locator(f"textarea[name=s_{key}]")).to_have_value("We planned the trip to the coast.")
    shot("edit-saved")
    with live.client() as c:
        day = c.get(f"/api/chats/{chat_id}/days").json()[0]
    assert (day["summary"], day["key_details"], day["origin"]) == (
        "We planned the trip to the coast.",
        ["Leave on Friday", "Bring the maps"],
        "user",
    )
    dialog.locator("[data-close-dialog]").click()
    expect(dialog).to_be_hidden()
    # The settings form was not sent along: the chat's settings are as they were.
    with live.client() as c:
        assert c.get(f"/api/chats/{chat_id}").json()["name"] == "Talk"

"""The Tasks page (Tools → Tasks) at desktop and phone sizes: the empty state says how tasks are made;
tasks set through the tool are listed with their chat and time in the user's zone; one is edited, one
cancelled after a confirmation, and each result shows in sight."""

from __future__ import annotations

from datetime import UTC, datetime

from playwright.sync_api import expect
from sqlmodel import select

from app.personas.models import Persona
from app.tools.registry import ToolContext
from app.tools.tasks.models import Task
from tests.conftest import add_character, new_chat
from tests.support.sight import expect_in_sight


def _set(live, chat_id: int, char_id: int, persona_id: int, **args) -> None:
    services = live.services
    tool = services.tools.get("create_task")
    ctx = ToolContext(services, chat_id, char_id, persona_id, None, services.clock.now())
    tool.run(ctx, tool.args.model_validate(args))


def test_tasks_page_lists_edits_and_cancels(page, live, shot):
    live.services.clock.set(datetime(2026, 12, 2, 12, 0, tzinfo=UTC))
    page.goto(f"{live.url}/tasks")
    expect(page.locator(".tool-tabs a[aria-current=page]")).to_have_text("Tasks")
    expect(page.locator("#task-list .empty")).to_contain_text("Ask a character to remind you of something")
    shot("empty")

    with live.client() as api:
        char = add_character(api, "Aria")
        chat = new_chat(api, [char["id"]], name="Writing desk")
    with live.session() as session:
        persona = Persona(name="Sam", time_zone="Europe/Lisbon", is_default=True)
        session.add(persona)
        session.commit()
        persona_id = persona.id
    _set(
        live,
        chat["id"],
        char["id"],
        persona_id,
        purpose="Remind Sam to call the bakery about the cake.",
        at="2026-12-04 09:00",
    )
    _set(
        live,
        chat["id"],
        char["id"],
        persona_id,
        purpose="Ask Sam how the daily stretches are going.",
        hours_from_now=3,
        interval_hours=24,
    )
    with live.session() as session:  # two that fired already: one late, one whose reply failed
        when = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
        common = {"chat_id": chat["id"], "character_id": char["id"], "persona_id": persona_id, "due_at": when}
        session.add(Task(purpose="Water the basil.", status="done", late=True, fired_at=when, **common))
        session.add(
            Task(
                purpose="Feed the cat.", status="failed", last_error="No connection is set up yet.", **common
            )
        )
        session.commit()
    page.goto(f"{live.url}/tasks")
    cards = page.locator(".task-card")
    expect(cards).to_have_count(4)
    expect(cards.filter(has_text="Water the basil").locator(".badge")).to_have_text("fired late")
    expect(cards.filter(has_text="Feed the cat")).to_contain_text("No connection is set up yet.")
    bakery = cards.filter(has_text="bakery")
    expect(bakery).to_contain_text("Fri 4 Dec, 09:00 (Europe/Lisbon)")
    expect(bakery.get_by_role("link", name="Writing desk")).to_have_attribute("href", f"/chats/{chat['id']}")
    expect(cards.filter(has_text="stretches")).to_contain_text("every day")
    shot("listed")

    bakery.locator("summary", has_text="Edit").click()
    bakery.locator("textarea[name=purpose]").fill(
        "Remind Sam to call the bakery and order the birthday cake."
    )
    bakery.locator("input[name=at]").fill("2026-12-05T10:30")
    bakery.get_by_role("button", name="Save").click()
    edited = page.locator(".task-card", has_text="birthday cake")
    expect(edited).to_contain_text("Sat 5 Dec, 10:30 (Europe/Lisbon)")
    expect(edited.locator(".form-status")).to_have_text("Saved.")
    expect_in_sight(page, ".task-card .form-status")
    shot("edited")

    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    page.locator(".task-card", has_text="stretches").get_by_role("button", name="Cancel reminder").click()
    stretches = page.locator(".task-card", has_text="stretches")
    expect(stretches.locator(".form-status")).to_have_text("Reminder cancelled.")
    expect_in_sight(page, ".task-card .form-status")
    assert asked == ["Cancel this reminder? It will not fire."]
    expect(stretches.locator(".badge")).to_have_text("cancelled")
    expect(stretches.get_by_role("button", name="Cancel reminder")).to_have_count(0)
    shot("cancelled")
    with live.session() as session:
        statuses = {t.purpose[:20]: t.status for t in session.exec(select(Task))}
    assert sorted(statuses.values()) == ["cancelled", "done", "failed", "open"]

"""The Memories page (issue 24): the empty state says what to do; a memory is added for all
characters and for one character, filtered by character, edited in place, deleted and brought back
with Undo; a limit reached is refused with its message; every result is in sight. And Chat
Settings' short-term memory: delete one item, clear all. Desktop and phone."""

from __future__ import annotations

from datetime import UTC, datetime

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.tools.builtin import builtin_tools
from app.tools.memories.models import LongTermMemory
from app.tools.registry import ToolContext, ToolRegistry
from tests.support.sight import expect_in_sight


def _violations(page: Page, within: str | None = None) -> list[str]:
    """axe-core's findings (every rule) on the page or within one part of it, one line each."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate(Axe().axe_script)
    result = page.evaluate("within => axe.run(within || document, {resultTypes: ['violations']})", within)
    return [f"{v['id']} {n['target']}" for v in result["violations"] for n in v["nodes"]]


def _characters(live) -> tuple[dict, dict]:
    with live.client() as c:
        aria = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        kaito = c.post("/api/characters", json={"name": "Kaito", "first_mes": "Yo."}).json()
    return aria, kaito


def test_add_filter_edit_delete_and_undo(page: Page, live, shot):
    aria, kaito = _characters(live)
    page.goto(f"{live.url}/memories")
    expect(page.locator(".tool-tabs a[aria-current=page]")).to_have_text("Memories")
    empty = page.locator("#memories-empty")
    expect(empty).to_contain_text("Characters save memories when you ask them to remember something")
    expect(empty).to_contain_text("You can add one here.")
    shot("empty")

    # A memory for all characters, then one of Aria's; each shows first, and the form says so.
    page.locator("#new-memory-content").fill("The user's name is Mika.")
    page.locator("#add-memory-form button[type=submit]").click()
    expect(page.locator("#add-memory-status")).to_contain_text("Added memory #")
    expect_in_sight(page, "#add-memory-status")
    page.locator("#new-memory-content").fill("Prefers <b>tea</b> to coffee.")
    page.locator("#new-memory-scope").select_option(label="Aria")
    page.locator("#add-memory-form button[type=submit]").click()
    cards = page.locator("#memory-list .memory-card")
    expect(cards).to_have_count(2)
    expect(cards.first.locator("textarea")).to_have_value(
        "Prefers <b>tea</b> to coffee."
    )  # as text, never markup
    expect(cards.first).to_contain_text("Aria")
    expect(page.locator("#memory-count")).to_contain_text("2 memories")
    shot("two-memories")
    assert _violations(page) == []

    # Filter by character, then back to all.
    page.locator("#memory-filter").select_option(label="Kaito")
    expect(page.locator("#memory-list")).to_contain_text("No memories here.")
    page.locator("#memory-filter").select_option(label="Aria")
    expect(cards).to_have_count(1)
    expect(page).to_have_url(f"{live.url}/memories?show={aria['id']}")
    page.locator("#memory-filter").select_option(label="All memories")
    expect(cards).to_have_count(2)

    # Edit in place.
    first = cards.first
    first.locator("textarea").fill("Prefers green tea.")
    first.locator("button[type=submit]").click()
    expect(first.locator("[role=status]")).to_have_text("Saved.")
    expect_in_sight(page, "#memory-list .memory-card:first-of-type [role=status]")
    with live.client() as c:
        assert [m["content"] for m in c.get("/api/memories").json()["memories"]] == [
            "Prefers green tea.",
            "The user's name is Mika.",
        ]

    # Delete, then Undo.
    first.locator("button.danger").click()
    status = page.locator("#memory-list .memory-card:first-of-type [role=status]")
    expect(status).to_contain_text("Deleted memory #")
    expect_in_sight(page, "#memory-list .memory-card:first-of-type [role=status]")
    shot("deleted")
    expect(page.locator("#memory-count")).to_contain_text("1 memory;")
    with live.client() as c:
        assert c.get("/api/memories").json()["total"] == 1
    page.locator("#memory-list .memory-card:first-of-type button", has_text="Undo").click()
    expect(page.locator("#memory-list .memory-card:first-of-type [role=status]")).to_have_text("Restored.")
    expect(page.locator("#memory-count")).to_contain_text("2 memories")
    with live.client() as c:
        restored = c.get("/api/memories").json()["memories"]
    assert {(m["content"], m["character_id"]) for m in restored} == {
        ("Prefers green tea.", aria["id"]),
        ("The user's name is Mika.", None),
    }
    assert kaito["id"] not in {m["character_id"] for m in restored}


def test_a_limit_reached_is_refused_with_its_message(page: Page, live, shot):
    aria, _ = _characters(live)
    with Session(live.engine) as session:
        session.add_all(LongTermMemory(character_id=aria["id"], content=f"fact {i}") for i in range(200))
        session.commit()
    page.goto(f"{live.url}/memories")
    expect(page.locator("#memory-count")).to_contain_text("200 memories, showing 1–50")
    page.locator("#new-memory-content").fill("One more.")
    page.locator("#new-memory-scope").select_option(label="Aria")
    page.locator("#add-memory-form button[type=submit]").click()
    toast = page.locator("#toasts .toast")
    expect(toast).to_contain_text("Aria has reached the limit of 200 memories")
    expect_in_sight(page, "#toasts .toast")
    shot("limit")
    expect(page.locator("#new-memory-content")).to_have_value("One more.")  # nothing typed is lost
    page.locator("#memory-list a", has_text="Older").click()
    expect(page.locator("#memory-count")).to_contain_text("showing 51–100")


def test_chat_settings_short_term_memory(page: Page, live, shot):
    aria, _ = _characters(live)
    with live.client() as c:
        chat = c.post("/api/chats", json={"character_ids": [aria["id"]]}).json()
    tool = ToolRegistry(builtin_tools()).get("update_short_term_memory")
    ctx = ToolContext(
        services=live.services,
        chat_id=chat["id"],
        character_id=aria["id"],
        persona_id=None,
        message_id=None,
        now=datetime.now(UTC),
    )
    tool.run(
        ctx,
        tool.args.model_validate(
            {
                "add": [
                    {"content": "The door is locked.", "expires_after_replies": 3},
                    {"content": "It is raining."},
                ]
            }
        ),
    )
    page.goto(f"{live.url}/chats/{chat['id']}/settings")
    section = page.locator("#short-term-memory-section")
    section.scroll_into_view_if_needed()
    expect(section.locator("li")).to_have_count(2)
    expect(section).to_contain_text("3 more replies")
    shot("short-term")
    # The section only: the standalone Chat Settings page's own headings are not this part's.
    assert _violations(page, "#short-term-memory-section") == []
    section.locator("li", has_text="The door is locked.").locator("button").click()
    expect(section.locator("[role=status]")).to_have_text("Removed.")
    expect_in_sight(page, "#short-term-memory-section [role=status]")
    expect(section.locator("li")).to_have_count(1)
    page.once("dialog", lambda d: d.accept())
    section.locator("#short-term-clear").click()
    expect(section).to_contain_text("Nothing kept for this chat.")
    expect_in_sight(page, "#short-term-memory-section [role=status]")
    with live.client() as c:
        assert c.get(f"/api/chats/{chat['id']}/short-term-memory").json() == []

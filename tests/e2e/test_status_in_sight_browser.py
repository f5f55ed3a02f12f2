"""Issue 21 item 14: what a run's button starts is shown where the user looks. Chat Summary's "Writing a
summary…", its failure with Retry and its result appeared at the top of the panel, 400–2,000 px above
Generate (desktop chat page's Chat Settings, the summaries page, the phone's page and Chat Settings sheet).
Every panel that runs work is checked the same way: after the click, its status is in sight (inside the
window, not under the sticky Save bar or scrolled away in a panel). Desktop and phone."""

import threading

import pytest
from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.service import new_message
from tests.support.model_server import Reply
from tests.support.sight import expect_in_sight

THINKING = Reply("<think>Where to start", finish_reason="length")  # unusable: only thinking, cut off


def _connect(live, models) -> int:
    with live.client() as c:
        r = c.post(
            "/api/connections",
            json={
                "name": "Local test",
                "base_url": models.base_url,
                "model": "test-model",
                "kind": "openai",
                "context_size": 16000,
            },
        )
        assert r.status_code == 201, r.text
        return r.json()["id"]


def _long_chat(live, messages: int = 40, entries: int = 14) -> int:
    """A Roleplay chat whose Chat Summary panel is long: `entries` summary entries above Generate."""
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Road"}).json()
    with Session(live.engine) as s:
        for i in range(2, messages + 1):
            s.add(
                new_message(
                    chat["id"], "user" if i % 2 else "assistant", "You" if i % 2 else "Aria", [f"Step {i}."]
                )
            )
        s.commit()
    with live.client() as c:
        for n in range(entries):
            r = c.post(
                f"/api/chats/{chat['id']}/summaries",
                json={
                    "title": f"Stretch {n + 1}",
                    "content": f"They walked on, stretch {n + 1}.",
                    "scope": "range",
                    "start": 2 * n + 1,
                    "end": 2 * n + 2,
                },
            )
            assert r.status_code == 201, r.text
    return chat["id"]


def _open_summary(page: Page, live, chat_id: int, where: str):
    if where == "panel":  # the chat page's Chat Settings: a side panel on a desktop, a sheet on a phone
        page.goto(f"{live.url}/chats/{chat_id}")
        page.click("#settings-button")
        section = page.locator("#settings-panel #chat-summary")
    else:
        page.goto(f"{live.url}/chats/{chat_id}/summaries")
        section = page.locator("#summary-page-form")
    expect(section.locator(".summary-item")).to_have_count(14)
    return section


@pytest.mark.parametrize("where", ["panel", "page"])
def test_generate_and_retry_show_their_status_by_the_button(page: Page, live, models, shot, where):
    chat_id = _long_chat(live)
    _connect(live, models)
    section = _open_summary(page, live, chat_id, where)
    section.locator("#summary-scope-range").check()
    section.locator("#summary-start").fill("30")
    section.locator("#summary-end").fill("34")

    held = threading.Event()
    models.script(Reply("<think>Where to start", finish_reason="length", gate=held), THINKING)
    section.locator("#summary-generate").click()
    expect(section.locator("#summary-running")).to_contain_text("Writing a summary of messages 30–34")
    expect_in_sight(page, "#summary-running")
    shot("writing")
    held.set()
    expect(section.locator("#summary-failed")).to_contain_text("Only thinking, no answer")
    expect_in_sight(page, "#summary-failed")
    expect_in_sight(page, "#summary-retry")
    shot("failed")

    held = threading.Event()
    models.script(Reply("They reached the old mill.", gate=held))
    section.locator("#summary-retry").click()
    expect(section.locator("#summary-running")).to_be_visible()
    expect_in_sight(page, "#summary-running")
    held.set()
    written = section.locator("#summary-written")
    expect(written).to_contain_text("Summary of messages 30–34 written")
    expect_in_sight(page, "#summary-written")
    expect(section.locator(".summary-item")).to_have_count(15)
    shot("written")
    # Told once, to the page that watched it: the panel opened again does not repeat it.
    page.reload()
    if where == "panel":
        page.click("#settings-button")
    expect(page.locator("#summary-generate")).to_be_enabled()
    expect(page.locator("#summary-written")).to_have_count(0)


def test_summarise_uncovered_and_backfill_show_their_status_in_sight(page: Page, live, models, shot):
    chat_id = _long_chat(live, messages=130, entries=2)  # messages 5–120 covered by no entry
    _connect(live, models)
    page.goto(f"{live.url}/chats/{chat_id}")
    page.click("#settings-button")
    section = page.locator("#settings-panel #chat-summary")
    held = threading.Event()
    models.script(Reply("They crossed the bridge.", gate=held))
    section.locator("#summary-uncovered-generate").click()
    expect(section.locator("#summary-running")).to_be_visible()
    expect_in_sight(page, "#summary-running")
    held.set()
    expect_in_sight(page, "#summary-written")

    held = threading.Event()
    models.script(Reply("The next stretch.", gate=held), "And the one after.")
    section.locator("#summary-backfill-start").click()
    expect(section.locator("#summary-backfill-running")).to_be_visible()
    expect_in_sight(page, "#summary-backfill-running")
    shot("backfill")
    section.locator("#summary-backfill-stop").click()
    expect(section.locator("#summary-backfill-step")).to_contain_text("stopping after this step")
    held.set()
    expect(section.locator("#summary-backfill-stopped")).to_be_visible()
    expect_in_sight(page, "#summary-backfill-stopped")
    # Told to the page that watched it end; Chat Settings opened again does not repeat it.
    page.reload()
    page.click("#settings-button")
    expect(page.locator("#summary-backfill-start")).to_be_visible()
    expect(page.locator("#summary-backfill-stopped")).to_have_count(0)

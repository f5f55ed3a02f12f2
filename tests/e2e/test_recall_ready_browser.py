"""After importing a long chat from the home page, the memory viewer says the memories are being
built ("Building memories: 0 of 98"), then shows their count: never "0 memories" meanwhile."""

import re

from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.memory.recall.service import sync_chunks
from tests.conftest import hold_background
from tests.integration.test_recall_ready import long_chat_jsonl


def test_viewer_shows_memories_being_built_after_an_import(page: Page, live, shot, tmp_path):
    with live.client() as c:
        c.post("/api/characters", json={"name": "Mirela", "first_mes": "Hello."}).raise_for_status()
    chat_file = tmp_path / "long.jsonl"
    chat_file.write_bytes(long_chat_jsonl(600))
    # Held back so each stage can be seen: the job asked for by the import waits for the resume.
    with hold_background(live):
        page.goto(live.url)
        page.locator(".import-box summary").click()
        page.set_input_files(".import-box input[type=file]", str(chat_file))
        page.get_by_role("button", name="Import chat").click()
        page.wait_for_url(re.compile(r"/chats/\d+$"))
        chat_id = int(page.url.rsplit("/", 1)[1])
        page.goto(f"{live.url}/chats/{chat_id}/memories")
        expect(page.locator("#memory-building")).to_have_text("Building memories: reading the messages…")
        expect(page.locator("#memory-status")).not_to_contain_text("0 memories")
        expect(page.locator("#memory-list")).to_contain_text("The memories appear here once they are built.")
        shot("reading")
        with Session(live.engine) as s:  # the job's first step, as it would take it
            added, _ = sync_chunks(s, chat_id)
            s.commit()
        expect(page.locator("#memory-building")).to_have_text(
            f"Building memories: 0 of {added}", timeout=15000
        )
        shot("progress")
    expect(page.locator("#memory-building")).to_have_count(0, timeout=120000)
    expect(page.locator("#memory-count")).to_have_text(str(added))
    expect(page.locator(".memory-card")).to_have_count(added)
    expect(page.locator(".memory-card").first).to_contain_text("Vectorized")
    shot("built")

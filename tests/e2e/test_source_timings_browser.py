"""Peek Prompt with SUGO_DEBUG_TIMINGS=1: a table of what each prompt source cost to build the prompt,
readable on a desktop and a phone; without it, no table. Desktop and phone."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.support.live import LiveSugo


def _chat(live: LiveSugo) -> int:
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "description": "A bard."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        assert (
            c.post(f"/api/chats/{chat['id']}/messages", json={"content": "Sing for me."}).status_code == 201
        )
    return chat["id"]


def test_peek_prompt_shows_each_source_time_when_asked(page: Page, tmp_path: Path, shot):
    with LiveSugo(tmp_path / "data", start_scheduler=False, debug_timings=True) as live:
        chat_id = _chat(live)
        page.goto(f"{live.url}/chats/{chat_id}/prompt")
        table = page.locator("#prompt-source-timings")
        expect(table).to_be_visible()
        names = live.services.sources.names()
        expect(table.locator("tbody tr")).to_have_count(len(names))
        for name in names:
            cell = table.locator(f'tr[data-source="{name}"] td').nth(1)
            expect(cell).to_have_text(re.compile(r"^\d+\.\d\d$"))
        # The table fits the screen: nothing to scroll sideways on a phone.
        box = table.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"]
        table.scroll_into_view_if_needed()
        shot("timings")


def test_peek_prompt_has_no_timings_by_default(page: Page, live: LiveSugo):
    chat_id = _chat(live)
    page.goto(f"{live.url}/chats/{chat_id}/prompt")
    expect(page.locator("#prompt-peek")).to_be_visible()
    expect(page.locator("#prompt-source-timings")).to_have_count(0)

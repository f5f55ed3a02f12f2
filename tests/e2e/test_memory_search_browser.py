"""The memory viewer's search reads clearly: a labelled score, the matched words in view and marked,
spaced cards, and nothing shown for a query that matches nothing (issue 11 item 8)."""

import re

from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.service import new_message
from app.memory.recall.jobs import embed_chat

FACT = "My sister Elowen hid the brass key inside the old clock tower."
FILLER = "We keep walking along the coast road, day {i}, past the salt flats and the fishing huts, talking about the weather."


def _chat_with_memories(live) -> int:
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "mode": "conversation"}).json()
    with Session(live.engine) as s:
        for i in range(1, 121):
            # The fact closes its memory (messages 16-20), behind four long messages: past the
            # first 300 characters.
            text = FACT if i == 20 else FILLER.format(i=i)
            s.add(
                new_message(
                    chat["id"],
                    "user" if i % 2 == 0 else "assistant",
                    "Rowan" if i % 2 == 0 else "Aria",
                    [text],
                )
            )
        s.commit()
    embed_chat(live.services, chat["id"])
    return chat["id"]


def test_search_labels_the_score_marks_the_words_spaces_the_cards_and_finds_nothing_for_nonsense(
    page: Page, live, shot
):
    chat_id = _chat_with_memories(live)
    page.goto(f"{live.url}/chats/{chat_id}/memories")

    page.fill("input[name=q]", "brass key")
    hit = page.locator("#memory-results .memory-hit").first
    expect(hit.locator("mark")).to_have_text(["brass", "key"])
    expect(hit.locator("mark").first).to_be_visible()
    expect(hit.locator(".memory-score")).to_have_text(re.compile(r"^match \d\.\d\d$"))
    assert "shared words" in hit.locator(".memory-score").get_attribute("title")
    hit.locator("mark").first.scroll_into_view_if_needed()
    shot("found")

    page.fill("input[name=q]", "salt flats")
    cards = page.locator("#memory-results .memory-hit")
    expect(cards.nth(2)).to_be_visible()
    first, second = cards.nth(0).bounding_box(), cards.nth(1).bounding_box()
    assert second["y"] - (first["y"] + first["height"]) >= 8  # cards apart, not touching
    shot("several")

    page.fill("input[name=q]", "zzzqqq nothing")
    expect(page.locator("#memory-results")).to_contain_text("No memory matches “zzzqqq nothing”")
    expect(page.locator("#memory-results .memory-hit")).to_have_count(0)
    shot("nothing")

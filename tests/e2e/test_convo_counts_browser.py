"""Issue 21, item 19, in Chromium at desktop and phone sizes: Peek Prompt of a Conversation chat counts each
message once, its parts adding up to the chat; a memory card whose messages fall in one minute shows one
time, not "Today at 09:31 PM – Today at 09:31 PM", and a span within one day names the day once."""

import re
from datetime import UTC, datetime, time, timedelta

from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.models import Message
from app.memory.days import service as conversation
from app.memory.days.core.days import chat_day
from app.memory.days.models import DaySummary
from app.memory.recall.models import MemoryChunk
from app.platform.timeutil import utcnow


def _chat(live, mode: str) -> int:
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hi!"}).json()
        return c.post(
            "/api/chats", json={"character_ids": [char["id"]], "name": "Talk", "mode": mode}
        ).json()["id"]


def test_peek_prompt_counts_add_up_to_the_chat(page: Page, live, shot):
    chat_id = _chat(live, "conversation")
    today = chat_day(utcnow(), conversation.local_zone(), 4)
    with Session(live.engine) as session:  # ten past days of twelve messages, each day summarised
        for back in range(10, 0, -1):
            day = today - timedelta(days=back)
            for n in range(12):
                at = datetime.combine(day, time(10, n)).astimezone().astimezone(UTC)
                session.add(
                    Message(
                        chat_id=chat_id,
                        role="user" if n % 2 else "assistant",
                        name="Aria",
                        content=f"Day -{back}, {n}.",
                        created_at=at,
                        updated_at=at,
                    )
                )
            session.add(DaySummary(chat_id=chat_id, day=day, summary=f"{back} days ago."))
        session.commit()
    page.goto(f"{live.url}/chats/{chat_id}/prompt")
    counts = page.locator("#prompt-message-counts")
    expect(counts).to_be_in_viewport()
    text = " ".join(counts.inner_text().split())
    total, parts = re.fullmatch(r"(\d+) messages: (.*)", text).groups()
    numbers = [int(part.split(" ", 1)[0]) for part in parts.split(" · ")]
    assert int(total) == 121 == sum(numbers), text  # the greeting and 120 past messages, each once
    assert text == "121 messages: 11 sent · 62 left out for summaries · 48 dropped by the window"
    shot("peek-counts")


def test_a_memory_of_one_minute_shows_one_time(page: Page, live, shot):
    chat_id = _chat(live, "roleplay")
    noon = datetime(2026, 1, 5, 12, 31, 5, tzinfo=UTC)  # noon: the same day in any zone within ±11 h
    with Session(live.engine) as session:
        for content, first, last in (
            ("One minute.", noon, noon + timedelta(seconds=40)),
            ("A quarter of an hour.", noon, noon + timedelta(minutes=14)),
        ):
            session.add(
                MemoryChunk(
                    chat_id=chat_id,
                    content=content,
                    message_ids=[],
                    message_count=5,
                    status="unavailable",
                    first_message_at=first,
                    last_message_at=last,
                )
            )
        session.commit()
    page.goto(f"{live.url}/chats/{chat_id}/memories")
    one = page.locator(".memory-card", has_text="One minute.").locator(".memory-when")
    expect(one.locator("time")).to_have_count(1)
    expect(one.locator("time")).to_have_attribute("data-local", "1")
    assert "–" not in one.inner_text()
    span = page.locator(".memory-card", has_text="A quarter of an hour.").locator(".memory-when time")
    expect(span).to_have_count(2)
    expect(span.nth(1)).to_have_attribute("data-local", "1")
    start, end = span.nth(0).inner_text(), span.nth(1).inner_text()
    assert "2026" in start and "2026" not in end and end != start, (start, end)  # the day once
    shot("memory-times")

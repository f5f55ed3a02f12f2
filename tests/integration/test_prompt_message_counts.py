"""Issue 21, item 19: Peek Prompt's counts in a Conversation chat added up to more than the chat (48 dropped
+ 110 summarised + 10 tail for 120 messages): the day summaries counted every summarised message of the
chat, the window's drops among them too, and hidden messages the window dropped were counted nowhere.
Each message the AI may read is now counted once, in one place, and the parts add up to the chat."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from sqlmodel import Session, func, select

from app.chats.models import Message
from app.memory.days import service as conversation
from app.memory.days.core.days import chat_day
from app.memory.days.models import DaySummary
from app.platform.timeutil import utcnow
from tests.conftest import add_character, add_connection, new_chat


def _today() -> date:
    return chat_day(utcnow(), conversation.local_zone(), 4)


def _seed(engine, chat_id: int) -> None:
    """Twelve past days of ten messages each, every day summarised; three hidden among the oldest, and
    one empty message today after the greeting."""
    with Session(engine) as session:
        for back in range(12, 0, -1):
            day = _today() - timedelta(days=back)
            for n in range(10):
                at = datetime.combine(day, time(10, n)).astimezone().astimezone(UTC)
                session.add(
                    Message(
                        chat_id=chat_id,
                        role="user" if n % 2 else "assistant",
                        name="You" if n % 2 else "Aria",
                        content=f"Day -{back} message {n}.",
                        created_at=at,
                        updated_at=at,
                    )
                )
            session.add(DaySummary(chat_id=chat_id, day=day, summary=f"What happened {back} days ago."))
        for n in range(3):
            at = datetime.combine(_today() - timedelta(days=12), time(11, n)).astimezone().astimezone(UTC)
            session.add(
                Message(
                    chat_id=chat_id,
                    role="user",
                    name="You",
                    content=f"Hidden {n}.",
                    hidden=True,
                    created_at=at,
                    updated_at=at,
                )
            )
        session.add(Message(chat_id=chat_id, role="user", name="You", content="   "))
        session.commit()


def test_a_conversation_chats_counts_add_up_to_the_chat(sugo, api, models):
    add_connection(api, models, context_size=32_768)
    chat_id = new_chat(api, [add_character(api)["id"]], mode="conversation")["id"]
    _seed(sugo.engine, chat_id)
    with Session(sugo.engine) as session:
        in_chat = session.exec(
            select(func.count()).select_from(Message).where(Message.chat_id == chat_id)
        ).one()
    assert in_chat == 1 + 120 + 3 + 1  # the greeting, twelve days, the hidden ones, the empty one

    peek = api.get(f"/api/chats/{chat_id}/prompt").json()
    note = next(n for n in peek["notes"] if n.startswith("Day summaries:"))
    summarised, tail = (
        int(x)
        for x in re.search(
            r"(\d+) summarised messages left out, (\d+) kept as the recent tail", note
        ).groups()
    )
    # What the page said before: 48 dropped + 110 summarised + 10 tail (+ the greeting, 3 hidden, 1 empty).
    html = api.get(f"/chats/{chat_id}/prompt").text
    dropped = int(re.search(r"The recent-message window dropped (\d+) older message", html).group(1))
    told = dropped + summarised + tail + 1 + peek["hidden_skipped"] + 1
    assert told == in_chat, (
        f"{dropped} dropped + {summarised} summarised + {tail} tail … = {told} for {in_chat}"
    )
    parts = {
        "sent": peek["history_included"],
        "summarised": peek["sources_left_out"],
        "dropped": peek["window_dropped"],
        "did not fit": peek["history_available"] - peek["history_included"],
        "hidden": peek["hidden_skipped"],
        "empty": peek["empty_skipped"],
    }
    assert sum(parts.values()) == peek["history_total"] == in_chat, parts
    # 121 visible messages over an 80-message window: 48 dropped in two batches of 24; every hidden one counted.
    assert parts == {"sent": 11, "summarised": 62, "dropped": 48, "did not fit": 0, "hidden": 3, "empty": 1}
    assert (summarised, tail) == (parts["summarised"], 10)  # the note counts what the prompt reads, no more

    # The page says the same, in one line that adds up.
    line = re.search(r'id="prompt-message-counts">(.*?)</p>', html, re.S).group(1)
    assert " ".join(line.split()) == (
        "125 messages: 11 sent · 62 left out for summaries · 48 dropped by the window · 3 hidden · 1 empty"
    )
    text = api.get(f"/api/chats/{chat_id}/prompt/snapshot?format=text").text
    assert (
        "Each message once: 125 messages: 11 sent, 62 left out for summaries, 48 dropped by the window, 3 hidden, 1 empty"
        in text
    )

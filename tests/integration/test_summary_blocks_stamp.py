"""Chat Summary's cached entries (app/memory/summaries/prompting.py::SummaryBlocks) follow an edit made
by another server whose clock runs behind, to a text of the same length (issue 26): the entries'
stamp sums their edit times. On SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import Session

from app.chats.models import Chat, Message
from app.memory.summaries import service
from app.memory.summaries.models import SummaryEntry
from app.memory.summaries.prompting import SummaryBlocks
from app.platform.timeutil import utcnow


def test_an_edit_stamped_older_than_the_newest_entry_is_still_read(database):
    cache = SummaryBlocks()  # the reading server's
    with Session(database) as s:
        chat = Chat(name="c", mode="roleplay")
        s.add(chat)
        s.flush()
        s.add_all(Message(chat_id=chat.id, content=f"Message {i}.") for i in range(4))
        s.flush()
        first = service.write_entry(
            s, chat.id, content="Aria met Rowan at the inn.", scope="range", start=1, end=2
        )
        second = service.write_entry(
            s, chat.id, content="Rowan lost his lantern.", scope="range", start=3, end=4
        )
        # The first was edited last by a server whose clock runs an hour ahead of the others'.
        first.updated_at = utcnow() + timedelta(hours=1)
        s.add(first)
        s.commit()
        chat_id, first_id, second_id = chat.id, first.id, second.id
    with Session(database) as s:
        assert "Rowan lost his lantern." in cache.part(s, chat_id, "Aria").block
    with Session(database) as s:  # another server edits the second: its time is older than the first's
        edited = "Rowan kept his lantern."
        assert len(edited) == len("Rowan lost his lantern.")
        service.update_entry(s, chat_id, second_id, content=edited)
        s.commit()
        assert s.get(SummaryEntry, second_id).updated_at < s.get(SummaryEntry, first_id).updated_at
    with Session(database) as s:
        block = cache.part(s, chat_id, "Aria").block
        assert "Rowan kept his lantern." in block and "lost" not in block

"""The chat's plain-SQL reads on both databases (the `database` fixture: a SQLite file, then a fresh
PostgreSQL): the history window, message counts and numbers (app/chats/history.py, one spelling per
database), the lorebooks of a chat (app/lore/service.py), a chat's memory built from its messages
and the @ list (app/memory/chat_notes/service.py), the per-turn probes of the tool sources."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session

from app.characters.models import Character
from app.chats.attachments import Attachment
from app.chats.history import history_window, message_count, message_numbers
from app.chats.models import Chat, ChatCharacter, Message
from app.lore.models import Lorebook, LorebookEntry, LorebookLink
from app.lore.service import book_versions_for_chat, books_for_chat, list_entries
from app.memory.chat_notes import service as chat_notes
from app.personas.models import Persona
from app.tools.documents.source import _has_sent_files
from app.tools.settings import ToolSettings, load_tool_settings, save_tool_settings


def _chat(session: Session, name: str = "Tea") -> tuple[Chat, Character]:
    character = Character(name="Aria")
    chat = Chat(name=name)
    session.add_all([character, chat])
    session.flush()
    session.add(ChatCharacter(chat_id=chat.id, character_id=character.id))
    return chat, character


def _say(session: Session, chat: Chat, content: str, **fields) -> Message:
    msg = Message(chat_id=chat.id, content=content, **fields)
    session.add(msg)
    session.flush()
    return msg


class TestHistory:
    def test_the_window_counts_hidden_messages_and_leaves_out_failed_sends(self, database):
        with Session(database) as session:
            chat, _ = _chat(session)
            first = _say(session, chat, "Hello", role="assistant", name="Aria")
            _say(session, chat, "a secret", hidden=True)
            _say(session, chat, "lost", status="error")
            calls = [{"id": "c1", "name": "read_document", "arguments": "{}"}]
            _say(session, chat, "I read it", role="assistant", name="Aria", tool_calls=calls)
            refs = [{"chat_id": 9, "title": "Old chat", "text": "what happened"}]
            _say(session, chat, "Look", quote="Hello", chat_refs=refs)
            last = _say(session, chat, "Newest")
            session.commit()

            history = history_window(session, chat.id, before_id=None, limit=3)
            # The first message stays pinned, the newest comes after it, the two between are dropped.
            assert [(m.id, m.content) for m in history.messages] == [(first.id, "Hello"), (last.id, "Newest")]
            assert history.plan.dropped == 2 and history.hidden == 1 and not history.refreshed

            before_last = history_window(session, chat.id, before_id=last.id, limit=50)
            contents = [m.content for m in before_last.messages]
            assert contents[:2] == ["Hello", "I read it"]  # the hidden and the failed ones left out
            assert len(contents) == 3 and before_last.hidden == 1
            assert before_last.messages[1].tool_calls == tuple(calls)
            assert "Hello" in contents[2] and "what happened" in contents[2] and "Look" in contents[2]

    def test_a_refresh_mark_cuts_the_window_and_unpins_the_first_message(self, database):
        with Session(database) as session:
            chat, _ = _chat(session)
            _say(session, chat, "Before", role="assistant")
            _say(session, chat, "", kind="refresh")
            _say(session, chat, "After")
            session.commit()
            history = history_window(session, chat.id, before_id=None, limit=50)
            assert [m.content for m in history.messages] == ["After"]
            assert history.refreshed and history.plan.pinned == 0

    def test_counts_and_numbers_leave_refresh_marks_out(self, database):
        with Session(database) as session:
            chat, _ = _chat(session)
            other, _ = _chat(session, "Other")
            one = _say(session, chat, "one")
            _say(session, other, "elsewhere")
            mark = _say(session, chat, "", kind="refresh")
            two = _say(session, chat, "two")
            three = _say(session, chat, "three", hidden=True)
            session.commit()
            assert message_count(session, chat.id, None) == 3
            assert message_count(session, chat.id, three.id) == 2
            numbers = message_numbers(session, chat.id, [three.id, one.id, two.id, three.id, mark.id])
            assert numbers == {one.id: 1, mark.id: 1, two.id: 2, three.id: 3}
            assert message_numbers(session, chat.id, []) == {}


class TestLorebooks:
    def test_the_books_of_a_chat_are_the_global_and_linked_enabled_ones(self, database):
        with Session(database) as session:
            chat, character = _chat(session)
            persona = Persona(name="Sam")
            session.add(persona)
            books = [
                Lorebook(name="everywhere", is_global=True),
                Lorebook(name="this chat"),
                Lorebook(name="the character's"),
                Lorebook(name="the persona's"),
                Lorebook(name="off", is_global=True, enabled=False),
                Lorebook(name="unlinked"),
            ]
            session.add_all(books)
            session.flush()
            session.add_all(
                [
                    LorebookLink(lorebook_id=books[1].id, chat_id=chat.id),
                    LorebookLink(lorebook_id=books[2].id, character_id=character.id),
                    LorebookLink(lorebook_id=books[3].id, persona_id=persona.id),
                ]
            )
            session.commit()
            got = book_versions_for_chat(session, chat.id, [character.id, 999], persona.id)
            assert [i for i, _ in got] == [b.id for b in books[:4]]
            assert [(i, version) for i, (version, _) in got] == [
                (b.id, b.version) for b in books_for_chat(session, chat.id, [character.id], persona.id)
            ]
            assert [i for i, _ in book_versions_for_chat(session, chat.id, [], None)] == [
                books[0].id,
                books[1].id,
            ]

    def test_entries_are_found_by_title_text_or_key_in_any_case(self, database):
        with Session(database) as session:
            book = Lorebook(name="Places")
            session.add(book)
            session.flush()
            entries = [
                LorebookEntry(lorebook_id=book.id, title="Vellmar", content="A port."),
                LorebookEntry(lorebook_id=book.id, content="Scales and fire.", keys=["Dragon", "wyrm"]),
                LorebookEntry(lorebook_id=book.id, content="A 100% pure spring."),
            ]
            session.add_all(entries)
            session.commit()

            def found(query: str) -> list[int]:
                return [e.id for e in list_entries(session, book.id, query=query)]

            assert found("vellMAR") == [entries[0].id]
            assert found("DRAG") == [entries[1].id]  # a key, inside the JSON list
            assert found("100%") == [entries[2].id]
            assert found("") == [e.id for e in entries]


class TestChatMemory:
    def test_the_memory_is_built_from_the_messages_and_files(self, database, tmp_path: Path):
        with Session(database) as session:
            chat, _ = _chat(session)
            _say(session, chat, "Hello", role="assistant")
            ask = _say(session, chat, "Please read my report")
            _say(session, chat, "never seen", hidden=True)
            file = Attachment(
                chat_id=chat.id,
                message_id=ask.id,
                name="report.txt",
                media_type="text/plain",
                size=3,
                sha256="ab" * 32,
                path="attachments/ab/x",
            )
            session.add(file)
            session.flush()
            call = {"id": "c1", "name": "read_document", "arguments": f'{{"attachment_id": {file.id}}}'}
            _say(session, chat, "It says hi", role="assistant", tool_calls=[call])
            _say(session, chat, "", kind="refresh")
            other, _ = _chat(session, "Empty chat")
            session.commit()

            assert set(chat_notes.chats_without_memory(session)) == {chat.id, other.id}
            assert chat_notes.rebuild(session, tmp_path, chat.id)
            session.commit()
            memory = chat_notes.view(session, chat)
            assert memory.summary.requests == ("Please read my report",)
            assert "It says hi" in memory.text and "never seen" not in memory.text
            assert {f.name for f in memory.summary.files} == {"report.txt"}
            assert "read" in {f.mark for f in memory.summary.files}  # read_document's call was found
            assert len(memory.summary.commands) == 1 and memory.summary.commands[0].startswith("/refresh (20")
            assert chat_notes.chats_with_memory(session) == [chat.id]
            assert chat_notes.chats_without_memory(session) == [other.id]
            assert _has_sent_files(session, chat.id) and not _has_sent_files(session, other.id)

            listed = chat_notes.others(session, other.id, "report")
            assert [(o.id, o.first_request) for o in listed] == [(chat.id, "Please read my report")]
            assert listed[0].last_message_at == chat.last_message_at.strftime("%Y-%m-%d %H:%M:%S.%f")
            assert chat_notes.others(session, chat.id) == []


def test_tool_settings_round_trip(database):
    with Session(database) as session:
        assert load_tool_settings(session) == ToolSettings()
        save_tool_settings(session, ToolSettings(permissions={"memory": False}))
        session.commit()
        assert load_tool_settings(session).permissions == {"memory": False}

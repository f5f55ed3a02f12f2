"""Advanced Memory's own SQL on both databases (the `database` fixture: a SQLite file, then a fresh
PostgreSQL): the statements written as SQL text, above all those spelled apart per database (which
bounds are still messages, the first readable message's trim)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.chats.models import Chat, Message
from app.memory.scenes import checks, continuity, messages, prompt, service
from app.memory.scenes.core import window
from app.memory.scenes.models import Scene, SceneState


def _chat(session: Session, name: str = "Chat") -> int:
    chat = Chat(name=name)
    session.add(chat)
    session.flush()
    assert chat.id is not None
    return chat.id


def _message(session: Session, chat_id: int, content: str = "Hello.", **fields) -> int:
    msg = Message(chat_id=chat_id, content=content, swipes=[{"content": content, "status": "ok"}], **fields)
    session.add(msg)
    session.flush()
    assert msg.id is not None
    return msg.id


def test_the_first_readable_message_skips_hidden_failed_streaming_and_blank_ones(database: Engine):
    with Session(database) as s:
        chat = _chat(s)
        other = _chat(s, "Other")
        _message(s, other, "In another chat.")
        _message(s, chat, "Hidden.", hidden=True)
        _message(s, chat, "Failed.", status="error")
        _message(s, chat, "Arriving.", status="streaming")
        _message(s, chat, " \t\n\v\f\r ")  # ASCII white space: SQL trims it away
        _message(s, chat, "\u00a0\u2003")  # other white space: SQL lets it through, Python's strip() not
        _message(s, chat, "")
        _message(s, chat, "A /refresh mark.", kind="refresh")
        assert not messages.has_readable_message(s, chat)

        _message(s, chat, "  Now something.  ")
        assert messages.has_readable_message(s, chat)
        assert messages.has_readable_message(s, other)
        assert not messages.has_readable_message(s, _chat(s, "Empty"))


def test_messages_among_keeps_the_chats_messages_only(database: Engine):
    with Session(database) as s:
        chat, other = _chat(s), _chat(s, "Other")
        first = _message(s, chat)
        mark = _message(s, chat, "", kind="refresh")
        elsewhere = _message(s, other)
        gone = _message(s, chat)
        s.delete(s.get(Message, gone))
        s.flush()
        last = _message(s, chat)

        assert prompt.messages_among(s, chat, {first, mark, elsewhere, gone, last, 10**9}) == {first, last}
        assert prompt.messages_among(s, chat, []) == set()
        many = [_message(s, chat) for _ in range(40)]
        assert prompt.messages_among(s, chat, many) == set(many)


def test_the_window_counts_visible_messages_from_the_stored_start(database: Engine):
    with Session(database) as s:
        chat_id = _chat(s)
        ids = [_message(s, chat_id) for _ in range(6)]
        _message(s, chat_id, hidden=True)
        _message(s, chat_id, status="error")
        _message(s, chat_id, "", kind="refresh")
        chat = s.get(Chat, chat_id)
        # 6 counted: (6 + 2) / 0.7 rounded up, plus 2
        assert prompt.window_limit(s, chat) == 14
        prompt.store_window_start(s, chat_id, ids[3])
        s.flush()
        assert prompt.window_limit(s, chat) == 10  # 3 counted


def test_a_check_is_due_only_once_enough_messages_arrived_after_the_mark(database: Engine):
    with Session(database) as s:
        chat = _chat(s)
        ids = [_message(s, chat) for _ in range(3)]
        _message(s, chat, hidden=True)
        _message(s, chat, status="streaming")
        assert checks._may_be_due(s, chat, None, 3)
        assert not checks._may_be_due(s, chat, None, 4)
        assert not checks._may_be_due(s, chat, ids[0], 3)
        _message(s, chat)
        assert checks._may_be_due(s, chat, ids[0], 3)


def _scene_row(scene: Scene) -> prompt.SceneRow:
    assert scene.id is not None
    return prompt.SceneRow(
        scene.id,
        scene.first_message_id,
        scene.last_message_id,
        scene.state,
        scene.summary,
        scene.timeframe,
        scene.enabled,
    )


def test_the_scenes_and_their_quotable_messages_are_read_per_scene(database: Engine):
    with Session(database) as s:
        chat = _chat(s)
        one = [_message(s, chat, f"One {n}.", name="Aria", role="assistant") for n in range(3)]
        _message(s, chat, "Hidden.", hidden=True)
        _message(s, chat, "   ")
        _message(s, chat, "Failed.", status="error")
        long = [_message(s, chat, f"Two {n}.") for n in range(window.MAX_RUN_MESSAGES * 8 + 5)]
        first = Scene(chat_id=chat, first_message_id=one[0], last_message_id=one[-1] + 3, summary="First.")
        second = Scene(
            chat_id=chat, first_message_id=long[0], last_message_id=long[-1], state="written", enabled=False
        )
        s.add_all([second, first])
        s.flush()

        rows = prompt._scenes(s, chat)
        assert rows == [_scene_row(first), _scene_row(second)]
        assert rows[1].enabled is False

        quotable = prompt._quotable(s, chat, rows)
        assert [(m, name, text) for m, _, name, text in quotable[first.id]] == [
            (i, "Aria", f"One {n}.") for n, i in enumerate(one)
        ]
        assert all(tokens > 0 for _, tokens, _, _ in quotable[first.id])
        assert [m for m, *_ in quotable[second.id]] == long[: window.MAX_RUN_MESSAGES * 8]
        assert prompt._quotable(s, chat, rows[1:]).keys() == {second.id}
        assert prompt._quotable(s, chat, []) == {}


def test_a_scenes_ends_are_its_first_and_last_messages_still_there(database: Engine):
    with Session(database) as s:
        chat = _chat(s)
        ids = [_message(s, chat) for _ in range(5)]
        scene = Scene(chat_id=chat, first_message_id=ids[0], last_message_id=ids[4])
        emptied = Scene(chat_id=chat, first_message_id=ids[4] + 100, last_message_id=ids[4] + 200)
        s.add_all([scene, emptied])
        for gone in (ids[0], ids[4]):
            s.delete(s.get(Message, gone))
        s.flush()
        ends = {sid: (lo, hi) for sid, lo, hi in s.connection().execute(service._ENDS_SQL, {"chat_id": chat})}
        assert ends == {scene.id: (ids[1], ids[3]), emptied.id: (None, None)}


def test_a_branch_takes_the_scenes_before_its_point(database: Engine):
    with Session(database) as s:
        source, branch = _chat(s), _chat(s, "Branch")
        old = [_message(s, source, f"Line {n}.") for n in range(6)]
        new = [_message(s, branch, f"Line {n}.") for n in range(4)]
        s.add_all(
            [
                Scene(chat_id=source, first_message_id=old[0], last_message_id=old[1], summary="Kept."),
                Scene(chat_id=source, first_message_id=old[2], last_message_id=old[4], summary="Cut."),
                SceneState(chat_id=source, checked_through_id=old[5], window_start_id=old[2]),
            ]
        )
        s.flush()
        service.copy_to_branch(s, source, branch)
        copied = [(sc.first_message_id, sc.last_message_id, sc.summary) for sc in service._scenes(s, branch)]
        assert copied == [(new[0], new[1], "Kept.")]
        state = s.get(SceneState, branch)
        assert state is not None
        assert (state.checked_through_id, state.window_start_id) == (new[3], new[2])


@pytest.mark.parametrize("start", [0, 2])
def test_continuitys_counts_read_the_messages_from_the_windows_start(database: Engine, start: int):
    with Session(database) as s:
        chat = _chat(s)
        ids = [_message(s, chat) for _ in range(5)]
        _message(s, chat, "", kind="refresh")
        _message(s, _chat(s, "Other"))
        conn = s.connection()
        tail = conn.execute(continuity._TAIL_SQL, {"chat_id": chat, "start": ids[start]}).scalar_one()
        assert tail == 5 - start
        assert list(conn.execute(continuity._MESSAGE_IDS_SQL, {"chat_id": chat}).scalars()) == ids

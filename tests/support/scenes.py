"""Advanced Memory test data: a closed scene stored straight in the database, for tests of what comes
after the scene check (recaps, the scenes API)."""

from __future__ import annotations

from app.chats.models import Message
from app.memory.scenes.models import Scene


def stored_scene(sugo, chat_id: int, lines: list[tuple[str, str]], **fields) -> int:
    """A closed scene of new messages, (author, text) each, "You" being the user; its id. `fields` set
    the Scene's own columns (state, summary, manual…)."""
    with sugo.session() as s:
        ids = []
        for name, text in lines:
            msg = Message(
                chat_id=chat_id,
                role="user" if name == "You" else "assistant",
                name=name,
                content=text,
                swipes=[{"content": text, "status": "ok"}],
            )
            s.add(msg)
            s.flush()
            ids.append(msg.id)
        scene = Scene(chat_id=chat_id, first_message_id=ids[0], last_message_id=ids[-1], **fields)
        s.add(scene)
        s.commit()
        return scene.id

"""Advanced Memory's prompt part costs what it uses (issue 23): Peek Prompt of a prepared Advanced Memory
chat runs the same SQL statements and fetches the same rows at 600 and 2,400 messages (message numbers
for the messages and scenes shown only, the recalled scenes' messages in one statement), and the scene
check after a reply reads nothing more when none is due. And what it sends did not change with that:
the blocks, the notes and the receipt of a prepared chat are pinned below as the code before the change
gave them (numbers across deleted, hidden and failed messages, a scene whose last message was deleted).

The chat is prepared straight in the database as Prepare and a first reply leave it: closed scenes with
their recaps, the window's new start stored at the open scene, and the newest reply's recalled scenes kept
(SceneSnapshot) so the prompt recalls them without a memory search (its ranking is Memory Recall's)."""

from __future__ import annotations

import pytest
from sqlmodel import select

from app.chats.models import Message
from app.chats.service import new_message
from app.memory.scenes.checks import check_scenes
from app.memory.scenes.models import Scene, SceneSnapshot, SceneState
from tests.integration.test_page_costs import SqlCounter, _explain
from tests.support.live import LiveSugo

SIZES = (600, 2400)
SCENE_LENGTH = 40  # every scene but the first, and the open one: the first takes what is left
CLOSED = 6


def _prepared_chat(live: LiveSugo, size: int) -> tuple[int, list[int]]:
    """A roleplay chat of `size` messages with Advanced Memory on: CLOSED scenes recapped (the first
    holding the bulk of the chat, the others SCENE_LENGTH messages each), the open scene's first message
    stored as the new start, and the newest message's recalled scenes (the second and the fourth, with
    excerpts) kept. Its id and its messages' ids."""
    with live.client() as api:
        conn = {"name": "Local", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
        api.post("/api/connections", json=conn).raise_for_status()
        char = api.post("/api/characters", json={"name": "Mirela", "description": "A guide."}).json()
        chat = api.post("/api/chats", json={"character_ids": [char["id"]], "mode": "roleplay"}).json()
        settings = {"advanced_memory": True, "adv_check_interval": 100}
        api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings}).raise_for_status()
    chat_id = chat["id"]
    with live.session() as s:
        s.add_all(
            new_message(
                chat_id, *(("user", "Rowan") if i % 2 else ("assistant", "Mirela")), [f"step {i} " * 12]
            )
            for i in range(size)
        )
        s.flush()
        ids = list(s.exec(select(Message.id).where(Message.chat_id == chat_id).order_by(Message.id)))
        bounds = [0, size - CLOSED * SCENE_LENGTH]
        bounds += [bounds[-1] + SCENE_LENGTH * k for k in range(1, CLOSED)]
        scenes = []
        for k, first in enumerate(bounds):
            scene = Scene(
                chat_id=chat_id,
                first_message_id=ids[first],
                last_message_id=ids[(bounds[k + 1] if k + 1 < len(bounds) else size - SCENE_LENGTH) - 1],
                state="written",
                summary=f"Rowan and Mirela crossed the {k + 1}th valley.",
                timeframe=f"day {k + 1}",
            )
            s.add(scene)
            scenes.append(scene)
        s.add(
            SceneState(chat_id=chat_id, window_start_id=ids[size - SCENE_LENGTH], checked_through_id=ids[-1])
        )
        s.flush()
        kept = [
            {"id": scenes[1].id, "excerpt": [ids[bounds[1] + i] for i in (10, 11, 12)]},
            {"id": scenes[3].id, "excerpt": [ids[bounds[3] + i] for i in (20, 21)]},
        ]
        s.add(SceneSnapshot(chat_id=chat_id, anchor_id=ids[-1], scenes=kept))
        s.commit()
    return chat_id, ids


@pytest.fixture(scope="module")
def costs(tmp_path_factory) -> dict[str, dict[int, tuple[int, int, list[list]]]]:
    out: dict[str, dict[int, tuple[int, int, list[list]]]] = {}
    for size in SIZES:
        with LiveSugo(tmp_path_factory.mktemp(f"adv{size}") / "data", start_scheduler=False) as live:
            chat_id, _ = _prepared_chat(live, size)
            counter = SqlCounter(live.engine)
            with live.client() as api:
                path = f"/chats/{chat_id}/prompt"
                peek = api.get(f"/api/chats/{chat_id}/prompt").json()
                assert "Recalled scenes: 2" in " ".join(peek["notes"])  # the kept scenes, excerpts and all
                api.get(path)  # warm: first-use caches are not the prompt's cost
                out.setdefault("peek", {})[size] = counter.measure(api, path)
            counter.statements, counter.counting = [], True
            try:
                assert check_scenes(live.services, chat_id).status == "not_due"
            finally:
                counter.counting = False
            statements = counter.statements
            out.setdefault("check", {})[size] = (len(statements), sum(r for _, r in statements), statements)
    return out


def test_peek_prompt_of_an_advanced_memory_chat_costs_the_same_for_600_and_2400_messages(costs) -> None:
    (small_statements, small_rows, _), (large_statements, large_rows, _) = (costs["peek"][s] for s in SIZES)
    assert (small_statements, small_rows) == (large_statements, large_rows), _explain(costs["peek"])


def test_the_scene_check_after_a_reply_reads_the_same_when_none_is_due(costs) -> None:
    (small_statements, small_rows, _), (large_statements, large_rows, _) = (costs["check"][s] for s in SIZES)
    assert (small_statements, small_rows) == (large_statements, large_rows), _explain(costs["check"])

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
from app.chats.service import get_chat, new_message
from app.memory.scenes.checks import check_scenes
from app.memory.scenes.models import Scene, SceneSnapshot, SceneState
from app.memory.summaries.models import SummaryEntry
from app.prompt.service import build_chat_prompt
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


# The golden chat: 120 messages; 5, 6 and 89 (counting from 0) deleted, 52 hidden, 53 failed. Scenes
# 0–29, 30–59 and 60–89 closed and recapped (the third's last message is the deleted 89), 90–119 open;
# the new start at 90; the newest message's reply recalled the second scene (an excerpt with the hidden
# message), the first and the third; a Chat Summary entry over the first scene.
GOLDEN_SIZE = 120
DELETED = (5, 6, 89)
HIDDEN, FAILED = 52, 53


def _golden_chat(live: LiveSugo) -> int:
    with live.client() as api:
        conn = {"name": "Local", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
        api.post("/api/connections", json=conn).raise_for_status()
        char = api.post("/api/characters", json={"name": "Mirela", "description": "A guide."}).json()
        chat = api.post("/api/chats", json={"character_ids": [char["id"]], "mode": "roleplay"}).json()
        settings = {"advanced_memory": True, "adv_check_interval": 100}
        api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings}).raise_for_status()
    chat_id = chat["id"]
    with live.session() as s:
        messages = [
            new_message(
                chat_id,
                *(("user", "Rowan") if i % 2 else ("assistant", "Mirela")),
                [f"Line {i}: stone {i} of the lantern road."],
            )
            for i in range(GOLDEN_SIZE)
        ]
        s.add_all(messages)
        s.flush()
        ids = [m.id for m in messages]
        messages[HIDDEN].hidden = True
        messages[FAILED].status = "error"
        scenes = [
            Scene(
                chat_id=chat_id,
                first_message_id=ids[first],
                last_message_id=ids[first + 29],
                state="written",
                summary=f"Rowan and Mirela walked the {name} stretch of the lantern road.",
                timeframe=f"night {n}",
            )
            for n, (first, name) in enumerate(((0, "northern"), (30, "river"), (60, "mountain")), 1)
        ]
        s.add_all(scenes)
        s.add(
            SummaryEntry(
                chat_id=chat_id,
                title="The start",
                content="Mirela met Rowan at the northern gate.",
                first_message_id=ids[0],
                last_message_id=ids[29],
                first_position=1,
                last_position=28,
                active=True,
            )
        )
        s.add(SceneState(chat_id=chat_id, window_start_id=ids[90], checked_through_id=ids[-1]))
        s.flush()
        kept = [
            {"id": scenes[1].id, "excerpt": [ids[i] for i in (50, 51, 52, 54)]},
            {"id": scenes[0].id, "excerpt": [ids[i] for i in (10, 11)]},
            {"id": scenes[2].id, "excerpt": [ids[i] for i in (70, 71, 72)]},
        ]
        s.add(SceneSnapshot(chat_id=chat_id, anchor_id=ids[-1], scenes=kept))
        for i in DELETED:
            s.delete(messages[i])
        s.commit()
    return chat_id


def _advanced_memory_part(live: LiveSugo, chat_id: int, settings: dict) -> dict:
    """What Advanced Memory put in the prompt: the system messages (its blocks among them), the first
    and last history message sent, its note and its receipt."""
    with live.client() as api:
        body = {"settings": {"advanced_memory": True, "adv_check_interval": 100, **settings}}
        api.put(f"/api/chats/{chat_id}/options", json=body).raise_for_status()
    with live.session() as s:
        prompt, _ = build_chat_prompt(s, get_chat(s, chat_id), services=live.services)
    history = [m["content"] for m in prompt.messages if m["role"] != "system"]
    return {
        # The system prompt from the first of the memory blocks on (the card's part is not Advanced Memory's).
        "system": [
            m["content"][m["content"].index("[Summary") :] for m in prompt.messages if m["role"] == "system"
        ],
        "history": [len(history), history[0][:8], history[-1][:9]],
        "note": [n for n in prompt.notes if n.startswith("Advanced Memory")],
        "receipt": list(prompt.receipt),
    }


# What the code before issue 23's change gave for the golden chat (the third scene's range ends at "#0": its
# last message was deleted, and a deleted message has no number). "roomy": the defaults; "tight": a ceiling
# of 1,400 and a budget of 300, so the open scene does not fit and its beginning is quoted.
GOLDEN = {
    "roomy": {
        "system": [
            "\n".join(
                [
                    "[Summary of earlier events, oldest first]",
                    "",
                    "## The start",
                    "Mirela met Rowan at the northern gate.",
                    "",
                    "## Recalled Scenes",
                    "",
                    (
                        "Earlier scenes recalled for this reply. The current history is messages "
                        "#88–#117; the user's last message is #117: everything below happened before it."
                    ),
                    "",
                    "### Scene 2 (messages #29–#58; story timeframe: night 2)",
                    "Rowan and Mirela walked the river stretch of the lantern road.",
                    "Excerpt:",
                    "#49 Mirela: Line 50: stone 50 of the lantern road.",
                    "#50 Rowan: Line 51: stone 51 of the lantern road.",
                    "#53 Mirela: Line 54: stone 54 of the lantern road.",
                    "",
                    "### Scene 1 (messages #1–#28; story timeframe: night 1)",
                    "Rowan and Mirela walked the northern stretch of the lantern road.",
                    "Excerpt:",
                    "#9 Mirela: Line 10: stone 10 of the lantern road.",
                    "#10 Rowan: Line 11: stone 11 of the lantern road.",
                    "",
                    "### Scene 3 (messages #59–#0; story timeframe: night 3)",
                    "Rowan and Mirela walked the mountain stretch of the lantern road.",
                    "Excerpt:",
                    "#69 Mirela: Line 70: stone 70 of the lantern road.",
                    "#70 Rowan: Line 71: stone 71 of the lantern road.",
                    "#71 Mirela: Line 72: stone 72 of the lantern road.",
                ]
            ),
        ],
        "history": [30, "Line 90:", "Line 119:"],
        "note": [
            (
                "Advanced Memory: Context: ~1,013 of 65,000 tokens. Chat Summaries: 1. Recalled "
                "scenes: 2, 1, 3."
            ),
        ],
        "receipt": [
            "Context: ~1,013 of 65,000 tokens",
            "Chat Summaries: 1",
            "Recalled scenes: 2, 1, 3.",
        ],
    },
    "tight": {
        "system": [
            "\n".join(
                [
                    "[Summary of earlier events, oldest first]",
                    "",
                    "## The start",
                    "Mirela met Rowan at the northern gate.",
                    "",
                    "## Recalled Scenes",
                    "",
                    (
                        "Earlier scenes recalled for this reply. The current history is messages "
                        "#88–#117; the user's last message is #117: everything below happened before it."
                    ),
                    "",
                    "### Scene 2 (messages #29–#58; story timeframe: night 2)",
                    "Rowan and Mirela walked the river stretch of the lantern road.",
                    "Excerpt:",
                    "#49 Mirela: Line 50: stone 50 of the lantern road.",
                    "#50 Rowan: Line 51: stone 51 of the lantern road.",
                    "#53 Mirela: Line 54: stone 54 of the lantern road.",
                    "",
                    "### Scene 1 (messages #1–#28; story timeframe: night 1)",
                    "Rowan and Mirela walked the northern stretch of the lantern road.",
                    "Excerpt:",
                    "#9 Mirela: Line 10: stone 10 of the lantern road.",
                    "#10 Rowan: Line 11: stone 11 of the lantern road.",
                    "",
                    "### Scene 3 (messages #59–#0; story timeframe: night 3)",
                    "Rowan and Mirela walked the mountain stretch of the lantern road.",
                    "Excerpt:",
                    "#69 Mirela: Line 70: stone 70 of the lantern road.",
                    "#70 Rowan: Line 71: stone 71 of the lantern road.",
                    "#71 Mirela: Line 72: stone 72 of the lantern road.",
                ]
            ),
        ],
        "history": [30, "Line 90:", "Line 119:"],
        "note": [
            (
                "Advanced Memory: Context: ~1,013 of 1,400 tokens. Chat Summaries: 1. Recalled "
                "scenes: 2, 1, 3."
            ),
        ],
        "receipt": [
            "Context: ~1,013 of 1,400 tokens",
            "Chat Summaries: 1",
            "Recalled scenes: 2, 1, 3.",
        ],
    },
}


@pytest.fixture(scope="module")
def golden_live(tmp_path_factory):
    with LiveSugo(tmp_path_factory.mktemp("golden") / "data", start_scheduler=False) as live:
        yield live, _golden_chat(live)


@pytest.mark.parametrize(
    ("case", "settings"), [("roomy", {}), ("tight", {"adv_max_context": 1400, "adv_budget": 300})]
)
def test_the_prompt_of_a_prepared_chat_is_what_it_was(golden_live, case: str, settings: dict) -> None:
    live, chat_id = golden_live
    assert _advanced_memory_part(live, chat_id, settings) == GOLDEN[case]

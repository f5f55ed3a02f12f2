"""Advanced Memory's prompt part (issue 14, acceptance 1): a 600-message roleplay with 12 scenes, prepared
with the test model server playing the helper (scripted scene ends and recaps), then run turn by turn: every request stays under the ceiling, the window
restarts at the newest scene once the ceiling is reached (a stored "new start"), and a question about an
earlier scene gets that scene's recap and an excerpt in one Recalled Scenes block, said in the receipt."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from sqlmodel import Session, select

from app.chats.models import Message
from app.memory.scenes.models import SceneState
from app.memory.summaries.models import SummaryEntry
from app.prompt.core.tokens import count_message_tokens
from tests.conftest import add_character, add_connection, read_sse
from tests.support.waiting import wait_for

SCENES = 12
PER_SCENE = 48  # 576 imported messages; the turns below bring the chat past 600
CEILING = 6000
TOPICS = [
    ("the brass key", "hid the brass key under the third stair of the glass lighthouse"),
    ("the orchard", "picked quinces in the walled orchard behind the abbey"),
    ("the ferry", "missed the night ferry and slept in the boathouse"),
    ("the mapmaker", "bargained with the one-eyed mapmaker for a chart of the reefs"),
    ("the festival", "danced at the lantern festival until the drums stopped"),
    ("the storm", "sheltered from the hailstorm in a shepherd's hut"),
    ("the library", "found a forbidden atlas in the drowned library"),
    ("the duel", "watched the fencing duel on the frozen canal"),
    ("the falcon", "nursed a wounded peregrine falcon back to health"),
    ("the mine", "followed copper veins deep into the abandoned mine"),
    ("the wedding", "sang at the miller's daughter's wedding feast"),
    ("the caravan", "joined the salt caravan crossing the white desert"),
]


def _jsonl() -> bytes:
    start = datetime(2024, 3, 1, 9, 0)
    lines: list[dict] = [
        {
            "user_name": "Rowan",
            "character_name": "Mirela",
            "create_date": start.isoformat(),
            "chat_metadata": {},
        }
    ]
    n = 0
    for k, (topic, deed) in enumerate(TOPICS):
        for i in range(PER_SCENE):
            user = i % 2 == 0
            if i == 10:
                text = f"Remember this: we {deed}."
            elif user:
                text = f"Tell me more about {topic}, part {i} of scene {k + 1}."
            else:
                text = f"*Mirela smiles.* Ah, {topic}. There is always more to say, step {i}."
            lines.append(
                {
                    "name": "Rowan" if user else "Mirela",
                    "is_user": user,
                    "is_system": False,
                    "send_date": (start + timedelta(minutes=n)).isoformat(),
                    "mes": text,
                }
            )
            n += 1
    return "\n".join(json.dumps(line) for line in lines).encode()


def _setup(sugo, api, models) -> tuple[int, list[int]]:
    add_connection(api, models, context_size=32768)
    add_character(api, "Mirela")
    r = api.post("/api/chats/import", files={"file": ("long.jsonl", _jsonl())})
    assert r.status_code == 201, r.text
    chat_id = r.json()["id"]
    chat = api.get(f"/api/chats/{chat_id}").json()
    assert chat["mode"] == "roleplay"
    ids = [m["id"] for m in api.get(f"/api/chats/{chat_id}/messages").json() if m["kind"] == "message"]
    assert len(ids) == SCENES * PER_SCENE
    r = api.put(
        f"/api/chats/{chat_id}/options",
        json={
            "settings": {
                "advanced_memory": True,
                "adv_max_context": CEILING,
                "adv_budget": 1200,
                "adv_check_interval": 100,
            }
        },
    )
    assert r.status_code == 200, r.text
    # Prepare existing history with the test model server as the helper: each window's answer names the
    # scene ends (eleven scenes close, the twelfth stays open), then each scene's recap, in order.
    ends = json.dumps({"ends": [{"messageNumber": (k + 1) * PER_SCENE} for k in range(SCENES - 1)]})
    windows = -(-len(ids) // 200)  # 2 × the check interval per window
    recaps = [
        json.dumps(
            {
                "summary": f"Rowan and Mirela {deed}. It was the scene of {topic}.",
                "participants": ["Mirela"],
                "timeframe": f"day {k + 1}",
            }
        )
        for k, (topic, deed) in enumerate(TOPICS[:-1])
    ]
    models.script(*[ends] * windows, *recaps)
    assert api.post(f"/api/chats/{chat_id}/scenes/prepare").status_code in (200, 201, 202)
    wait_for(
        lambda: api.get(f"/api/chats/{chat_id}/scenes/prepare").json()["status"] != "running",
        timeout=120,
        interval=0.2,
        what="Prepare existing history",
    )
    assert api.get(f"/api/chats/{chat_id}/scenes/prepare").json()["status"] == "done"
    scenes = api.get(f"/api/chats/{chat_id}/scenes").json()
    assert [(sc["first_number"], sc["last_number"], sc["state"]) for sc in scenes] == [
        (k * PER_SCENE + 1, (k + 1) * PER_SCENE, "written") for k in range(SCENES - 1)
    ]
    assert models.pending_replies == 0
    # Memories (the chunks recall ranks scenes by) are built after the import, without a reply.
    wait_for(lambda: _embedded(api, chat_id), timeout=300, interval=0.5, what="every memory embedded")
    return chat_id, ids


def _embedded(api, chat_id: int) -> bool:
    status = api.get(f"/api/chats/{chat_id}/memories/status").json()
    return (
        bool(status["count"])
        and status["building"] is None
        and status["statuses"].get("vectorized") == status["count"]
    )


def _send(api, chat_id: int, text: str) -> list[tuple[str, dict]]:
    events = read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": text}))
    assert events[-1][0] == "done", events[-3:]
    return events


def _reply_request(models):
    """The newest request for a chat reply (streamed), not a helper's (continuity, checks, recaps)."""
    return next(r for r in reversed(list(models.requests)) if r.json and r.json.get("stream"))


def _tokens(request) -> int:
    return sum(count_message_tokens(m["content"]) for m in request.json["messages"])


def _system(request) -> str:
    return "\n".join(m["content"] for m in request.json["messages"] if m["role"] == "system")


def test_a_long_roleplay_stays_under_the_ceiling_restarts_at_the_newest_scene_and_recalls_the_right_one(
    sugo, api, models
):
    chat_id, ids = _setup(sugo, api, models)
    whole = sum(count_message_tokens(m["content"]) for m in api.get(f"/api/chats/{chat_id}/messages").json())
    assert whole > CEILING  # the history alone would not fit

    # Turn by turn: every request under the ceiling; the first reply stores the new start at the open
    # scene's first message.
    for i in range(12):
        _send(api, chat_id, f"We walk along the caravan trail, turn {i}.")
        assert _tokens(_reply_request(models)) <= CEILING
        if i == 0:
            with Session(sugo.engine) as s:
                assert s.get(SceneState, chat_id).window_start_id == ids[11 * PER_SCENE]
            sent = _reply_request(models).json["messages"]
            assert not any("scene 11" in m["content"] for m in sent if m["role"] != "system")
            assert any("part 0 of scene 12" in m["content"] for m in sent)

    # A question about the first scene: its recap and an excerpt, under one range header; not another scene's.
    _send(api, chat_id, "Where did we hide the brass key at the glass lighthouse?")
    request = _reply_request(models)
    assert _tokens(request) <= CEILING
    system = _system(request)
    assert system.count("## Recalled Scenes") == 1
    assert "Rowan and Mirela hid the brass key under the third stair of the glass lighthouse" in system
    assert "The current history is messages #" in system and "the user's last message is #" in system
    assert "Remember this: we hid the brass key" in system  # the excerpt quotes the scene's message
    assert "quinces" not in system or system.index("brass key") < system.index("quinces")
    peek = api.get(f"/api/chats/{chat_id}/prompt").json()
    # Peek reads the same window: from the stored start to the reply just written.
    conversation = [b["message_id"] for b in peek["blocks"] if b["group"] == "conversation"]
    assert conversation[0] == ids[11 * PER_SCENE] and len(conversation) == PER_SCENE + 13 * 2
    notes = " ".join(peek["notes"]) if isinstance(peek.get("notes"), list) else json.dumps(peek)
    assert "Advanced Memory: Context: ~" in notes and "Recalled scenes: 1" in notes
    assert "Memory Recall: Advanced Memory Recall recalls for this chat" in notes


def test_constants_covering_the_window_wait_and_scenes_inside_it_are_not_recalled(sugo, api, models):
    chat_id, ids = _setup(sugo, api, models)
    with Session(sugo.engine) as s:
        # An entry over the first scene (before the window) and one over the newest (inside it).
        s.add(
            SummaryEntry(
                chat_id=chat_id,
                title="Lighthouse",
                content="The key lies under the third stair.",
                first_message_id=ids[0],
                last_message_id=ids[PER_SCENE - 1],
                first_position=1,
                last_position=PER_SCENE,
            )
        )
        s.add(
            SummaryEntry(
                chat_id=chat_id,
                title="Caravan",
                content="The caravan carries salt east.",
                first_message_id=ids[11 * PER_SCENE],
                last_message_id=ids[-1],
                first_position=11 * PER_SCENE + 1,
                last_position=len(ids),
            )
        )
        s.commit()
    _send(api, chat_id, "Tell me about the salt caravan crossing the white desert again.")
    system = _system(_reply_request(models))
    assert "The key lies under the third stair." in system  # a constant before the window goes in
    assert "The caravan carries salt east." not in system  # one covering the window waits
    assert (
        "## Recalled Scenes" not in system or "It was the scene of the caravan" not in system
    )  # open, in the window
    with Session(sugo.engine) as s:
        start = s.get(SceneState, chat_id).window_start_id
        newest = s.exec(
            select(Message.id).where(Message.chat_id == chat_id).order_by(Message.id.desc())
        ).first()
    assert start == ids[11 * PER_SCENE] and newest > start


def test_the_new_start_shows_in_the_chat_and_undo_with_a_higher_ceiling_sends_the_whole_history(
    sugo, api, models
):
    chat_id, ids = _setup(sugo, api, models)
    _send(api, chat_id, "We walk along the caravan trail.")
    start = ids[11 * PER_SCENE]
    page = api.get(f"/chats/{chat_id}/messages", params={"before": start + 1}).text
    assert 'class="new-start"' in page and "Undo new start" in page
    # Undone with the ceiling raised: the whole history is the window again, nothing recalled.
    assert api.delete(f"/api/chats/{chat_id}/scenes/new-start").json() == {"undone": True}
    assert api.delete(f"/api/chats/{chat_id}/scenes/new-start").json() == {"undone": False}
    assert (
        api.put(
            f"/api/chats/{chat_id}/options",
            json={"settings": {"advanced_memory": True, "adv_max_context": 100_000}},
        ).status_code
        == 200
    )
    peek = api.get(f"/api/chats/{chat_id}/prompt").json()
    conversation = [b["message_id"] for b in peek["blocks"] if b["group"] == "conversation"]
    assert conversation[0] == ids[0] and len(conversation) == len(ids) + 2
    assert 'class="new-start"' not in api.get(f"/chats/{chat_id}/messages", params={"before": start + 1}).text


def _recalled(request) -> str:
    system = _system(request)
    return system[system.index("## Recalled Scenes") :] if "## Recalled Scenes" in system else ""


def test_a_swipe_recalls_what_its_reply_recalled_and_sees_an_edited_or_hidden_source_at_once(
    sugo, api, models
):
    chat_id, ids = _setup(sugo, api, models)
    # Room for every excerpt whole: the entries continuity adds after each reply (short ones here) must
    # not be what changes between the versions.
    assert (
        api.put(
            f"/api/chats/{chat_id}/options",
            json={
                "settings": {
                    "advanced_memory": True,
                    "adv_max_context": CEILING,
                    "adv_budget": 2500,
                    "adv_check_interval": 100,
                }
            },
        ).status_code
        == 200
    )
    models.script("Under the third stair.", "They walked on.", "They walked further.")
    _send(api, chat_id, "Where did we hide the brass key at the glass lighthouse?")
    first = _recalled(_reply_request(models))
    assert "hid the brass key" in first
    reply_id = api.get(f"/api/chats/{chat_id}/messages").json()[-1]["id"]

    def swipe() -> str:
        models.script("Another telling.", "They rested.", "They rested again.")
        events = read_sse(
            api.post(f"/api/chats/{chat_id}/generate", json={"action": "swipe", "message_id": reply_id})
        )
        assert events[-1][0] == "done", events[-3:]
        return _recalled(_reply_request(models))

    assert swipe() == first  # the same memory for another version of the same reply
    # Even when a fresh search would find nothing (every memory forgotten): the reply's scenes are kept.
    assert api.delete(f"/api/chats/{chat_id}/memories").status_code == 200
    assert swipe() == first
    # The swipes' after-reply work builds the memories again.
    wait_for(lambda: _embedded(api, chat_id), timeout=300, interval=0.5, what="the memories built again")
    # The scene's summary edited by hand, and the quoted message hidden: the next version reads them.
    scene_id = next(s["id"] for s in api.get(f"/api/chats/{chat_id}/scenes").json() if s["first_number"] == 1)
    assert (
        api.patch(
            f"/api/chats/{chat_id}/scenes/{scene_id}",
            json={"summary": "The key went under the lighthouse's third stair."},
        ).status_code
        == 200
    )
    fact = ids[10]
    assert api.patch(f"/api/chats/{chat_id}/messages/{fact}", json={"hidden": True}).status_code == 200
    again = swipe()
    assert (
        "The key went under the lighthouse's third stair." in again and "hid the brass key under" not in again
    )
    assert "Remember this: we hid the brass key" not in again

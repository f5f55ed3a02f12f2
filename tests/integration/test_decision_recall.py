"""Recall by decision (issue 27, acceptance 3's last part): with Use Decision model on, a scripted decision
model (the test model server on its own connection) picks the scenes a reply recalls and the message
each excerpt centres on; one that does not answer in time leaves recall to normal ranking within the
limit, and the receipt says so. Each result is kept for Peek Prompt → Advanced Memory activity."""

from __future__ import annotations

import json
import threading
import time

from sqlmodel import Session, col, select

from app.chats.models import Message
from app.memory.recall.jobs import embed_chat
from app.memory.scenes.checks import check_scenes
from app.memory.scenes.core.decision import MIN_STEP_S, PICK_PROMPT, SCORE_PROMPT
from app.memory.scenes.decision import activity
from app.memory.scenes.prompt import store_window_start
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.scenes import stored_scene

TOPICS = [
    ("lighthouse", "We climbed the glass lighthouse and hid the brass key under the third stair."),
    ("orchard", "We picked quinces in the walled orchard behind the abbey."),
    ("ferry", "We missed the night ferry and slept in the boathouse."),
    ("mapmaker", "We bargained with the one-eyed mapmaker for a chart of the reefs."),
]


def _chat(api, sugo, models) -> tuple[int, list[int]]:
    conn = add_connection(api, models, context_size=32768)
    char = add_character(api, "Mirela", first_mes="")
    chat = new_chat(api, [char["id"]])
    scene_ids = []
    for topic, deed in TOPICS:
        lines = [("You", deed)] + [
            ("You" if i % 2 else "Mirela", f"More about the {topic}, moment {i}.") for i in range(1, 8)
        ]
        scene_ids.append(
            stored_scene(
                sugo,
                chat["id"],
                lines,
                state="written",
                summary=f"Rowan and Mirela at the {topic}. {deed}",
                participants=["Mirela"],
            )
        )
    now = stored_scene(sugo, chat["id"], [("You", "A new morning on the road."), ("Mirela", "Onward.")])
    with Session(sugo.engine) as s:
        from app.memory.scenes.models import Scene  # noqa: PLC0415

        open_scene = s.get(Scene, now)
        first = open_scene.first_message_id
        s.delete(open_scene)  # the current scene is open: only its messages stay
        store_window_start(s, chat["id"], first)
        s.commit()
    embed_chat(sugo.services, chat["id"])
    settings = {
        **chat["settings"],
        "advanced_memory": True,
        "adv_check_interval": 100,
        "adv_decision": True,
        "adv_decision_connection_id": conn["id"],
        "adv_excerpt_min": 1,
        "adv_excerpt_max": 1,
    }
    assert api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings}).status_code == 200
    return chat["id"], scene_ids


def _send(api, chat_id, text):
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": text})
    assert r.status_code == 200, r.text
    return read_sse(r)


def _receipt(sugo, chat_id: int) -> list[str]:
    """The memory receipt kept with the newest reply's version."""
    with Session(sugo.engine) as s:
        reply = s.exec(
            select(Message).where(Message.chat_id == chat_id).order_by(col(Message.id).desc())
        ).first()
        return list(reply.swipes[reply.active_swipe].get("receipt") or [])


def _reply_prompt(models) -> str:
    return json.dumps(models.requests[-1].json["messages"], ensure_ascii=False)


def test_the_decision_model_picks_the_scenes_and_centres_the_excerpt(api, background_held, models):
    sugo = background_held
    chat_id, _ = _chat(api, sugo, models)
    models.requests.clear()
    # Asked about the lighthouse, it picks the ferry (scene 3): the pick is the model's, not the ranking's;
    # then it scores the ferry's messages and #18 ("moment 1") centres the excerpt.
    models.script(
        json.dumps({"relevant": [3]}),
        json.dumps({"scores": {"18": 9, "21": 1}}),
        "Mirela remembers the ferry.",
    )
    _send(api, chat_id, "Where did we hide the brass key in the lighthouse?")
    prompts = [req.json["messages"][0]["content"] for req in models.requests]
    assert prompts[0] == PICK_PROMPT and prompts[1] == SCORE_PROMPT and len(prompts) == 3
    pick = models.requests[0].json["messages"][1]["content"]
    # Each recap the model reads is headed by its range, story date and speakers.
    assert "[Scene 1] messages #1–#8 · speakers: Mirela" in pick and "[Scene 4]" in pick
    sent = _reply_prompt(models)
    assert "Rowan and Mirela at the ferry" in sent
    assert "at the lighthouse" not in sent and "at the orchard" not in sent
    # One message per excerpt here (Moving context 1–1): the one the model scored best.
    # (Normal recall would centre a scene it did not rank on its middle message, #21.)
    assert "#18 You: More about the ferry, moment 1." in sent
    assert "More about the ferry, moment 4." not in sent
    receipt = _receipt(sugo, chat_id)
    assert any("Decision model picked scene(s) 3 of 4" in line for line in receipt), receipt
    with Session(sugo.engine) as s:
        kept = activity(s, chat_id)
    assert [a.data["step"] for a in kept] == ["centre", "pick"] and all(a.ok for a in kept)
    assert kept[1].data["chosen"] == [3] and kept[0].data["scores"]["18"] == 9


def test_a_decision_model_that_times_out_falls_back_to_normal_recall_and_says_so(
    api, background_held, models
):
    sugo = background_held
    chat_id, _ = _chat(api, sugo, models)
    gate = threading.Event()
    models.requests.clear()
    models.script(Reply(text=json.dumps({"relevant": [3]}), gate=gate), "Mirela remembers the lighthouse.")
    started = time.monotonic()
    try:
        _send(api, chat_id, "Where did we hide the brass key in the lighthouse?")
    finally:
        gate.set()
    took = time.monotonic() - started
    assert MIN_STEP_S - 0.5 <= took < 40  # the pick's own limit, within the reply's 40 s
    sent = _reply_prompt(models)
    assert "Rowan and Mirela at the lighthouse" in sent  # normal ranking's best scene
    receipt = _receipt(sugo, chat_id)
    assert any("timed out" in line and "normal recall" in line for line in receipt), receipt
    with Session(sugo.engine) as s:
        kept = activity(s, chat_id)
    assert len(kept) == 1 and not kept[0].ok and "normal ranking used" in kept[0].data["fallback"]


def test_the_decision_model_finds_scene_ends_and_the_helper_stands_in_when_it_fails(
    api, background_held, models
):
    sugo = background_held
    conn = add_connection(api, models)
    char = add_character(api, "Mirela", first_mes="")
    chat = new_chat(api, [char["id"]])
    for i in range(1, 11):
        assert (
            api.post(f"/api/chats/{chat['id']}/messages", json={"content": f"Step {i}."}).status_code == 201
        )
    settings = {
        **chat["settings"],
        "advanced_memory": True,
        "adv_check_interval": 5,
        "adv_decision": True,
        "adv_decision_connection_id": conn["id"],
    }
    assert api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings}).status_code == 200
    models.requests.clear()
    models.script(json.dumps({"ends": [{"messageNumber": 3}]}))
    assert check_scenes(sugo.services, chat["id"]).status == "checked"
    scenes = api.get(f"/api/chats/{chat['id']}/scenes").json()
    assert [(s["first_number"], s["last_number"]) for s in scenes] == [(1, 3)]
    # Unreadable twice from the decision model: the helper's own check stands in.
    for i in range(11, 16):
        api.post(f"/api/chats/{chat['id']}/messages", json={"content": f"Step {i}."})
    models.script("Scene ends? Who knows.", "Still not JSON.", json.dumps({"ends": [{"messageNumber": 12}]}))
    assert check_scenes(sugo.services, chat["id"]).status == "checked"
    scenes = api.get(f"/api/chats/{chat['id']}/scenes").json()
    assert [(s["first_number"], s["last_number"]) for s in scenes] == [(1, 3), (4, 12)]
    with Session(sugo.engine) as s:
        kept = activity(s, chat["id"])
    assert [(a.data["step"], a.ok) for a in kept] == [("scene_check", False), ("scene_check", True)]
    assert kept[1].data["ends"] == [3] and "helper's scene check used" in kept[0].data["fallback"]

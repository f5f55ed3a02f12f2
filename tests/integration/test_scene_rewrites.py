"""Issue 21, item 10: a closed scene whose messages change (a swipe of its last reply, an edit) gets its
recap written again in the background once the change settles, without Fix; a hand-edited recap never
is (it is listed for review); and a recap asked for while the scene's last reply is being swiped waits
for that reply instead of covering the scene without it. The test model server plays the helper and
the chat's model over real HTTP; real SQLite."""

from __future__ import annotations

import json
import threading

from sqlmodel import select

from app.chats.models import Message
from app.memory.scenes import rewrites, writer
from app.memory.scenes.core.check import SCENE_CHECK_PROMPT
from app.memory.scenes.core.recap import DEFAULT_RECAP_PROMPT
from app.memory.scenes.models import Scene, SceneState
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.scenes import stored_scene
from tests.support.waiting import wait_for


def _chat(api, models) -> int:
    """A Roleplay chat with Advanced Memory on (scene check every 5 messages), its greeting message 1."""
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    r = api.put(
        f"/api/chats/{chat_id}/options", json={"settings": {"advanced_memory": True, "adv_check_interval": 5}}
    )
    assert r.status_code == 200, r.text
    return chat_id


def _answer(summary: str) -> str:
    return json.dumps({"summary": summary, "participants": ["Aria"], "timeframe": ""})


def _ends(*numbers: int) -> str:
    return json.dumps({"ends": [{"messageNumber": n} for n in numbers]})


def _recap_requests(models) -> list[str]:
    """The user message of every recap request the helper received, oldest first."""
    return [
        r.json["messages"][1]["content"]
        for r in models.requests
        if r.path.endswith("/chat/completions")
        and r.json["messages"][0]["content"].startswith(DEFAULT_RECAP_PROMPT[:60])
    ]


def _scene(sugo, scene_id: int) -> Scene:
    with sugo.session() as s:
        return s.get(Scene, scene_id)


def _message_ids(sugo, chat_id: int) -> list[int]:
    with sugo.session() as s:
        return list(
            s.exec(
                select(Message.id)
                .where(Message.chat_id == chat_id, Message.kind == "message")
                .order_by(Message.id)
            ).all()
        )


def _all_checked(sugo, chat_id: int) -> None:
    """The scene check has read every message (stored scenes come without a check): none is due."""
    with sugo.session() as s:
        state = s.get(SceneState, chat_id) or SceneState(chat_id=chat_id)
        state.checked_through_id = _message_ids(sugo, chat_id)[-1]
        s.add(state)
        s.commit()


def _swipe(api, chat_id: int, message_id: int) -> list:
    events = read_sse(
        api.post(f"/api/chats/{chat_id}/generate", json={"action": "swipe", "message_id": message_id})
    )
    assert events[-1][0] == "done", events
    return events


def test_a_swipe_of_a_closed_scenes_last_reply_rewrites_its_recap_from_the_new_version(
    sugo, api, models, monkeypatch
):
    monkeypatch.setattr(rewrites, "SETTLE_S", 0.2)
    chat_id = _chat(api, models)
    models.script("Aria nods and leads the way.")
    read_sse(
        api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "We reach the ford."})
    )
    # Message 5, the reply, ends the scene: the check after it closes 1–5 and the recap is written.
    models.script(
        "Aria points at the far bank.", _ends(5), _answer("Aria led the traveller to the ford's far bank.")
    )
    read_sse(
        api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "We cross at dawn."})
    )

    def scene() -> Scene | None:
        with sugo.session() as s:
            return s.exec(select(Scene).where(Scene.chat_id == chat_id)).first()

    wait_for(lambda: (s := scene()) is not None and s.state == "written", timeout=60, what="the first recap")
    first = scene()
    reply_id = _message_ids(sugo, chat_id)[-1]
    assert first.last_message_id == reply_id and "far bank" in _recap_requests(models)[0]

    models.script(
        "Aria refuses to cross and turns back toward the village.",
        _answer("Aria refused to cross and turned back toward the village."),
    )
    _swipe(api, chat_id, reply_id)
    rewritten = wait_for(
        lambda: (s := scene()) is not None and s.summary.startswith("Aria refused") and s,
        timeout=60,
        what="the recap rewritten from the new version",
    )
    asked = _recap_requests(models)
    assert len(asked) == 2
    assert "Scene messages #1–#5" in asked[1]  # the whole scene, the new version of its last reply in it
    assert "turns back toward the village" in asked[1] and "far bank" not in asked[1]
    assert rewritten.id == first.id and rewritten.state == "written" and not rewritten.manual
    # Nobody pressed Fix, and nothing is left for it.
    problems = api.get(f"/api/chats/{chat_id}/scenes/problems").json()
    assert problems["run"] is None and problems["problems"] == []
    checks = [
        r
        for r in models.requests
        if r.path.endswith("/chat/completions") and r.json["messages"][0]["content"] == SCENE_CHECK_PROMPT
    ]
    assert len(checks) == 1  # the swipe did not check the scene again


def test_a_hand_edited_recap_is_never_rewritten_and_is_listed_for_review(sugo, api, models, monkeypatch):
    monkeypatch.setattr(rewrites, "SETTLE_S", 0.2)
    chat_id = _chat(api, models)
    mill = stored_scene(
        sugo,
        chat_id,
        [
            ("You", "We reach the old mill."),
            ("Aria", "*Aria pushes the door.* Empty."),
            ("You", "We rest here."),
        ],
    )
    dawn = stored_scene(
        sugo, chat_id, [("You", "Morning comes."), ("Aria", "*Aria packs the bags.* We leave now.")]
    )
    _all_checked(sugo, chat_id)
    models.script(_answer("They rested at the old mill."), _answer("At dawn Aria packed and they left."))
    assert writer.write_recap(sugo.services, mill) == writer.write_recap(sugo.services, dawn) == "written"
    r = api.patch(f"/api/chats/{chat_id}/scenes/{mill}", json={"summary": "My own words about the mill."})
    assert r.status_code == 200 and r.json()["manual"], r.text
    # The hand-edited scene's message is edited, and the other scene's last reply gets a new version.
    ids = _message_ids(sugo, chat_id)
    r = api.patch(
        f"/api/chats/{chat_id}/messages/{ids[2]}",
        json={"content": "*Aria pushes the door.* Someone lives here."},
    )
    assert r.status_code == 200, r.text
    models.script(
        "*Aria hides the bags.* We stay another day.", _answer("Aria hid the bags; they stayed another day.")
    )
    _swipe(api, chat_id, ids[-1])
    wait_for(
        lambda: _scene(sugo, dawn).summary.startswith("Aria hid"),
        timeout=60,
        what="the changed recap rewritten",
    )
    kept = _scene(sugo, mill)
    assert kept.summary == "My own words about the mill." and kept.manual and kept.state == "written"
    assert not [asked for asked in _recap_requests(models) if "Someone lives here" in asked]
    assert rewrites.rewrite_changed(sugo.services, chat_id) == 0  # asked again: still nothing to rewrite
    problems = api.get(f"/api/chats/{chat_id}/scenes/problems").json()["problems"]
    assert [(p["number"], p["kind"], p["review"]) for p in problems] == [(1, "changed_manual", True)]


def test_a_recap_waits_for_the_reply_being_swiped_and_covers_the_whole_scene(sugo, api, models):
    """The root of "a recap twice covered one message less": the recap was read while the scene's last
    reply was being swiped, and the helper never saw that message."""
    chat_id = _chat(api, models)
    scene_id = stored_scene(
        sugo,
        chat_id,
        [
            ("You", "We reach the ford."),
            ("Aria", "Aria points at the far bank."),
            ("You", "We cross at dawn."),
            ("Aria", "*Aria wades in.* Cold!"),
        ],
    )
    _all_checked(sugo, chat_id)
    reply_id = _message_ids(sugo, chat_id)[-1]
    gate = threading.Event()
    models.script(
        Reply("*Aria stops at the bank.* Not today.", gate=gate),
        _answer("Aria stopped at the bank and would not cross."),
    )
    asked_before = len(models.requests)
    swiping = threading.Thread(target=_swipe, args=(api, chat_id, reply_id))
    swiping.start()
    try:
        # The new version is being written: the message is "streaming" and its request is with the model.
        wait_for(lambda: len(models.requests) > asked_before, timeout=30, what="the swipe's request")
        with sugo.session() as s:
            assert s.get(Message, reply_id).status == "streaming"
        assert writer.write_recap(sugo.services, scene_id) == writer.STREAMING
        assert _recap_requests(models) == [] and _scene(sugo, scene_id).state == "waiting"
    finally:
        gate.set()
        swiping.join(60)
    # The reply ended: its after-reply work writes the recap, of the whole scene with the new version.
    wait_for(lambda: _scene(sugo, scene_id).state == "written", timeout=60, what="the recap after the reply")
    [asked] = _recap_requests(models)
    assert "Scene messages #2–#5" in asked and "Not today." in asked and "Cold!" not in asked
    assert _scene(sugo, scene_id).summary == "Aria stopped at the bank and would not cross."


def test_paging_through_versions_costs_one_rewrite_for_the_version_the_user_stopped_at(
    sugo, api, models, monkeypatch
):
    monkeypatch.setattr(rewrites, "SETTLE_S", 3600)  # nothing settles on its own here: the test runs the job
    chat_id = _chat(api, models)
    scene_id = stored_scene(
        sugo, chat_id, [("You", "We reach the ford."), ("Aria", "*Aria wades in.* Cold!")]
    )
    _all_checked(sugo, chat_id)
    models.script(_answer("Aria waded into the cold ford."))
    assert writer.write_recap(sugo.services, scene_id) == "written"
    reply_id = _message_ids(sugo, chat_id)[-1]
    for text in ("*Aria stops at the bank.* Not today.", "*Aria swims across.* Come on!"):
        models.script(text)
        _swipe(api, chat_id, reply_id)
    # Back to the second version (the first new one): picking a version is a change too.
    r = api.post(f"/api/chats/{chat_id}/messages/{reply_id}/swipe", json={"index": 1})
    assert r.status_code == 200 and r.json()["content"] == "*Aria stops at the bank.* Not today.", r.text
    assert sugo.services.queue.pending(
        "scenes.rewrite", chat_id=chat_id
    )  # one job, pushed back by each change
    assert len(_recap_requests(models)) == 1
    models.script(_answer("Aria stopped at the bank and would not cross."))
    assert rewrites.rewrite_changed(sugo.services, chat_id) == 1
    asked = _recap_requests(models)
    assert (
        len(asked) == 2
        and "Not today." in asked[1]
        and "Come on!" not in asked[1]
        and "Cold!" not in asked[1]
    )
    assert _scene(sugo, scene_id).summary == "Aria stopped at the bank and would not cross."

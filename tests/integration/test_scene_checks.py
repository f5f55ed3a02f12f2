"""The scene check (issue 14) against the test model server playing the helper: when it is due, what
the helper reads, the scenes its answer closes, and what a failed or doubled check leaves."""

from __future__ import annotations

import json
import threading

from sqlmodel import Session, select

from app.memory.scenes.checks import check_scenes
from app.memory.scenes.core.check import SCENE_CHECK_PROMPT
from app.memory.scenes.models import Scene, SceneState
from tests.conftest import add_character, add_connection, new_chat
from tests.support.model_server import Reply


def _chat(api, models, *, messages: int, interval: int = 5, on: bool = True) -> tuple[int, list[int]]:
    """A Roleplay chat with Advanced Memory on: the greeting and `messages - 1` posted ones; their ids."""
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    r = api.put(
        f"/api/chats/{chat_id}/options",
        json={"settings": {"advanced_memory": on, "adv_check_interval": interval}},
    )
    assert r.status_code == 200, r.text
    _post(api, chat_id, messages - 1)
    return chat_id, _ids(api, chat_id)


def _post(api, chat_id: int, count: int) -> None:
    for i in range(count):
        assert (
            api.post(f"/api/chats/{chat_id}/messages", json={"content": f"We walk on, step {i}."}).status_code
            == 201
        )


def _ids(api, chat_id: int) -> list[int]:
    return [m["id"] for m in api.get(f"/api/chats/{chat_id}/messages").json() if m["kind"] == "message"]


def _checks(models) -> list[dict]:
    """The scene-check requests the helper received, oldest first."""
    return [
        r.json
        for r in models.requests
        if r.path.endswith("/chat/completions") and r.json["messages"][0]["content"] == SCENE_CHECK_PROMPT
    ]


def _scenes(sugo, chat_id: int) -> list[tuple[int, int, str]]:
    with Session(sugo.engine) as s:
        rows = s.exec(select(Scene).where(Scene.chat_id == chat_id).order_by(Scene.first_message_id)).all()
        return [(r.first_message_id, r.last_message_id, r.state) for r in rows]


def _state(sugo, chat_id: int) -> SceneState | None:
    with Session(sugo.engine) as s:
        return s.get(SceneState, chat_id)


def _ends(*numbers: int) -> str:
    return json.dumps({"ends": [{"messageNumber": n} for n in numbers]})


def test_a_due_check_closes_the_scene_its_answer_names(api, models, sugo):
    chat_id, ids = _chat(api, models, messages=12)
    models.script(_ends(6))
    outcome = check_scenes(sugo.services, chat_id)
    assert outcome.status == "checked" and len(outcome.closed) == 1
    # Scene 1 runs from the greeting to message 6 and waits for its recap.
    assert _scenes(sugo, chat_id) == [(ids[0], ids[5], "waiting")]
    [request] = _checks(models)
    transcript = request["messages"][1]["content"]
    # The newest twice-the-interval messages (3–12), and message 2 as the already-checked anchor.
    assert all(f'number="{n}"' in transcript for n in range(2, 13)) and 'number="1"' not in transcript
    assert _state(sugo, chat_id).checked_through_id == ids[-1]


def test_no_check_before_the_interval_and_none_while_off(api, models, sugo):
    chat_id, _ = _chat(api, models, messages=4)
    assert check_scenes(sugo.services, chat_id).status == "not_due"
    off_id, _ = _chat(api, models, messages=12, on=False)
    assert check_scenes(sugo.services, off_id).status == "off"
    assert _checks(models) == []


def test_later_checks_read_only_new_messages_and_never_remake_a_scene(api, models, sugo):
    chat_id, ids = _chat(api, models, messages=6)
    models.script(_ends(3))
    check_scenes(sugo.services, chat_id)
    _post(api, chat_id, 5)
    ids = _ids(api, chat_id)
    # The helper names 3 again (the stored scene's end: not a new scene) and 9; message 6 is the anchor.
    models.script(_ends(3, 9))
    assert check_scenes(sugo.services, chat_id).status == "checked"
    assert _scenes(sugo, chat_id) == [(ids[0], ids[2], "waiting"), (ids[3], ids[8], "waiting")]
    second = _checks(models)[1]["messages"][1]["content"]
    assert 'number="7"' in second and 'number="11"' in second and 'number="5"' not in second
    assert check_scenes(sugo.services, chat_id).status == "not_due"


def test_a_failed_check_keeps_its_mark_and_waits_before_asking_again(api, models, sugo):
    chat_id, ids = _chat(api, models, messages=8)
    models.script("I think the scene might end somewhere around the fight?", "Maybe at the fight.")
    outcome = check_scenes(sugo.services, chat_id)
    assert outcome.status == "failed"
    state = _state(sugo, chat_id)
    assert state.checked_through_id is None and state.failures == 1
    assert state.reason.startswith("The scene check of messages 1–8 failed:")
    # Unreadable even when asked again: the batch may be treated as having no scene end.
    assert state.next_check_at is not None and state.unreadable_through_id == ids[-1]
    assert check_scenes(sugo.services, chat_id).status == "waiting"
    assert len(_checks(models)) == 2 and _scenes(sugo, chat_id) == []
    # Once the wait is over the same messages are checked again.
    with Session(sugo.engine) as s:
        row = s.get(SceneState, chat_id)
        row.next_check_at = None
        s.add(row)
        s.commit()
    models.script(Reply(status=500, error="overloaded"))
    assert check_scenes(sugo.services, chat_id).status == "failed"
    state = _state(sugo, chat_id)
    assert state.failures == 2 and len(_checks(models)) == 3  # a provider error is not asked again at once
    assert state.unreadable_through_id is None  # the helper did not answer: nothing to treat as read


def test_an_answer_in_another_shape_closes_its_scene(api, models, sugo):
    """Issue 21: a helper answering {"scenes": [...]} instead of {"ends": [...]}."""
    chat_id, ids = _chat(api, models, messages=8)
    models.script(json.dumps({"scenes": [{"start": 1, "end": 4}, {"start": 5, "end": 8}]}))
    assert check_scenes(sugo.services, chat_id).status == "checked"
    assert _scenes(sugo, chat_id) == [(ids[0], ids[3], "waiting")]  # 5–8 is the scene going on
    assert len(_checks(models)) == 1


def test_an_unreadable_answer_asked_again_then_the_batch_treated_as_having_no_end(api, models, sugo):
    chat_id, ids = _chat(api, models, messages=8)
    models.script("Scene one is the bridge.", '{"scenes": [{"title": "The bridge"}]}')
    assert check_scenes(sugo.services, chat_id).status == "failed"
    assert len(_checks(models)) == 2  # asked once more before giving up
    problems = api.get(f"/api/chats/{chat_id}/scenes/problems").json()["problems"]
    assert [(p["kind"], p["can_skip_batch"]) for p in problems] == [("check_failed", True)]
    assert "messages 1–8" in problems[0]["sentence"]
    r = api.post(f"/api/chats/{chat_id}/scenes/check/skip")
    assert r.status_code == 200, r.text
    assert r.json()["problems"] == []
    state = _state(sugo, chat_id)
    assert (state.checked_through_id, state.failures, state.reason, state.unreadable_through_id) == (
        ids[-1],
        0,
        "",
        None,
    )
    assert _scenes(sugo, chat_id) == []  # no scene end: messages 1–8 stay the open scene
    again = api.post(f"/api/chats/{chat_id}/scenes/check/skip")
    assert again.status_code == 400 and "nothing to skip" in again.json()["detail"]
    # The next check reads on from there.
    _post(api, chat_id, 5)
    models.script(_ends())
    assert check_scenes(sugo.services, chat_id).status == "checked"
    assert _checks(models)[-1]["messages"][1]["content"].startswith("Messages to check: #9 to #13.")


def test_an_answer_cut_off_is_asked_again_with_more_room(api, models, sugo):
    chat_id, ids = _chat(api, models, messages=6)
    models.script(Reply(text='{"ends": [{"messageNumber": 4', finish_reason="length"), _ends(4))
    assert check_scenes(sugo.services, chat_id).status == "checked"
    first, second = _checks(models)
    assert second["max_tokens"] > first["max_tokens"]
    assert _scenes(sugo, chat_id) == [(ids[0], ids[3], "waiting")]


def test_two_checks_at_once_make_one_scene(api, models, sugo):
    chat_id, ids = _chat(api, models, messages=6)
    models.script(Reply(text=_ends(5), first_delay_s=0.5))
    outcomes = []
    threads = [
        threading.Thread(target=lambda: outcomes.append(check_scenes(sugo.services, chat_id)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.status for o in outcomes) == ["busy", "checked"]
    assert len(_checks(models)) == 1
    assert _scenes(sugo, chat_id) == [(ids[0], ids[4], "waiting")]


def test_after_a_reply_the_check_runs_and_the_closed_scene_gets_its_recap(api, models, sugo):
    """The whole background path of a user's chat: replies, the due check, the recap, no one waiting."""
    from tests.conftest import read_sse

    chat_id, _ = _chat(api, models, messages=1)
    read_sse(
        api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "We reach the ford."})
    )
    assert _checks(models) == []  # three messages: not due yet
    recap = {
        "summary": "Aria and the traveller reached the ford at dusk and made camp.",
        "participants": ["Aria"],
        "timeframe": "the first evening",
    }
    models.script("Aria points at the far bank.", _ends(3), json.dumps(recap))
    read_sse(
        api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "We cross at dawn."})
    )
    ids = _ids(api, chat_id)

    def written():
        with Session(sugo.engine) as s:
            return s.exec(select(Scene).where(Scene.chat_id == chat_id, Scene.state == "written")).first()

    for _ in range(600):
        if scene := written():
            break
        threading.Event().wait(0.05)
    else:
        raise AssertionError(f"no recap written: {_scenes(sugo, chat_id)}")
    assert (scene.first_message_id, scene.last_message_id) == (ids[0], ids[2])
    assert scene.summary == recap["summary"] and scene.participants == ["Aria"] and not scene.check_who
    assert len(_checks(models)) == 1


def test_swipes_of_the_reply_that_closed_a_scene_never_make_it_twice(api, models, sugo, monkeypatch):
    """The reference app's duplicate scene summaries: a swipe runs the after-reply work again; the scene
    the first version's check closed is neither checked nor made again. Its recap follows the version
    shown once the swipes settle (issue 21): one rewrite for two swipes in a row."""
    from app.memory.scenes import rewrites
    from tests.conftest import read_sse
    from tests.support.waiting import wait_for

    monkeypatch.setattr(rewrites, "SETTLE_S", 3600)  # the test runs the settled rewrite itself, below
    chat_id, _ = _chat(api, models, messages=1)
    read_sse(
        api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "We reach the ford."})
    )
    recap = {"summary": "Aria and the traveller reached the ford.", "participants": ["Aria"], "timeframe": ""}
    models.script("Aria points at the far bank.", _ends(3), json.dumps(recap))
    read_sse(
        api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "We cross at dawn."})
    )
    wait_for(
        lambda: [s for s in _scenes(sugo, chat_id) if s[2] == "written"],
        timeout=30,
        interval=0.05,
        what="the recap",
    )
    reply_id = _ids(api, chat_id)[-1]
    for text in ("Aria shakes her head.", "Aria laughs."):
        models.script(text)
        events = read_sse(
            api.post(f"/api/chats/{chat_id}/generate", json={"action": "swipe", "message_id": reply_id})
        )
        assert events[-1][0] == "done"
    wait_for(lambda: api.get(f"/api/chats/{chat_id}/scenes").status_code == 200, timeout=5, what="the API")
    threading.Event().wait(1.0)  # room for any after-reply work the swipes started
    assert len(_scenes(sugo, chat_id)) == 1 and len(_checks(models)) == 1

    def recaps():
        return [
            r
            for r in models.requests
            if r.path.endswith("/chat/completions") and "recap" in r.json["messages"][0]["content"].lower()
        ]

    assert len(recaps()) == 1
    # The scene closed at message 3, before the swiped reply: its recap did not change.
    assert rewrites.rewrite_changed(sugo.services, chat_id) == 0
    assert sugo.services.queue.pending("scenes.rewrite", chat_id=chat_id)  # one job, replaced by each swipe

"""Prepare existing history (issue 14) against the test model server playing the helper, over real HTTP
and real SQLite: the history read window after window, each closed scene recapped exactly once, Cancel
keeping finished work, Resume (also after a restart cut the run short) asking nothing twice, a failed
helper call stopping the run with its reason, and one run per chat."""

from __future__ import annotations

import json
import re
import threading

from sqlmodel import Session, select

from app.chats.models import Message
from app.memory.scenes.checks import check_scenes
from app.memory.scenes.core.check import SCENE_CHECK_PROMPT
from app.memory.scenes.core.recap import DEFAULT_RECAP_PROMPT
from app.memory.scenes.models import Scene, SceneRun, SceneState
from app.memory.scenes.service import PREPARING
from app.platform.db import make_engine
from app.platform.jobs import settle_runs
from tests.conftest import add_character, add_connection, new_chat
from tests.support.live import LiveSugo
from tests.support.model_server import Reply
from tests.support.process import SugoProcess
from tests.support.waiting import wait_for

MESSAGES = 60
# Interval 5: windows of 10 messages. The helper's ends per window (window 5 names its anchor, 40, again:
# not a new scene); 48–60 stay the open scene.
ENDS = ([8], [], [25], [33, 40], [40, 47], [])
SCENES = [(1, 8), (9, 25), (26, 33), (34, 40), (41, 47)]
WINDOWS = [(1, 10), (11, 20), (21, 30), (31, 40), (41, 50), (51, 60)]


def _seeded_chat(sugo, api, models) -> tuple[int, list[int]]:
    """A Roleplay chat with Advanced Memory on and 60 messages (the greeting and 59 seeded); their ids."""
    add_connection(api, models, name="Helper conn", model="test-model")
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    r = api.put(
        f"/api/chats/{chat_id}/options", json={"settings": {"advanced_memory": True, "adv_check_interval": 5}}
    )
    assert r.status_code == 200, r.text
    with Session(sugo.engine) as s:
        for n in range(2, MESSAGES + 1):
            name, role = ("You", "user") if n % 2 == 0 else ("Aria", "assistant")
            text = f"Line {n}: we walk on."
            s.add(
                Message(
                    chat_id=chat_id,
                    role=role,
                    name=name,
                    content=text,
                    swipes=[{"content": text, "status": "ok"}],
                )
            )
        s.commit()
    ids = [m["id"] for m in api.get(f"/api/chats/{chat_id}/messages").json() if m["kind"] == "message"]
    assert len(ids) == MESSAGES
    return chat_id, ids


def _ends(numbers) -> str:
    return json.dumps({"ends": [{"messageNumber": n} for n in numbers]})


def _recap(n: int) -> str:
    return json.dumps(
        {"summary": f"Recap number {n}: Aria and the traveller walked on.", "participants": ["Aria"]}
    )


def _checks(models) -> list[tuple[int, int]]:
    """The windows the helper was asked to check, in order: (first, last) message numbers."""
    found = []
    for r in models.requests:
        if r.path.endswith("/chat/completions") and r.json["messages"][0]["content"] == SCENE_CHECK_PROMPT:
            m = re.match(r"Messages to check: #(\d+)(?: to #(\d+))?\.", r.json["messages"][1]["content"])
            found.append((int(m.group(1)), int(m.group(2) or m.group(1))))
    return found


def _recaps(models) -> list[tuple[int, int]]:
    """The scenes whose recap the helper was asked for, in order: (first, last) message numbers."""
    found = []
    for r in models.requests:
        if r.path.endswith("/chat/completions") and r.json["messages"][0]["content"].startswith(
            DEFAULT_RECAP_PROMPT[:60]
        ):
            m = re.match(r"Scene messages #(\d+)–#(\d+)", r.json["messages"][1]["content"])
            found.append((int(m.group(1)), int(m.group(2))))
    return found


def _scenes(sugo, chat_id: int, ids: list[int]) -> list[tuple[int, int, str, str]]:
    """(first, last message number, state, summary) of each stored scene."""
    number = {mid: n for n, mid in enumerate(ids, 1)}
    with Session(sugo.engine) as s:
        rows = s.exec(select(Scene).where(Scene.chat_id == chat_id).order_by(Scene.first_message_id)).all()
        return [(number[r.first_message_id], number[r.last_message_id], r.state, r.summary) for r in rows]


def _status(api, chat_id: int) -> dict:
    r = api.get(f"/api/chats/{chat_id}/scenes/prepare")
    assert r.status_code == 200, r.text
    return r.json()


def _until(api, chat_id: int, status: str) -> dict:
    """Wait until the run has ended as `status` (failing at once when it ended otherwise)."""

    def ended():
        s = _status(api, chat_id)
        if s["working"] or s["status"] == "running":
            return None
        assert s["status"] == status, s
        return s

    return wait_for(ended, timeout=60, what=f"the run {status}")


def _start(api, chat_id: int) -> dict:
    r = api.post(f"/api/chats/{chat_id}/scenes/prepare")
    assert r.status_code == 202, r.text
    return r.json()


def test_the_history_is_read_window_after_window_and_each_scene_recapped_once(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    before = _status(api, chat_id)
    # The resolved helper is shown before anything starts.
    assert before["status"] == "none" and before["helper"]["connection_name"] == "Helper conn"
    assert before["helper"]["model"] == "test-model" and before["helper_problem"] == ""
    models.script(*[_ends(e) for e in ENDS], *[_recap(n) for n in range(1, 6)])
    started = _start(api, chat_id)
    assert started["status"] == "running" and started["stage"] == "detecting"
    done = _until(api, chat_id, "done")
    assert done["stage"] == "recapping" and done["done"] == done["total"] == 5 and done["reason"] == ""
    assert _checks(models) == WINDOWS
    # Each window after the first was read with the previous window's last message as its anchor.
    asked = [
        r.json["messages"][1]["content"]
        for r in models.requests
        if r.json["messages"][0]["content"] == SCENE_CHECK_PROMPT
    ]
    assert 'number="10" name="You" checked="earlier"' in asked[1] and 'number="50"' in asked[5]
    scenes = _scenes(sugo, chat_id, ids)
    assert [(a, b) for a, b, _, _ in scenes] == SCENES  # 48–60 stay the open scene
    assert all(state == "written" for _, _, state, _ in scenes)
    assert sorted(_recaps(models)) == SCENES  # each scene asked once
    assert scenes[2][3].startswith("Recap number 3")
    with Session(sugo.engine) as s:
        assert s.get(SceneState, chat_id).checked_through_id == ids[-1]
    # The ongoing check goes on after Prepare's end: nothing is due.
    assert check_scenes(sugo.services, chat_id).status == "not_due"


def test_cancel_keeps_finished_windows_and_resume_asks_nothing_twice(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    # The third window's answer is slow: Cancel arrives while it is in hand.
    models.script(_ends(ENDS[0]), _ends(ENDS[1]), Reply(_ends(ENDS[2]), first_delay_s=3))
    _start(api, chat_id)
    wait_for(lambda: len(_checks(models)) == 3, timeout=30, what="the third window asked")
    r = api.post(f"/api/chats/{chat_id}/scenes/prepare/stop")
    assert r.status_code == 200 and r.json()["stop_requested"], r.text
    stopped = _until(api, chat_id, "stopped")
    # The answer in hand was kept: the scenes it closed are stored; no recap was asked.
    assert stopped["done"] == 3 and stopped["current"] == ""
    assert [(a, b) for a, b, _, _ in _scenes(sugo, chat_id, ids)] == SCENES[:2]
    assert _recaps(models) == []
    # Until Resume finishes it, the chat's scenes are Prepare's: no check after a reply.
    assert check_scenes(sugo.services, chat_id).status == "preparing"
    models.script(*[_ends(e) for e in ENDS[3:]], *[_recap(n) for n in range(1, 6)])
    _start(api, chat_id)
    _until(api, chat_id, "done")
    assert _checks(models) == WINDOWS  # windows 1–3 were not asked again
    assert sorted(_recaps(models)) == SCENES
    assert all(state == "written" for _, _, state, _ in _scenes(sugo, chat_id, ids))


def test_a_run_a_restart_cut_short_mid_recap_is_resumed_at_start_without_a_second_recap(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    models.script(*[_ends(e) for e in ENDS], _recap(1), Reply(_recap(2), first_delay_s=3))
    _start(api, chat_id)
    wait_for(lambda: len(_recaps(models)) == 2, timeout=30, what="the second recap asked")
    api.post(f"/api/chats/{chat_id}/scenes/prepare/stop")
    _until(api, chat_id, "stopped")
    assert [s[2] for s in _scenes(sugo, chat_id, ids)] == [
        "written",
        "written",
        "waiting",
        "waiting",
        "waiting",
    ]
    # A restart in the middle of scene 3's recap: the run left "running", the scene "writing", nobody at work.
    with Session(sugo.engine) as s:
        run = s.exec(select(SceneRun).where(SceneRun.chat_id == chat_id)).one()
        run.status, run.stop_requested, run.current = "running", False, "Writing recap 3 of 5"
        scene = s.exec(select(Scene).where(Scene.chat_id == chat_id).order_by(Scene.first_message_id)).all()[
            2
        ]
        scene.state = "writing"
        s.add(run)
        s.add(scene)
        s.commit()
    cut = _status(api, chat_id)
    assert cut["status"] == "running" and not cut["working"]
    assert check_scenes(sugo.services, chat_id).status == "preparing"  # the chat is Prepare's until it ends
    models.script(*[_recap(n) for n in range(3, 6)])
    settle_runs(sugo.services)  # what the next start does first
    done = _until(api, chat_id, "done")
    assert done["done"] == done["total"] == 5
    assert sorted(_recaps(models)) == SCENES  # each scene recapped exactly once, the cut-short one too
    assert _checks(models) == WINDOWS
    scenes = _scenes(sugo, chat_id, ids)
    assert all(state == "written" for _, _, state, _ in scenes)
    assert scenes[0][3].startswith("Recap number 1") and scenes[2][3].startswith("Recap number 3")


def test_a_failed_helper_call_stops_the_run_with_its_reason_and_resume_retries_it(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    models.script(
        _ends(ENDS[0]), _ends(ENDS[1]), "I think a scene ends somewhere around the bridge?", "At the bridge."
    )
    _start(api, chat_id)
    failed = _until(api, chat_id, "failed")
    assert failed["reason"].startswith("Finding scenes in messages 21–30:") and failed["done"] == 2
    assert failed["can_skip_batch"]  # unreadable even when asked again: the batch may be skipped
    assert [(a, b) for a, b, _, _ in _scenes(sugo, chat_id, ids)] == SCENES[:1]
    # Resume asks the failed window again, then a recap fails: the earlier recap stays.
    models.script(
        *[_ends(e) for e in ENDS[2:]], _recap(1), Reply(status=400, error="The helper is overloaded.")
    )
    _start(api, chat_id)
    failed = _until(api, chat_id, "failed")
    assert failed["stage"] == "recapping" and failed["reason"].startswith("Writing recap 2 of 5:")
    assert "overloaded" in failed["reason"] and not failed["can_skip_batch"]
    scenes = _scenes(sugo, chat_id, ids)
    assert [s[2] for s in scenes] == ["written", "failed", "waiting", "waiting", "waiting"]
    assert scenes[0][3].startswith("Recap number 1") and scenes[1][3] == ""
    models.script(*[_recap(n) for n in range(2, 6)])
    _start(api, chat_id)
    _until(api, chat_id, "done")
    assert (
        _checks(models) == WINDOWS[:3] + WINDOWS[2:3] + WINDOWS[2:]
    )  # only the failed window was asked again
    assert _recaps(models) == [SCENES[0], SCENES[1], *SCENES[1:]]  # only the failed recap was asked twice
    scenes = _scenes(sugo, chat_id, ids)
    assert all(s[2] == "written" for s in scenes) and scenes[0][3].startswith("Recap number 1")


def test_an_answer_unreadable_twice_is_offered_as_no_scene_end_and_the_run_goes_on(sugo, api, models):
    """Issue 21: a helper whose answers Sugo cannot read stopped Prepare for good at that batch."""
    chat_id, ids = _seeded_chat(sugo, api, models)
    # Window 1 in another shape (read); window 2 unreadable twice.
    models.script(
        json.dumps({"scenes": [{"messageNumber": 8}]}),
        '{"scenes": [{"title": "The bridge"}]}',
        "The scene ends at the bridge.",
    )
    _start(api, chat_id)
    failed = _until(api, chat_id, "failed")
    assert failed["reason"].startswith("Finding scenes in messages 11–20:") and failed["can_skip_batch"]
    assert _checks(models) == [WINDOWS[0], WINDOWS[1], WINDOWS[1]]
    gate = threading.Event()
    models.script(Reply(_ends(ENDS[2]), gate=gate))
    try:
        skipped = api.post(f"/api/chats/{chat_id}/scenes/prepare/skip")
        assert skipped.status_code == 202, skipped.text
        assert skipped.json()["status"] == "running" and not skipped.json()["can_skip_batch"]
        wait_for(lambda: len(_checks(models)) == 4, timeout=30, what="the window after the skipped one")
        # Stored before the run went on: a restart now resumes past the skipped batch.
        with Session(sugo.engine) as s:
            run = s.exec(select(SceneRun).where(SceneRun.chat_id == chat_id)).one()
            assert (run.status, run.checked_through_id, run.done, run.unreadable_through_id) == (
                "running",
                ids[19],
                2,
                None,
            )
            assert s.get(SceneState, chat_id).checked_through_id == ids[19]
    finally:
        gate.set()
    models.script(*[_ends(e) for e in ENDS[3:]], *[_recap(n) for n in range(1, 6)])
    done = _until(api, chat_id, "done")
    assert done["reason"] == "" and _checks(models) == [WINDOWS[0], WINDOWS[1], *WINDOWS[1:]]
    # Window 2 counted as having no end: scene 9–25 runs through it.
    assert [(a, b) for a, b, _, _ in _scenes(sugo, chat_id, ids)] == SCENES
    again = api.post(f"/api/chats/{chat_id}/scenes/prepare/skip")
    assert again.status_code == 400 and "no batch it could not read" in again.json()["detail"]


def test_messages_that_arrive_while_the_recaps_are_written_are_read_before_the_run_ends(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    models.script(*[_ends(e) for e in ENDS], Reply(_recap(1), first_delay_s=2))
    _start(api, chat_id)
    wait_for(lambda: len(_recaps(models)) == 1, timeout=30, what="the first recap asked")
    with Session(sugo.engine) as s:  # the chat goes on meanwhile: six more messages
        for n in range(61, 67):
            s.add(
                Message(
                    chat_id=chat_id,
                    role="user",
                    name="You",
                    content=f"Line {n}.",
                    swipes=[{"content": f"Line {n}."}],
                )
            )
        s.commit()
    models.script(*[_recap(n) for n in range(2, 6)], _ends([]))
    done = _until(api, chat_id, "done")
    assert _checks(models) == [*WINDOWS, (61, 66)] and sorted(_recaps(models)) == SCENES
    assert done["status"] == "done" and done["reason"] == ""


def test_one_run_per_chat_and_refusals_say_why(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    models.script(Reply(_ends([]), first_delay_s=2))
    _start(api, chat_id)
    again = api.post(f"/api/chats/{chat_id}/scenes/prepare")
    assert again.status_code == 409 and "already running" in again.json()["detail"]
    api.post(f"/api/chats/{chat_id}/scenes/prepare/stop")
    _until(api, chat_id, "stopped")
    assert len(_checks(models)) == 1
    r = api.post(f"/api/chats/{chat_id}/scenes/prepare/stop")
    assert r.status_code == 400 and "not running" in r.json()["detail"]
    # A chat with Advanced Memory off is refused with a sentence.
    off = new_chat(api, [add_character(api, "Bran")["id"]])["id"]
    r = api.post(f"/api/chats/{off}/scenes/prepare")
    assert r.status_code == 400 and "Advanced Memory" in r.json()["detail"]
    assert api.get("/api/chats/999999/scenes/prepare").status_code == 404


def test_delete_all_memories_and_import_are_refused_while_prepare_runs(sugo, api, models):
    """Issue 21, item 12: Delete all memories during Prepare was accepted and Prepare went on past scenes
    that were gone. Refused with a sentence (409 over JSON, the page's notice over HTML); once Prepare is
    cancelled it goes, Prepare's runs with it, so the next Prepare reads the history from message 1."""
    chat_id, ids = _seeded_chat(sugo, api, models)
    held = threading.Event()
    models.script(_ends(ENDS[0]), Reply(_ends(ENDS[1]), gate=held))
    _start(api, chat_id)
    wait_for(
        lambda: len(_checks(models)) == 2, timeout=60, what="the second window asked"
    )  # Prepare is mid-way
    refused = api.delete(f"/api/chats/{chat_id}/scenes")
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"] == PREPARING.format(what="delete all memories")
    page = api.post(f"/chats/{chat_id}/scenes/delete-all", headers={"HX-Request": "true"})
    assert page.status_code == 200 and 'id="scenes-error"' in page.text
    assert (
        "Prepare existing history is running in this chat" in page.text
        and "Nothing was changed." in page.text
    )
    imported = api.post(
        f"/api/chats/{chat_id}/scenes/import?replace=true",
        files={"file": ("s.json", b"{}", "application/json")},
    )
    assert imported.status_code == 409 and "then import" in imported.json()["detail"]
    assert [(a, b) for a, b, _, _ in _scenes(sugo, chat_id, ids)] == SCENES[:1]  # kept

    api.post(f"/api/chats/{chat_id}/scenes/prepare/stop")
    held.set()  # the call in hand answers; Cancel then ends the run
    _until(api, chat_id, "stopped")
    assert api.delete(f"/api/chats/{chat_id}/scenes").json() == {"deleted": 1}
    assert _status(api, chat_id)["status"] == "none"  # a cancelled Prepare would otherwise resume past them
    models.script(*[_ends(e) for e in ENDS], *[_recap(n) for n in range(1, 6)])
    _start(api, chat_id)
    _until(api, chat_id, "done")
    assert _checks(models) == [*WINDOWS[:2], *WINDOWS]  # read again from message 1
    assert [(a, b) for a, b, _, _ in _scenes(sugo, chat_id, ids)] == SCENES


def test_a_2000_message_import_cancelled_killed_and_resumed_ends_with_each_scene_recapped_once(
    tmp_path, models
):
    """Acceptance 2 with real restarts: Cancel half-way through the scene search, a SIGKILL, Resume; a
    second SIGKILL in the middle of a recap; the next start's sweep finishes. Interval 100: windows of
    200 messages; a scene ends every 150 messages, 1951–2000 stay open."""
    total, window = 2000, 200
    windows = [(k + 1, k + window) for k in range(0, total, window)]
    scenes = [(e - 149, e) for e in range(150, total, 150)]
    answers = [_ends([e for _, e in scenes if a <= e <= b]) for a, b in windows]
    data_dir = tmp_path / "data"
    server = SugoProcess(data_dir).start()
    try:
        with server.client() as api:
            add_connection(api, models)
            chat_id = new_chat(api, [add_character(api)["id"]])["id"]
            settings = {"advanced_memory": True, "adv_check_interval": 100}
            assert api.put(f"/api/chats/{chat_id}/options", json={"settings": settings}).status_code == 200
            with Session(make_engine(data_dir / "sugo.db")) as s:
                for n in range(2, total + 1):
                    name, role = ("You", "user") if n % 2 == 0 else ("Aria", "assistant")
                    s.add(
                        Message(
                            chat_id=chat_id,
                            role=role,
                            name=name,
                            content=f"Line {n}.",
                            swipes=[{"content": f"Line {n}.", "status": "ok"}],
                        )
                    )
                s.commit()
            models.script(*answers[:4], Reply(answers[4], first_delay_s=3))
            _start(api, chat_id)
            wait_for(lambda: len(_checks(models)) == 5, timeout=60, what="the fifth window asked")
            assert api.post(f"/api/chats/{chat_id}/scenes/prepare/stop").status_code == 200
            assert _until(api, chat_id, "stopped")["done"] == 5
        server.kill()
        server = SugoProcess(data_dir).start()
        with server.client() as api:
            assert _status(api, chat_id)["status"] == "stopped"
            models.script(*answers[5:], _recap(1), _recap(2), _recap(3), Reply(_recap(4), first_delay_s=60))
            _start(api, chat_id)
            wait_for(lambda: len(_recaps(models)) == 4, timeout=60, what="the fourth recap asked")
        server.kill()  # in the middle of scene 4's recap
    finally:
        server.kill()
    models.script(*[_recap(n) for n in range(4, len(scenes) + 1)])
    with LiveSugo(data_dir) as again, again.client() as api:  # its start resumes the run
        done = _until(api, chat_id, "done")
        with again.session() as s:
            ids = list(
                s.exec(
                    select(Message.id)
                    .where(Message.chat_id == chat_id, Message.kind == "message")
                    .order_by(Message.id)
                ).all()
            )
        stored = _scenes(again, chat_id, ids)
    assert done["stage"] == "recapping" and done["reason"] == ""
    assert _checks(models) == windows  # every window asked once: the cancelled one's answer was kept
    asked = _recaps(models)
    assert asked[3] == asked[4] == scenes[3]  # the recap the kill cut short, asked again
    assert sorted(asked[:4] + asked[5:]) == scenes  # every other scene asked once
    assert len(ids) == total and [(a, b) for a, b, _, _ in stored] == scenes
    assert all(state == "written" for _, _, state, _ in stored)
    assert [summary.split(":")[0] for _, _, _, summary in stored] == [
        f"Recap number {n}" for n in range(1, 14)
    ]

"""Advanced Memory → Problems, Fix, Pause / Resume processing (issue 14, acceptance 3) against the test
model server playing the helper, over real HTTP and real SQLite: a helper that answers garbage, times
out or cuts its answer off never overwrites a saved recap, and Fix later repairs those scenes; a recap
edited by hand is never rewritten and is listed for review; a changed message makes its scene a problem
that Fix re-recaps; Pause processing stops the checks, the recaps and Fix, Resume processing goes on."""

from __future__ import annotations

import json

from sqlmodel import select

from app.chats.models import Message
from app.memory.scenes import prepare, writer
from app.memory.scenes.checks import check_scenes, preparing
from app.memory.scenes.models import Scene, SceneRun, SceneState
from tests.conftest import add_character, add_connection, new_chat
from tests.support.live import LiveSugo
from tests.support.model_server import Reply
from tests.support.scenes import stored_scene
from tests.support.waiting import wait_for

GOOD = json.dumps({"summary": "Aria and the traveller crossed the bridge by rope.", "participants": ["Aria"]})
LINES = [
    ("You", "Aria, the bridge is out."),
    ("Aria", "*Aria ties the rope.* We cross here."),
    ("You", "Fine."),
]


def _chat(api, models) -> int:
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api, "Aria")["id"]])["id"]
    # A check interval no test reaches: a scene check after Resume would take a reply scripted for a recap.
    r = api.put(
        f"/api/chats/{chat_id}/options",
        json={"settings": {"advanced_memory": True, "adv_check_interval": 100}},
    )
    assert r.status_code == 200, r.text
    return chat_id


def _scene(sugo, scene_id: int) -> Scene:
    with sugo.session() as s:
        return s.get(Scene, scene_id)


def _written_scene(sugo, models, chat_id: int, summary: str = GOOD) -> int:
    """A scene whose recap the helper wrote (so its fingerprint is stored)."""
    scene_id = stored_scene(sugo, chat_id, LINES)
    models.script(summary)
    assert writer.write_recap(sugo.services, scene_id) == "written"
    return scene_id


def _change_message(sugo, scene_id: int, text: str) -> None:
    with sugo.session() as s:
        scene = s.get(Scene, scene_id)
        msg = s.get(Message, scene.last_message_id)
        msg.content = text
        s.add(msg)
        s.commit()


def _problems(api, chat_id: int) -> dict:
    r = api.get(f"/api/chats/{chat_id}/scenes/problems")
    assert r.status_code == 200, r.text
    return r.json()


def _fix(api, chat_id: int) -> dict:
    """Run Fix and wait for its end; the run."""
    r = api.post(f"/api/chats/{chat_id}/scenes/fix")
    assert r.status_code == 202, r.text
    return wait_for(
        lambda: (run := _problems(api, chat_id)["run"]) and run["status"] != "running" and run,
        what="Fix to end",
    )


def test_garbage_or_a_cut_off_answer_never_overwrites_a_recap_and_fix_repairs_it_later(sugo, api, models):
    chat_id = _chat(api, models)
    scene_id = _written_scene(sugo, models, chat_id)
    before = _scene(sugo, scene_id)
    assert _problems(api, chat_id)["count"] == 0

    _change_message(sugo, scene_id, "Fine. But my sister Mira comes with us.")
    found = _problems(api, chat_id)
    assert found["count"] == 1 and found["key"]
    assert found["problems"][0] | {"sentence": ""} == {
        "scene_id": scene_id,
        "number": 1,
        "kind": "changed",
        "sentence": "",
        "review": False,
        "can_skip_batch": False,
    }

    for name, replies in {
        "garbage": ["Sure! Here is a lovely recap, no JSON though."] * 4,
        "cut off": [Reply('{"summary": "Aria and the trav', finish_reason="length")] * 8,
    }.items():
        models.reset()
        models.script(*replies)
        run = _fix(api, chat_id)
        assert run["status"] == "failed" and run["reason"].startswith("Fixing scene 1:"), (name, run)
        kept = _scene(sugo, scene_id)
        assert (kept.state, kept.summary, kept.fingerprint) == (
            "written",
            before.summary,
            before.fingerprint,
        ), name
        assert _problems(api, chat_id)["problems"][0]["kind"] == "changed", name
        page = api.get(f"/chats/{chat_id}/scenes/problems").text
        assert "Fix stopped" in page and "Fix again" in page, name

    models.reset()
    models.script(
        json.dumps({"summary": "Aria, the traveller and Mira crossed the bridge.", "participants": ["Aria"]})
    )
    run = _fix(api, chat_id)
    assert run["status"] == "done" and run["current"] == "Advanced Memory fixed 1 scene.", run
    fixed = _scene(sugo, scene_id)
    assert (
        fixed.summary == "Aria, the traveller and Mira crossed the bridge."
        and fixed.fingerprint != before.fingerprint
    )
    assert _problems(api, chat_id)["count"] == 0
    assert "Advanced Memory fixed 1 scene." in api.get(f"/chats/{chat_id}/scenes/problems").text


def test_a_helper_that_times_out_keeps_the_recap_and_fix_repairs_it_later(tmp_path, models):
    """A real timeout: Sugo started with SUGO_MODEL_TIMEOUT_S=1, the helper answers after 4 s."""
    with LiveSugo(tmp_path / "data", model_timeout_s=1.0) as sugo, sugo.client() as api:
        chat_id = _chat(api, models)
        scene_id = _written_scene(sugo, models, chat_id)
        failed_id = stored_scene(
            sugo,
            chat_id,
            [("You", "Next day."), ("Aria", "We rest.")],
            state="failed",
            reason="The helper gave no answer.",
        )
        _change_message(sugo, scene_id, "Fine, let us go.")
        before = _scene(sugo, scene_id)
        assert [p["kind"] for p in _problems(api, chat_id)["problems"]] == ["changed", "failed"]

        models.reset()
        models.script(Reply(GOOD, first_delay_s=4))
        run = _fix(api, chat_id)
        assert run["status"] == "failed" and "did not answer within 1" in run["reason"], run
        kept = _scene(sugo, scene_id)
        assert (kept.state, kept.summary, kept.fingerprint) == ("written", before.summary, before.fingerprint)

        models.reset()
        models.script(GOOD, json.dumps({"summary": "They rested the next day.", "participants": ["Aria"]}))
        run = _fix(api, chat_id)
        assert run["status"] == "done" and run["current"] == "Advanced Memory fixed 2 scenes.", run
        assert _scene(sugo, failed_id).summary == "They rested the next day."
        assert _problems(api, chat_id)["count"] == 0


def test_a_hand_edited_recap_is_never_rewritten_and_is_listed_for_review(sugo, api, models):
    chat_id = _chat(api, models)
    edited_id = _written_scene(sugo, models, chat_id)
    r = api.patch(
        f"/api/chats/{chat_id}/scenes/{edited_id}", json={"summary": "My own words about the bridge."}
    )
    assert r.status_code == 200 and r.json()["manual"], r.text
    failed_id = stored_scene(
        sugo,
        chat_id,
        [("You", "Next day."), ("Aria", "We rest.")],
        state="failed",
        reason="The helper's answer was not JSON.",
    )
    deleted_id = stored_scene(sugo, chat_id, [("You", "Later."), ("Aria", "Night.")], state="deleted")
    _change_message(sugo, edited_id, "Fine. Mira comes too.")

    found = _problems(api, chat_id)
    kinds = {p["scene_id"]: (p["kind"], p["review"]) for p in found["problems"]}
    assert kinds == {edited_id: ("changed_manual", True), failed_id: ("failed", False)}
    assert deleted_id not in kinds  # a deleted summary stays deleted: no problem
    page = api.get(f"/chats/{chat_id}/scenes/problems").text
    assert (
        "needs your review" in page
        and "The helper&#39;s answer was not JSON." in page
        and "Fix 1 problem" in page
    )

    models.reset()
    models.script(json.dumps({"summary": "They rested.", "participants": ["Aria"]}))
    run = _fix(api, chat_id)
    assert run["current"] == "Advanced Memory fixed 1 scene; need your review: scene 1.", run
    assert (
        len([r for r in models.requests if r.path.endswith("/chat/completions")]) == 1
    )  # the edited one: never asked
    edited = _scene(sugo, edited_id)
    assert (edited.summary, edited.manual, edited.state) == (
        "My own words about the bridge.",
        True,
        "written",
    )
    assert _scene(sugo, failed_id).summary == "They rested."
    assert _scene(sugo, deleted_id).state == "deleted"
    assert [p["kind"] for p in _problems(api, chat_id)["problems"]] == ["changed_manual"]


def test_pause_stops_checks_recaps_and_fix_and_resume_goes_on(sugo, api, models):
    chat_id = _chat(api, models)
    scene_id = stored_scene(sugo, chat_id, LINES, state="failed", reason="The helper gave no answer.")
    r = api.post(f"/api/chats/{chat_id}/scenes/pause")
    assert r.status_code == 200 and r.json()["paused"], r.text
    with sugo.session() as s:
        assert s.get(SceneState, chat_id).paused

    models.reset()
    models.script(GOOD)
    assert check_scenes(sugo.services, chat_id).status == "paused"
    assert writer.write_waiting_recaps(sugo.services, chat_id) == 0
    assert writer.write_recap(sugo.services, scene_id) == "skipped: paused"
    refused = api.post(f"/api/chats/{chat_id}/scenes/fix")
    assert refused.status_code == 400 and "paused" in refused.json()["detail"]
    assert not [r for r in models.requests if r.path.endswith("/chat/completions")]
    page = api.get(f"/chats/{chat_id}/scenes/problems").text
    assert "Processing is paused" in page and "Resume processing" in page and "Pause processing" not in page

    r = api.post(f"/chats/{chat_id}/scenes/resume")
    assert r.status_code == 200 and "Pause processing" in r.text
    # Resume schedules the chat's processing: the failed recap is written by the background job.
    wait_for(lambda: _scene(sugo, scene_id).state == "written", what="the recap after Resume")
    assert _scene(sugo, scene_id).summary.startswith("Aria and the traveller")


def test_pause_while_fix_works_stops_it_and_resume_processing_finishes_it(sugo, api, models):
    chat_id = _chat(api, models)
    first = stored_scene(sugo, chat_id, LINES, state="failed", reason="x")
    second = stored_scene(
        sugo, chat_id, [("You", "Next day."), ("Aria", "We rest.")], state="failed", reason="x"
    )
    models.reset()
    models.script(Reply(GOOD, first_delay_s=1.0))
    assert api.post(f"/api/chats/{chat_id}/scenes/fix").status_code == 202
    wait_for(lambda: models.requests, what="the first helper call")
    assert api.post(f"/chats/{chat_id}/scenes/pause").status_code == 200
    run = wait_for(
        lambda: (run := _problems(api, chat_id)["run"])["status"] != "running" and run, what="Fix to stop"
    )
    assert run["status"] == "stopped" and "paused" in run["reason"], run
    assert (
        _scene(sugo, first).state == "written" and _scene(sugo, second).state == "failed"
    )  # the call in hand finished

    models.script(json.dumps({"summary": "They rested.", "participants": ["Aria"]}))
    assert api.post(f"/api/chats/{chat_id}/scenes/resume").status_code == 200
    wait_for(lambda: _scene(sugo, second).state == "written", what="the second recap after Resume")
    with sugo.session() as s:
        runs = s.exec(select(SceneRun).where(SceneRun.chat_id == chat_id, SceneRun.stage == "fixing")).all()
    assert [r.status for r in runs][0] == "stopped"


def test_a_failed_scene_check_is_a_problem_and_fix_runs_it_again(sugo, api, models):
    chat_id = _chat(api, models)
    with sugo.session() as s:
        s.add(
            SceneState(
                chat_id=chat_id, reason="The scene check failed: the helper gave no answer.", failures=2
            )
        )
        s.commit()
    found = _problems(api, chat_id)
    assert [(p["kind"], p["scene_id"]) for p in found["problems"]] == [("check_failed", None)]
    run = _fix(api, chat_id)  # one message: no check is due any more; the failure mark is cleared
    assert run["status"] == "done" and run["current"] == "Advanced Memory fixed 0 scenes.", run
    assert _problems(api, chat_id)["count"] == 0


def test_problems_dot_and_the_api_refuse_what_does_not_fit(sugo, api, models):
    chat_id = _chat(api, models)
    assert 'class="problem-dot"' not in api.get(f"/chats/{chat_id}/scenes/problems/dot?announce=1").text
    stored_scene(sugo, chat_id, LINES, state="failed", reason="x")
    dot = api.get(f"/chats/{chat_id}/scenes/problems/dot?announce=1").text
    assert 'class="problem-dot"' in dot and 'data-problems-scenes="1"' in dot and "data-announce" in dot
    assert api.get(f"/chats/{chat_id}/scenes/problems/dot?slot=elsewhere").status_code == 422
    assert api.get("/api/chats/999999/scenes/problems").status_code == 404
    r = api.put(f"/api/chats/{chat_id}/options", json={"settings": {"advanced_memory": False}})
    assert r.status_code == 200
    assert _problems(api, chat_id)["count"] == 0  # off: nothing runs there, nothing to flag
    refused = api.post(f"/api/chats/{chat_id}/scenes/fix")
    assert refused.status_code == 400 and "Turn on Advanced Memory" in refused.json()["detail"]


def test_fix_asks_again_who_was_there_and_an_undecided_scene_is_not_asked_twice(sugo, api, models):
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api, "Aria")["id"], add_character(api, "Bo")["id"]])["id"]
    r = api.put(
        f"/api/chats/{chat_id}/options",
        json={"settings": {"advanced_memory": True, "adv_check_interval": 100}},
    )
    assert r.status_code == 200, r.text
    lines = [("Aria", "We hold the gate."), ("Bo", "I bar it.")]
    decided = stored_scene(
        sugo, chat_id, lines, state="written", summary="They held the gate.", check_who=True
    )
    undecided = stored_scene(
        sugo, chat_id, lines, state="written", summary="They held it again.", check_who=True
    )
    assert [p["kind"] for p in _problems(api, chat_id)["problems"]] == ["check_who", "check_who"]

    unsure = json.dumps({"summary": "Someone held the gate again."})
    models.script(
        json.dumps({"summary": "Aria and Bo held the gate.", "participants": ["Aria", "Bo"]}), unsure, unsure
    )
    run = _fix(api, chat_id)
    assert run["current"] == "Advanced Memory fixed 1 scene; need your review: scene 2.", run
    assert (_scene(sugo, decided).check_who, _scene(sugo, decided).participants) == (False, ["Aria", "Bo"])
    assert _scene(sugo, undecided).check_who
    assert [p["kind"] for p in _problems(api, chat_id)["problems"]] == ["check_who_undecided"]

    models.reset()
    run = _fix(api, chat_id)  # nothing left to ask: the undecided scene is yours
    assert run["current"] == "Advanced Memory fixed 0 scenes; need your review: scene 2.", run
    assert not models.requests


def test_a_fix_run_is_never_taken_for_prepare_and_resume_processing_goes_on_with_a_paused_prepare(
    sugo, api, models
):
    chat_id = _chat(api, models)
    stored_scene(sugo, chat_id, LINES, state="failed", reason="x")
    models.script(GOOD)
    assert _fix(api, chat_id)["status"] == "done"
    assert api.get(f"/api/chats/{chat_id}/scenes/prepare").json()["status"] == "none"
    with sugo.session() as s:
        assert not preparing(s, chat_id) and prepare.latest_run(s, chat_id) is None
        s.add(SceneRun(chat_id=chat_id, status="stopped", reason=prepare.PAUSED, stage="detecting"))
        s.add(SceneState(chat_id=chat_id, paused=True))
        s.commit()
    # A Prepare stopped by Pause processing goes on at Resume processing (its window's answer: no scene end).
    models.script(json.dumps({"ends": []}))
    assert api.post(f"/api/chats/{chat_id}/scenes/resume").status_code == 200
    wait_for(
        lambda: api.get(f"/api/chats/{chat_id}/scenes/prepare").json()["status"] == "done",
        what="Prepare to end",
    )
    assert _problems(api, chat_id)["run"]["status"] == "done"  # the Fix run is still Fix's own


def test_deleting_an_earlier_message_does_not_make_later_scenes_look_changed(api, models, sugo):
    """Renumbering is not a change: the scene's messages say what they said."""
    from app.memory.scenes.fix import fix_status

    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    early = api.post(f"/api/chats/{chat_id}/messages", json={"content": "An early aside."}).json()["id"]
    scene = stored_scene(sugo, chat_id, [("You", "We reach the ford."), ("Aria", "Cold water.")])
    api.put(f"/api/chats/{chat_id}/options", json={"settings": {"advanced_memory": True}})
    models.script(
        json.dumps({"summary": "They reached the ford.", "participants": ["Aria"], "timeframe": ""})
    )
    writer.write_recap(sugo.services, scene)
    with sugo.session() as s:
        assert fix_status(s, sugo.services, chat_id).problems.items == ()
    assert api.delete(f"/api/chats/{chat_id}/messages/{early}").status_code in (200, 204)
    with sugo.session() as s:
        assert fix_status(s, sugo.services, chat_id).problems.items == ()
    # An edit is a change.
    ford = api.get(f"/api/chats/{chat_id}/messages").json()[-2]["id"]
    assert (
        api.patch(
            f"/api/chats/{chat_id}/messages/{ford}", json={"content": "We reach the bridge."}
        ).status_code
        == 200
    )
    with sugo.session() as s:
        assert [p.kind for p in fix_status(s, sugo.services, chat_id).problems.items] == ["changed"]

"""Re-scan scenes (issue 14) against the test model server playing the helper, over real HTTP and real
SQLite: a new end found in the open scene closes a scene, a range re-split replaces only the scenes whose
bounds changed (the range widened to whole scenes), scenes outside keep their rows and recaps, a
hand-edited summary that would change stops everything with nothing changed, a helper failure changes
nothing, and bad ranges are refused with a sentence."""

from __future__ import annotations

from sqlmodel import Session, select

from app.chats.models import Message
from app.memory.scenes.core.check import SCENE_CHECK_PROMPT
from app.memory.scenes.models import Scene, SceneRun, SceneState
from tests.integration.test_scene_prepare import _checks, _ends, _recap, _recaps, _scenes, _seeded_chat
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

OLD = [(1, 8), (9, 25), (26, 33), (34, 40)]


def _store(sugo, chat_id: int, ids: list[int], bounds, *, manual: int | None = None) -> list[int]:
    """Written scenes at these message numbers (the `manual`-th, 1-based, edited by hand); their ids."""
    with Session(sugo.engine) as s:
        rows = []
        for k, (a, b) in enumerate(bounds, 1):
            rows.append(
                Scene(
                    chat_id=chat_id,
                    first_message_id=ids[a - 1],
                    last_message_id=ids[b - 1],
                    state="written",
                    summary=f"Old recap {k}.",
                    participants=["Aria"],
                    manual=k == manual,
                )
            )
        s.add_all(rows)
        s.add(SceneState(chat_id=chat_id, checked_through_id=ids[bounds[-1][1] - 1]))
        s.commit()
        return [r.id for r in rows]


def _rows(sugo, chat_id: int) -> dict[int, tuple[int, int, str]]:
    with Session(sugo.engine) as s:
        return {
            r.id: (r.first_message_id, r.last_message_id, r.summary)
            for r in s.exec(select(Scene).where(Scene.chat_id == chat_id))
        }


def _rescan(api, chat_id: int, **body) -> dict:
    r = api.post(f"/api/chats/{chat_id}/scenes/rescan", json=body)
    assert r.status_code == 202, r.text
    return r.json()


def _until(api, chat_id: int, status: str) -> dict:
    def ended():
        r = api.get(f"/api/chats/{chat_id}/scenes/rescan")
        assert r.status_code == 200, r.text
        s = r.json()
        if s["status"] == "running":
            return None
        assert s["status"] == status, s
        return s

    return wait_for(ended, timeout=60, what=f"the re-scan {status}")


def test_a_new_end_in_the_open_scene_closes_a_scene_and_nothing_else_changes(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    old = _store(sugo, chat_id, ids, OLD[:2])
    before = _rows(sugo, chat_id)
    status = api.get(f"/api/chats/{chat_id}/scenes/rescan").json()
    assert status["status"] == "none" and (status["default_first"], status["default_last"]) == (26, 60)
    # The default range, the open scene: windows 26–35, 36–45, 46–55, 56–60.
    models.script(_ends([]), _ends([40]), _ends([]), _ends([]), _recap(3))
    started = _rescan(api, chat_id)
    assert started["status"] == "running" and (started["first"], started["last"]) == (26, 60)
    done = _until(api, chat_id, "done")
    assert _checks(models) == [(26, 35), (36, 45), (46, 55), (56, 60)]
    first = [
        r.json["messages"][1]["content"]
        for r in models.requests
        if r.json["messages"][0]["content"] == SCENE_CHECK_PROMPT
    ][0]
    assert 'number="25" name="Aria" checked="earlier"' in first  # the scene before is context
    assert _recaps(models) == [(26, 40)]
    scenes = _scenes(sugo, chat_id, ids)
    assert [(a, b, st) for a, b, st, _ in scenes] == [
        (1, 8, "written"),
        (9, 25, "written"),
        (26, 40, "written"),
    ]
    assert scenes[2][3].startswith("Recap number 3")
    rows = _rows(sugo, chat_id)
    assert {k: rows[k] for k in old} == before  # outside scenes: same rows, bounds and recaps
    assert done["changed"] == [3] and "1 recap written" in done["message"]
    assert (done["default_first"], done["default_last"]) == (41, 60)  # 41–60 stay the open scene
    with Session(sugo.engine) as s:
        assert s.get(SceneState, chat_id).checked_through_id == ids[-1]


def test_a_range_is_re_split_whole_scenes_at_its_edges_and_outside_scenes_untouched(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    old = _store(sugo, chat_id, ids, OLD)
    before = _rows(sugo, chat_id)
    # 12–30 crosses scenes 2 (9–25) and 3 (26–33): the helper reads 9–33 (windows 9–18, 19–28, 29–33).
    models.script(_ends([15]), _ends([]), _ends([]), _recap(2), _recap(3))
    started = _rescan(api, chat_id, first=12, last=30)
    assert (started["first"], started["last"]) == (9, 33)
    done = _until(api, chat_id, "done")
    assert _checks(models) == [(9, 18), (19, 28), (29, 33)]
    assert sorted(_recaps(models)) == [(9, 15), (16, 33)]  # only the changed scenes are recapped
    # 33 stays an end: scene 4 keeps its start.
    assert [(a, b) for a, b, _, _ in _scenes(sugo, chat_id, ids)] == [(1, 8), (9, 15), (16, 33), (34, 40)]
    rows = _rows(sugo, chat_id)
    assert rows[old[0]] == before[old[0]] and rows[old[3]] == before[old[3]]
    assert old[1] not in rows and old[2] not in rows
    assert done["changed"] == [2, 3] and "2 recaps written" in done["message"]


def test_the_same_scenes_found_again_change_nothing(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    _store(sugo, chat_id, ids, OLD)
    before = _rows(sugo, chat_id)
    models.script(_ends([]), _ends([25]), _ends([33]))
    _rescan(api, chat_id, first=9, last=33)
    done = _until(api, chat_id, "done")
    assert "nothing changed" in done["message"] and _recaps(models) == []
    assert _rows(sugo, chat_id) == before


def test_a_hand_edited_summary_that_would_change_stops_the_re_scan_and_nothing_changes(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    _store(sugo, chat_id, ids, OLD, manual=3)
    before = _rows(sugo, chat_id)
    models.script(_ends([15, 29]), _ends([]), _ends([]))
    _rescan(api, chat_id, first=9, last=33)
    stopped = _until(api, chat_id, "stopped")
    assert stopped["message"].startswith("Scene 3 has a summary you edited: “Old recap 3.” The re-scan")
    assert "changed nothing" in stopped["message"]
    assert _rows(sugo, chat_id) == before and _recaps(models) == []
    # The HTML panel says it too.
    panel = api.get(f"/chats/{chat_id}/scenes/rescan", headers={"HX-Request": "true"}).text
    assert "Re-scan stopped: Scene 3 has a summary you edited" in panel


def test_a_helper_failure_changes_nothing(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    _store(sugo, chat_id, ids, OLD)
    before = _rows(sugo, chat_id)
    models.script(_ends([15]), "the scene ends somewhere, I think", "somewhere, really")  # asked once more
    _rescan(api, chat_id, first=9, last=33)
    failed = _until(api, chat_id, "failed")
    assert (
        failed["message"].startswith("Finding scenes in messages 19–28:")
        and "Nothing was changed" in failed["message"]
    )
    assert _rows(sugo, chat_id) == before


def test_bad_ranges_are_refused_with_a_sentence(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    _store(sugo, chat_id, ids, OLD)
    url = f"/api/chats/{chat_id}/scenes/rescan"
    for body, status, sentence in (
        ({"first": 30, "last": 12}, 400, "Re-scan: the first message (30) comes after the last one (12)."),
        ({"first": 50, "last": 61}, 400, "Re-scan: this chat has 60 messages; message 61 does not exist."),
    ):
        r = api.post(url, json=body)
        assert (r.status_code, r.json()["detail"]) == (status, sentence), r.text
    assert api.post(url, json={"first": 0, "last": 5}).status_code == 422
    assert api.post("/api/chats/999999/scenes/rescan", json={}).status_code == 404
    # The page form: a field that is not a number.
    r = api.post(
        f"/chats/{chat_id}/scenes/rescan",
        data={"rescan_first": "abc", "rescan_last": "9"},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 400 and "Re-scan: First message: “abc” is not a message number" in r.text
    # More than 2,000 messages.
    with Session(sugo.engine) as s:
        s.add_all(
            Message(
                chat_id=chat_id,
                role="user",
                name="You",
                content=f"More {n}.",
                swipes=[{"content": f"More {n}.", "status": "ok"}],
            )
            for n in range(2_000)
        )
        s.commit()
    r = api.post(url, json={"first": 41, "last": 2_060})
    assert r.status_code == 400 and r.json()["detail"].startswith(
        "Re-scan: messages 41–2,060 are 2,020 messages"
    )
    # Widened past the limit by a scene crossing the edge.
    r = api.post(url, json={"first": 30, "last": 2_028})
    assert r.status_code == 400 and r.json()["detail"].startswith(
        "A scene crosses the edge of messages 30–2,028, so the re-scan must read messages 26–2,028."
    )
    assert models.requests == [] and _rows(sugo, chat_id)


def test_one_re_scan_at_a_time_and_none_while_prepare_is_unfinished(sugo, api, models):
    chat_id, ids = _seeded_chat(sugo, api, models)
    _store(sugo, chat_id, ids, OLD)
    models.script(Reply(_ends([]), first_delay_s=1.5), _ends([25]), _ends([]))  # the same scenes
    _rescan(api, chat_id, first=9, last=33)
    r = api.post(f"/api/chats/{chat_id}/scenes/rescan", json={"first": 9, "last": 33})
    assert (
        r.status_code == 409
        and r.json()["detail"] == "A re-scan is already running in this chat; wait for it to finish."
    )
    _until(api, chat_id, "done")
    with Session(sugo.engine) as s:
        s.add(SceneRun(chat_id=chat_id, status="stopped"))
        s.commit()
    r = api.post(f"/api/chats/{chat_id}/scenes/rescan", json={})
    assert r.status_code == 400 and r.json()["detail"].startswith("Prepare existing history is unfinished")

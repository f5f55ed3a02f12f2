"""A run whose server died is finished by another server (issue 26): server A (`python -m app`, a process
of its own) runs Prepare existing history and is SIGKILLed in the middle of a recap; server B, sharing
the PostgreSQL database, finds A's claims gone stale, puts the scene A was writing back and resumes the
run, asking nothing twice but the recap the kill cut short. Each scene ends with one recap. And a
scene a live server is writing stays its own when another server starts (and settles what looks cut
short): the writers' claims are rows of the database, not of one process."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from app.memory.scenes.models import Scene
from app.memory.scenes.writer import release_stale
from app.platform import claims, jobs
from tests.conftest import add_character, add_connection, new_chat
from tests.integration.test_scene_prepare import (  # the single-server Prepare tests' script and readers
    ENDS,
    SCENES,
    WINDOWS,
    _checks,
    _ends,
    _recap,
    _recaps,
    _scenes,
    _seeded_chat,
    _start,
    _until,
)
from tests.support.live import LiveSugo
from tests.support.model_server import Reply
from tests.support.process import SugoProcess
from tests.support.scenes import stored_scene
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres


def test_a_prepare_whose_server_was_killed_is_finished_by_the_other_server(
    tmp_path, migrated_postgres_url, models, monkeypatch
):
    # B judges a claim stale after 20 s without a heartbeat: A refreshes its claims every 10 s
    # (claims.HEARTBEAT_S), so a live A is never taken for dead; B looks twice a second.
    monkeypatch.setattr(claims, "STALE_AFTER", timedelta(seconds=20))
    monkeypatch.setattr(jobs, "DEAD_SERVER_LOOK_S", 0.5)
    data = tmp_path / "data"
    a = SugoProcess(data, SUGO_SERVER_NAME="a", SUGO_DATABASE_URL=migrated_postgres_url).start()
    try:
        with (
            LiveSugo(data, database_url=migrated_postgres_url, server_name="b") as b,
            a.client() as api_a,
            b.client() as api_b,
        ):
            chat_id, ids = _seeded_chat(b, api_a, models)
            models.script(*[_ends(e) for e in ENDS], _recap(1), Reply(_recap(2), first_delay_s=120))
            _start(api_a, chat_id)
            wait_for(lambda: len(_recaps(models)) == 2, timeout=60, what="A to ask for the second recap")
            assert _scenes(b, chat_id, ids)[1][2] == "writing"
            a.kill()  # in the middle of scene 2's recap: its run "running", the scene "writing"
            models.script(*[_recap(n) for n in range(2, 6)])
            done = _until(api_b, chat_id, "done")
            stored = _scenes(b, chat_id, ids)
    finally:
        a.kill()
    assert done["done"] == done["total"] == 5 and done["reason"] == ""
    assert _checks(models) == WINDOWS  # no window read twice
    asked = _recaps(models)
    # The recap the kill cut short asked again by B, every other scene once. Not necessarily next: the
    # scene's claim was taken after the run's, and unless a heartbeat refreshed both since, it goes
    # stale after it, so B may resume the run while the scene still looks held (a run of this test
    # under load saw 3, 4, 5, then 2).
    assert asked[1] == SCENES[1] and sorted(asked) == sorted([*SCENES, SCENES[1]])
    assert [(first, last, state) for first, last, state, _ in stored] == [
        (*scene, "written") for scene in SCENES
    ]
    # The helper hands its scripted recaps out in the order it is asked: each scene holds the one it
    # got (A's first, then B's in B's order), whatever that order was.
    handed = {SCENES[0]: 1} | {scene: n for n, scene in enumerate(asked[2:], start=2)}
    assert [summary.split(":")[0] for *_, summary in stored] == [
        f"Recap number {handed[scene]}" for scene in SCENES
    ]


def test_a_scene_a_live_server_is_writing_stays_its_own_when_another_server_starts(
    tmp_path, migrated_postgres_url, models
):
    data = tmp_path / "data"
    with LiveSugo(data, database_url=migrated_postgres_url, server_name="one") as one, one.client() as api:
        add_connection(api, models)
        chat_id = new_chat(api, [add_character(api)["id"]])["id"]
        scene_id = stored_scene(one, chat_id, [("You", "We reach the gate."), ("Aria", "It is shut.")])
        assert one.services.held_scenes.hold(scene_id)  # one's writer claims the scene…
        with one.session() as s:  # …then marks it, as writer._claim does
            scene = s.get(Scene, scene_id)
            scene.state = "writing"
            s.add(scene)
            s.commit()
        with LiveSugo(data, database_url=migrated_postgres_url, server_name="two") as two:
            # Two's start settled the runs (release_stale first): one's scene is still being written.
            assert _scene_state(two, scene_id) == "writing"
            assert not two.services.held_scenes.hold(scene_id)  # nor may a writer of two's take it
            assert two.services.held_scenes.held() == [scene_id]
        one.services.held_scenes.let_go(scene_id)  # one's writer died without writing it
        assert release_stale(one.services) == 1
        assert _scene_state(one, scene_id) == "waiting"


def _scene_state(sugo: LiveSugo, scene_id: int) -> str:
    with sugo.session() as s:
        scene = s.get(Scene, scene_id)
        assert scene is not None
        return scene.state


def test_a_prepare_cut_short_by_a_clean_shutdown_is_resumed_by_the_live_server(
    tmp_path, migrated_postgres_url, models, monkeypatch
):
    """A server stopped for good (scaled down, not restarted) while the other runs: its Prepare thread,
    told the app is stopping, ends after the recap in hand and keeps the run's claim, which goes stale
    once the heartbeat stops; the live server's look then resumes the run (given back, the claim
    would leave the run "running" with no one to find it)."""
    data = tmp_path / "data"
    with LiveSugo(data, database_url=migrated_postgres_url, server_name="one") as one:
        # One refreshes its claims five times a second, so two may judge a claim stale after 2 s.
        one.services.claims.table.stop_heartbeat()
        one.services.claims.table.start_heartbeat(every_s=0.2)
        monkeypatch.setattr(claims, "STALE_AFTER", timedelta(seconds=2))
        monkeypatch.setattr(jobs, "DEAD_SERVER_LOOK_S", 0.2)
        with (
            LiveSugo(data, database_url=migrated_postgres_url, server_name="two") as two,
            two.client() as api,
        ):
            with one.client() as api_one:
                chat_id, ids = _seeded_chat(one, api_one, models)
                held = threading.Event()
                models.script(*[_ends(e) for e in ENDS], _recap(1), Reply(_recap(2), gate=held))
                # Its thread is told from any an earlier test left behind (chat ids start at 1 again).
                earlier = set(threading.enumerate())
                _start(api_one, chat_id)
                wait_for(
                    lambda: len(_recaps(models)) == 2, timeout=60, what="one to ask for the second recap"
                )
            prepare = next(
                t for t in threading.enumerate() if t not in earlier and t.name.startswith("scenes-prepare")
            )
            one.stop()
            models.script(*[_recap(n) for n in range(3, 6)])
            held.set()  # one's thread stores recap 2, sees the app stopped and ends
            prepare.join(30)
            assert not prepare.is_alive()
            done = _until(api, chat_id, "done")
            stored = _scenes(two, chat_id, ids)
    assert done["done"] == done["total"] == 5 and done["reason"] == ""
    asked = _recaps(models)
    assert sorted(asked) == SCENES  # each scene asked once: recap 2 was one's, 3–5 two's
    handed = {scene: n for n, scene in enumerate(asked, start=1)}  # the helper answers in asking order
    assert [summary.split(":")[0] for *_, summary in stored] == [
        f"Recap number {handed[scene]}" for scene in SCENES
    ]

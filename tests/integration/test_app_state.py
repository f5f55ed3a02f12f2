"""App state lives in one services object per app: two apps in one process (two data folders)
share no key box, lorebook cache, recall index, rebuild, thread pool, run claim, run progress or
held scene, even where their ids collide; an app started again on the same data folder does not take
the stopped app's runs for its own."""

from __future__ import annotations

from app.connections.crypto import KeyBox
from app.memory.recall.jobs import embed_chat
from app.memory.scenes.models import Scene
from app.memory.scenes.writer import release_stale
from app.platform.claims import KINDS
from tests.conftest import add_character, add_connection, new_chat
from tests.integration.test_memory_recall import _fill
from tests.support.live import LiveSugo
from tests.support.scenes import stored_scene
from tests.support.waiting import wait_for

SCENE = [("You", "We reach the gate at dusk."), ("Aria", "The gate is shut.")]


def _statuses(api, chat_id: int) -> tuple[str, str]:
    """How the chat's day Backfill and its Re-scan scenes are going, as the app answers."""
    backfill = api.get(f"/api/chats/{chat_id}/days/backfill").json()["status"]
    return backfill, api.get(f"/api/chats/{chat_id}/scenes/rescan").json()["status"]


def _scene_state(sugo: LiveSugo, scene_id: int) -> str:
    with sugo.session() as session:
        scene = session.get(Scene, scene_id)
        assert scene is not None
        return scene.state


def _book(api, name: str, content: str) -> dict:
    book = api.post("/api/lorebooks", json={"name": name, "is_global": True}).json()
    r = api.post(
        f"/api/lorebooks/{book['id']}/entries", json={"title": name, "content": content, "constant": True}
    )
    assert r.status_code == 201, r.text
    return book


def test_two_apps_in_one_process_keep_their_caches_indexes_and_keys_apart(tmp_path, models):
    with (
        LiveSugo(tmp_path / "a") as a,
        LiveSugo(tmp_path / "b") as b,
        a.client() as api_a,
        b.client() as api_b,
    ):
        services_a, services_b = a.services, b.services
        for part in ("keybox", "lorebooks", "recall", "sources", "generations"):
            assert getattr(services_a, part) is not getattr(services_b, part), part
        assert services_a.recall.index is not services_b.recall.index
        assert services_a.recall.queries is not services_b.recall.queries

        # A run of each kind working A's chat 1 leaves B's chat 1 (the same id) free for B's own runs.
        assert services_a.claims is not services_b.claims
        for kind in KINDS:
            claims_a, claims_b = getattr(services_a.claims, kind), getattr(services_b.claims, kind)
            assert claims_a.claim(1), kind
            assert not claims_b.held(1) and claims_b.chats() == [], kind
            assert claims_b.claim(1) and claims_a.held(1), kind
            claims_a.release(1)
            claims_b.release(1)

        # The same ids in both databases: book 1, chat 1, character 1.
        book_a, book_b = (
            _book(api_a, "Vellmar", "Vellmar is a port city."),
            _book(api_b, "Ostgard", "Ostgard is snow."),
        )
        assert book_a["id"] == book_b["id"]
        chats = []
        for api, sugo in ((api_a, a), (api_b, b)):
            add_connection(api, models, api_key=f"sk-{sugo.settings.data_dir.name}")
            char = add_character(api)
            chat = new_chat(api, [char["id"]], mode="conversation")
            chats.append(chat)
        assert chats[0]["id"] == chats[1]["id"]
        chat_id = chats[0]["id"]

        # Each prompt carries its own book, though the book ids are the same and A's was compiled first.
        peek_a = api_a.get(f"/api/chats/{chat_id}/prompt").json()["messages"][0]["content"]
        peek_b = api_b.get(f"/api/chats/{chat_id}/prompt").json()["messages"][0]["content"]
        assert "Vellmar is a port city." in peek_a and "Ostgard" not in peek_a
        assert "Ostgard is snow." in peek_b and "Vellmar" not in peek_b
        assert services_a.lorebooks.held_books() == services_b.lorebooks.held_books() == [book_a["id"]]

        # Memories only in A: searching A loads A's index; B's stays empty and finds nothing.
        _fill(a, chat_id, 1)
        embed_chat(services_a, chat_id)
        found_a = api_a.get(
            f"/api/chats/{chat_id}/memories/search", params={"q": "brass key clock tower"}
        ).json()
        found_b = api_b.get(
            f"/api/chats/{chat_id}/memories/search", params={"q": "brass key clock tower"}
        ).json()
        assert found_a["results"] and "brass key" in found_a["results"][0]["content"]
        assert found_b["results"] == []
        assert services_a.recall.index.held_chats() == [chat_id]
        assert services_b.recall.index.held_chats() in ([], [chat_id])  # searched, but holds no bits
        assert services_a.recall.rebuilds.get(chat_id) is None
        api_a.post(f"/api/chats/{chat_id}/memories/rebuild")
        assert (
            services_a.recall.rebuilds.get(chat_id) is not None
            and services_b.recall.rebuilds.get(chat_id) is None
        )

        # Each app decrypts only with its own data folder's key.
        assert services_a.keybox is not services_b.keybox
        token = services_a.keybox.encrypt("sk-secret")
        assert services_a.keybox.decrypt(token) == "sk-secret"
        assert KeyBox(a.settings.secret_key_path).decrypt(token) == "sk-secret"
        try:
            services_b.keybox.decrypt(token)
            raise AssertionError("B decrypted A's key")
        except ValueError:
            pass

        # A Backfill and a re-scan of A's chat 1 and a recap A writes of its scene 1 are none of B's, whose
        # chat and scene have the same ids.
        for part in ("day_backfills", "rescan_statuses", "held_scenes"):
            assert getattr(services_a, part) is not getattr(services_b, part), part
        services_a.day_backfills.begin(chat_id)  # begun, its days not counted yet
        services_a.rescan_statuses.begin(chat_id, 1, 2)
        assert _statuses(api_a, chat_id) == ("running", "running")
        assert _statuses(api_b, chat_id) == ("none", "none")
        scene_a, scene_b = (stored_scene(sugo, chat_id, SCENE, state="writing") for sugo in (a, b))
        assert scene_a == scene_b
        assert services_a.held_scenes.hold(scene_a)  # A's writer is writing it
        release_stale(services_b)  # B's was left "writing" by no writer of B's: it waits again
        release_stale(services_a)
        assert (_scene_state(a, scene_a), _scene_state(b, scene_b)) == ("writing", "waiting")
        assert services_b.held_scenes.hold(scene_b)  # B's writer may take its own scene of that id
        services_a.held_scenes.let_go(scene_a)
        services_b.held_scenes.let_go(scene_b)


def test_an_app_started_again_on_its_folder_takes_none_of_the_stopped_apps_runs(tmp_path, models):
    """A restart in one process (as the tests do): a thread of the stopped app may still work a chat. The
    new app drops the claims the stopped one left in the database (its held scenes' too), and its run
    progress is its own, so its runs of that chat start and a recap the stopped app was writing waits again (the day summaries' claims and Backfill progress were
    once shared by every app on one database)."""
    data = tmp_path / "data"
    first = LiveSugo(data, start_scheduler=False).start()
    with first.client() as api:
        add_connection(api, models)
        chat_id = new_chat(api, [add_character(api)["id"]], mode="conversation")["id"]
        scene_id = stored_scene(first, chat_id, SCENE, state="writing")
    for kind in KINDS:  # the stopped app's threads, still at work
        assert getattr(first.services.claims, kind).claim(chat_id), kind
    progress = first.services.day_backfills.begin(chat_id)
    first.services.rescan_statuses.begin(chat_id, 1, 2)
    assert first.services.held_scenes.hold(scene_id)
    first.stop()
    with LiveSugo(data, start_scheduler=False) as second, second.client() as api:
        assert [kind for kind in KINDS if getattr(second.services.claims, kind).held(chat_id)] == []
        assert _statuses(api, chat_id) == ("none", "none")
        assert _scene_state(second, scene_id) == "waiting"  # put back at start: no writer of this app
        backfill = f"/api/chats/{chat_id}/days/backfill"
        started = api.post(backfill)
        assert started.status_code == 202, started.text
        ended = wait_for(
            lambda: (s := api.get(backfill).json())["status"] != "running" and s,
            timeout=30,
            interval=0.05,
            what="the new app's Backfill to end",
        )
        assert ended["status"] == "done" and ended["result"] == "No missing summaries found."
    # The claims are rows of the one database: the new start dropped what the stopped app held (one
    # process owns a SQLite file), its scene's claim too, so its threads' ends give back nothing of the
    # new app's. Its progress, kept in the stopped app, is as it left it.
    assert not any(getattr(first.services.claims, kind).held(chat_id) for kind in KINDS)
    assert first.services.held_scenes.held() == []
    assert first.services.day_backfills.latest(chat_id) is progress and progress.running
    assert (status := first.services.rescan_statuses.get(chat_id)) is not None and status.status == "running"

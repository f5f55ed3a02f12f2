"""Memory Recall's Rebuild all on two Sugo servers sharing one PostgreSQL database (issue 26): the rebuild
is a row of the database worked under a claim of it, so a page served by either server shows its progress,
Stop pressed on the other server stops it after the batch in hand, and a rebuild whose server stopped
heartbeating (as one that died) is finished by the other from the last memory embedded."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from app.memory.recall.jobs import embed_chat
from app.platform import claims, jobs
from tests.conftest import add_character, add_connection, new_chat
from tests.integration.test_memory_recall import _chunks, _fill
from tests.support.live import LiveSugo
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres


def _status(api, chat_id: int) -> dict:
    return api.get(f"/api/chats/{chat_id}/memories/status").json()


def _asked(models, since: int) -> list[list[str]]:
    """The texts of each /embeddings call after the first `since` requests."""
    return [r.json["input"] for r in list(models.requests)[since:] if r.path.endswith("/embeddings")]


def _chat_to_rebuild(sugo, api, models) -> tuple[int, int]:
    """A chat whose memories have the built-in model's vectors, switched to the test server's embedding
    model (a rebuild asks it once per batch of 16); the chat and its memory count."""
    char = add_character(api)
    chat_id = new_chat(api, [char["id"]])["id"]
    _fill(sugo, chat_id, char["id"], n=260)
    embed_chat(sugo.services, chat_id)
    count = len(_chunks(sugo, chat_id))
    assert count > 3 * 16, count
    conn = add_connection(api, models, embedding_model="test-embedding")
    api.put(f"/api/chats/{chat_id}/options", json={"connection_id": conn["id"]})
    return chat_id, count


def _hold_second_batch(models, api, chat_id: int) -> tuple[int, threading.Event]:
    """Start the rebuild through `api` and let its first batch through; the second waits at the model.
    The request count before it, and the gate holding the second batch."""
    since = len(models.requests)
    first = models.embedding_gate = threading.Event()
    assert api.post(f"/api/chats/{chat_id}/memories/rebuild").status_code == 202
    wait_for(lambda: len(_asked(models, since)) == 1, what="the first batch at the model")
    second = models.embedding_gate = threading.Event()
    first.set()
    wait_for(lambda: len(_asked(models, since)) == 2, what="the second batch at the model")
    return since, second


def test_progress_started_on_one_server_shows_on_the_other_and_its_stop_stops_it(two_servers, models):
    one, two = two_servers
    with one.client() as api_one, two.client() as api_two:
        chat_id, count = _chat_to_rebuild(one, api_one, models)
        since, second = _hold_second_batch(models, api_one, chat_id)
        try:
            seen = _status(api_two, chat_id)["rebuild"]
            assert seen["running"] and (seen["done"], seen["total"]) == (16, count), seen
            page = api_two.get(f"/chats/{chat_id}/memories").text
            assert f"Rebuilding: 16 / {count}" in page and "/memories/rebuild/stop" in page
            # Rebuild all through two while one works: two answers with one's run, starts none.
            again = api_two.post(f"/api/chats/{chat_id}/memories/rebuild").json()
            assert again["running"] and again["done"] == 16 and again["total"] == count, again
            assert two.services.claims.rebuilds.held(chat_id)  # one's claim, live in the database
            assert api_two.post(f"/api/chats/{chat_id}/memories/rebuild/stop").json() == {"stopping": True}
        finally:
            models.embedding_gate = None
            second.set()
        ended = wait_for(
            lambda: not (s := _status(api_two, chat_id))["rebuild"]["running"] and s, what="the rebuild's end"
        )
        rebuild = ended["rebuild"]
        assert rebuild["status"] == "stopped" and rebuild["done"] == 32 < count, rebuild
        assert len(_asked(models, since)) == 2  # one stopped after the batch in hand: no third
        assert ended["other_space"] == count - 32
        assert f"Rebuild stopped after 32 of {count}" in api_one.get(f"/chats/{chat_id}/memories").text
        wait_for(lambda: not one.services.claims.rebuilds.held(chat_id), what="the claim given back")


def test_a_rebuild_whose_server_stopped_heartbeating_is_finished_by_the_other(
    two_servers, models, tmp_path, migrated_postgres_url, monkeypatch
):
    one, _ = two_servers
    with one.client() as api_one:
        chat_id, count = _chat_to_rebuild(one, api_one, models)
        since, second = _hold_second_batch(models, api_one, chat_id)
        try:
            # One stops refreshing its claims, as a server that died would; the model holds its batch.
            one.services.claims.table.stop_heartbeat()
            monkeypatch.setattr(claims, "STALE_AFTER", timedelta(seconds=1))
            monkeypatch.setattr(jobs, "DEAD_SERVER_LOOK_S", 0.2)
            with (
                LiveSugo(tmp_path / "data", database_url=migrated_postgres_url, server_name="three") as three,
                three.client() as api_three,
            ):
                holder = three.services.claims.table.holder
                wait_for(
                    lambda: (
                        (c := three.services.claims.table.live_claim("rebuilds", chat_id)) is not None
                        and c[0] == holder
                    ),
                    what="the live server taking the rebuild over",
                )
                models.embedding_gate = None
                second.set()  # one's batch returns now: one finds its claim gone and writes nothing
                ended = wait_for(
                    lambda: not (s := _status(api_three, chat_id))["rebuild"]["running"] and s,
                    timeout=120,
                    what="the rebuild finished by three",
                )
        finally:
            models.embedding_gate = None
            second.set()
    rebuild = ended["rebuild"]
    assert rebuild["status"] == "done" and rebuild["done"] == rebuild["total"] == count, rebuild
    assert ended["other_space"] == 0 and ended["statuses"]["vectorized"] == count, ended
    calls = _asked(models, since)
    texts = [t for call in calls for t in call]
    twice = {t for t in texts if texts.count(t) > 1}
    assert twice <= set(calls[1]), "only the batch in flight on the dead server is embedded twice"
    assert not set(calls[0]) & {t for call in calls[2:] for t in call}  # the first batch: never again

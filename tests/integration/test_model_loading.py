"""Issue 21, item 21: the built-in embedding model loads in the background at start, never inside a
request. /healthz says whether it is ready; a search that comes first waits for it within a limit,
then ranks by words and says why; only the models the data uses are loaded."""

from __future__ import annotations

import threading

import pytest

from app.memory.recall import service
from app.memory.recall.embedders import (
    BUILTINS,
    E5Small,
    EmbeddingError,
    MiniLM,
    ModelLoad,
    ModelStillLoading,
)
from app.memory.recall.jobs import embed_chat
from tests.conftest import add_character, add_connection, new_chat
from tests.integration.test_memory_recall import FACT, _fill
from tests.support.live import LiveSugo
from tests.support.waiting import wait_for

QUESTION = "Where did Elowen hide the brass key?"


def _health(api) -> dict:
    r = api.get("/healthz")
    assert r.status_code == 200
    return r.json()


def test_a_search_before_the_model_is_loaded_waits_a_while_then_ranks_by_words(sugo, api, monkeypatch):
    char = add_character(api)
    chat = new_chat(api, [char["id"]], mode="conversation")
    _fill(sugo, chat["id"], char["id"])
    embed_chat(sugo.services, chat["id"])  # with the model as it loads for real
    loaded = MiniLM.loading.model()
    # Now as if Sugo had just started: the model's load is held until the test lets it finish.
    gate = threading.Event()
    monkeypatch.setattr(MiniLM, "loading", ModelLoad("all-MiniLM-L6-v2", lambda: (gate.wait(60), loaded)[1]))
    monkeypatch.setattr(service, "MODEL_WAIT_S", 0.2)
    MiniLM.loading.start()
    try:
        health = _health(api)
        # Only MiniLM's entry: a model an earlier test of this process loaded (e5) is listed as ready too.
        assert (health["status"], health["embedder"], health["models"]["all-MiniLM-L6-v2"]) == (
            "ok",
            "loading",
            "loading",
        )
        found = api.get(f"/api/chats/{chat['id']}/memories/search", params={"q": QUESTION}).json()
        assert found["note"].startswith(
            "Ranked by text matching only: the built-in model all-MiniLM-L6-v2 is still loading"
        )
        assert FACT in found["results"][0]["content"] and found["results"][0]["similarity"] is None
        page = api.get(f"/chats/{chat['id']}/memories/search", params={"q": QUESTION}).text
        assert "is still loading" in page and "Search again in a moment" in page
    finally:
        gate.set()
    wait_for(lambda: _health(api)["embedder"] == "ready", what="the model to be ready")
    found = api.get(f"/api/chats/{chat['id']}/memories/search", params={"q": QUESTION}).json()
    assert found["note"] is None and found["results"][0]["similarity"] is not None


def _ready(api) -> dict:
    return wait_for(
        lambda: _health(api)["embedder"] == "ready" and _health(api),
        timeout=600,
        interval=0.1,
        what="the built-in models the data uses to load",
    )


def test_only_the_models_the_data_uses_are_loaded_at_start(tmp_path, models, monkeypatch):
    # Each app's own view, as in a fresh process: a model another test loaded does not show.
    for name, cls in BUILTINS.items():
        monkeypatch.setattr(cls, "loading", ModelLoad(name, cls.loading.model))
    data = tmp_path / "data"
    with LiveSugo(data, start_scheduler=False) as live, live.client() as api:
        assert _ready(api)["models"] == {}  # no chat yet: nothing to load
        char = add_character(api)
        chat = new_chat(api, [char["id"]])
    with LiveSugo(data, start_scheduler=False) as live, live.client() as api:
        assert _ready(api)["models"] == {}  # a chat without memories: its first ones will load it
        _fill(live, chat["id"], char["id"])
        embed_chat(live.services, chat["id"])
    for name, cls in BUILTINS.items():
        monkeypatch.setattr(cls, "loading", ModelLoad(name, cls.loading.model))
    with LiveSugo(data) as live, live.client() as api:
        assert _ready(api)["models"] == {"all-MiniLM-L6-v2": "ready"}  # the chat's, by default
        remote = add_connection(api, models, embedding_model="test-embedding")
        assert (
            api.put(
                "/api/connections/defaults", json={"embeddings": f"connection:{remote['id']}"}
            ).status_code
            == 200
        )
    with LiveSugo(data) as live, live.client() as api:
        assert _ready(api)["models"] == {
            "all-MiniLM-L6-v2": "ready"
        }  # the model went on loading in the process
    for name, cls in BUILTINS.items():
        monkeypatch.setattr(cls, "loading", ModelLoad(name, cls.loading.model))
    with LiveSugo(data) as live, live.client() as api:
        assert _ready(api)["models"] == {}  # the chat embeds on the server now
        assert (
            api.put(
                f"/api/chats/{chat['id']}/options",
                json={"settings": {"builtin_embedding": "multilingual-e5-small"}},
            ).status_code
            == 200
        )
    for name, cls in BUILTINS.items():
        monkeypatch.setattr(cls, "loading", ModelLoad(name, cls.loading.model))
    with LiveSugo(data) as live, live.client() as api:
        assert _ready(api)["models"] == {"multilingual-e5-small": "ready"}
        assert E5Small.loading.ready and MiniLM.loading.state == "idle"


def test_model_load_rules():
    gate = threading.Event()
    load = ModelLoad("m", lambda: (gate.wait(60), "the model")[1])
    assert load.state == "idle"
    with pytest.raises(ModelStillLoading, match="the built-in model m is still loading"):
        load.model(timeout=0.01)
    assert load.state == "loading"
    gate.set()
    assert load.model() == "the model" and load.state == "ready" and load.ready
    assert load.start() is load.start()  # loaded once

    tries = []

    def broken():
        tries.append(1)
        if len(tries) == 1:
            raise OSError("weights file damaged")
        return "the model"

    flaky = ModelLoad("m", broken)
    with pytest.raises(
        EmbeddingError, match="The built-in model m could not be loaded: weights file damaged"
    ):
        flaky.model()
    assert flaky.state == "failed"
    assert flaky.model() == "the model" and len(tries) == 2  # the next use tries again

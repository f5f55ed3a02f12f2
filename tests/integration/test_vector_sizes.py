"""Issue 21, item 3: an embedding server that swaps the model behind a name (8 numbers a vector,
then 16) over real HTTP. The vectors of the new size are refused, the memories say why and the
viewer offers Rebuild, which moves the chat to the new size; no space ever holds two sizes."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlmodel import Session

from app.memory.recall.embedders import MAX_DIMS, vector_size_problem
from app.memory.recall.jobs import embed_chat
from app.memory.recall.vectors import store_vectors
from tests.conftest import add_character, add_connection, new_chat
from tests.integration.test_memory_recall import FACT, _chunks, _fill
from tests.integration.test_memory_sources import _wait_rebuild

MODEL = "shifting-embed"


def _sizes(sugo, chat_id: int) -> dict[str, set[int]]:
    """Each space of the chat's vectors, with the sizes (in numbers) stored under it."""
    with sugo.engine.connect() as db:
        rows = db.execute(
            text("select space_id, length(embedding) / 4 from memory_vector where chat_id = :c"),
            {"c": chat_id},
        ).all()
    sizes: dict[str, set[int]] = {}
    for space, size in rows:
        sizes.setdefault(space, set()).add(size)
    return sizes


def test_vectors_of_a_new_size_are_refused_until_rebuild(sugo, api, models):
    models.embedding_dim = 8
    conn = add_connection(api, models, embedding_model=MODEL)
    char = add_character(api)
    chat = new_chat(api, [char["id"]], connection_id=conn["id"], mode="conversation")
    chat_id = chat["id"]
    _fill(sugo, chat_id, char["id"], n=100)
    embed_chat(sugo.services, chat_id)
    first = _chunks(sugo, chat_id)
    assert first and all(c.status == "vectorized" for c in first)
    assert _sizes(sugo, chat_id) == {f"openai:{MODEL}:8": {8}}

    # The server now answers with 16 numbers under the same model name.
    models.embedding_dim = 16
    _fill(sugo, chat_id, char["id"], n=20, fact_at=0)
    embed_chat(sugo.services, chat_id)
    new = [c for c in _chunks(sugo, chat_id) if c.id not in {f.id for f in first}]
    assert new and all(c.status == "unavailable" for c in new)
    assert (
        "now gives shifting-embed vectors of 16 numbers, where this model's memories have 8" in new[0].error
    )
    assert _sizes(sugo, chat_id) == {f"openai:{MODEL}:8": {8}}  # nothing of 16 went in with the 8s
    with Session(sugo.engine) as s, pytest.raises(ValueError, match="cannot go in space"):
        store_vectors(s, chat_id, new[0].id, f"openai:{MODEL}:8", [[0.25] * 16])  # the last guard

    page = api.get(f"/chats/{chat_id}/memories").text
    assert "Embedding unavailable" in page and "the model behind that name has changed" in page
    notice = page.split('id="embedding-unavailable"', 1)[1].split("</p>", 1)[0]
    assert (
        f"{len(new)} memories could not be embedded" in notice and "Rebuild all embeds them again" in notice
    )
    assert f'hx-post="/chats/{chat_id}/memories/rebuild"' in page
    # A search says why vectors were not used (the query's vector has the new size too), by words alone.
    found = api.get(
        f"/api/chats/{chat_id}/memories/search", params={"q": "Where did Elowen hide the key?"}
    ).json()
    assert "vectors of 16 numbers" in found["note"] and FACT in found["results"][0]["content"]
    assert found["results"][0]["similarity"] is None

    # Rebuild all: every memory with the model as it is now, in a space of its own size.
    assert api.post(f"/api/chats/{chat_id}/memories/rebuild").status_code == 202
    status = _wait_rebuild(api, chat_id)
    assert status["rebuild"]["error"] is None and status["statuses"]["unavailable"] == 0
    assert status["source"]["space"] == f"openai:{MODEL}:16" and status["other_space"] == 0
    assert _sizes(sugo, chat_id) == {f"openai:{MODEL}:16": {16}}
    assert 'id="embedding-unavailable"' not in api.get(f"/chats/{chat_id}/memories").text
    found = api.get(
        f"/api/chats/{chat_id}/memories/search", params={"q": "Where did Elowen hide the key?"}
    ).json()
    assert found["note"] is None and found["results"][0]["similarity"] is not None

    # Back to 8 (the old model again): refused the same way, the 16s untouched.
    models.embedding_dim = 8
    _fill(sugo, chat_id, char["id"], n=20, fact_at=0)
    embed_chat(sugo.services, chat_id)
    assert _sizes(sugo, chat_id) == {f"openai:{MODEL}:16": {16}}
    assert any(
        c.status == "unavailable" and "of 8 numbers, where this model's memories have 16" in c.error
        for c in _chunks(sugo, chat_id)
    )


def test_vector_size_rules():
    assert vector_size_problem([384, 384], expected=384, model="m") is None
    assert vector_size_problem([8], expected=0, model="m") is None  # the first answer sets the size
    assert vector_size_problem([], expected=8, model="m") is None
    assert "of 16 numbers, where this model's memories have 8" in vector_size_problem(
        [16], expected=8, model="m"
    )
    assert "different sizes in one answer (8, 16 numbers)" in vector_size_problem(
        [8, 16, 8], expected=0, model="m"
    )
    assert "vectors of 0 numbers" in vector_size_problem([0, 8], expected=0, model="m")
    assert "Sugo takes 1 to 16,384" in vector_size_problem([MAX_DIMS + 1], expected=0, model="m")

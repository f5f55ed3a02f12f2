"""Access memories for this chat, the HTML routes (app/memory/scenes/web/pages.py): fragments for HTMX
without a page around them, refusals answered in place with a sentence, unknown scenes a 404."""

from __future__ import annotations

from app.memory.scenes.core.transfer import MAX_QUERY_CHARS, MAX_SUMMARY_CHARS
from app.memory.scenes.models import Scene
from tests.conftest import add_character, new_chat
from tests.support.scenes import stored_scene

HX = {"HX-Request": "true"}


def _scene(sugo, api) -> tuple[int, int]:
    chat_id = new_chat(api, [add_character(api, "Aria")["id"]])["id"]
    scene_id = stored_scene(
        sugo,
        chat_id,
        [("You", "Hold the rope."), ("Aria", "Got it.")],
        state="written",
        summary="They crossed the bridge.",
        participants=["Aria"],
    )
    return chat_id, scene_id


def test_the_page_and_its_search_fragment(sugo, api):
    chat_id, scene_id = _scene(sugo, api)
    page = api.get(f"/chats/{chat_id}/scenes")
    assert page.status_code == 200 and "<html" in page.text and f'id="scene-{scene_id}"' in page.text
    found = api.get(f"/chats/{chat_id}/scenes", params={"q": "BRÍDGE"}, headers=HX)
    assert found.status_code == 200 and "<html" not in found.text and "Scene 1" in found.text
    none = api.get(f"/chats/{chat_id}/scenes", params={"q": "boat"}, headers=HX)
    assert "scenes-no-match" in none.text and "Scene 1" not in none.text
    long = api.get(f"/chats/{chat_id}/scenes", params={"q": "x" * (MAX_QUERY_CHARS + 1)}, headers=HX)
    assert long.status_code == 400 and f"at most {MAX_QUERY_CHARS} characters" in long.text
    assert api.get("/chats/999999/scenes").status_code == 404


def test_scene_fragments_and_refusals(sugo, api):
    chat_id, scene_id = _scene(sugo, api)
    base = f"/chats/{chat_id}/scenes/{scene_id}"
    form = api.get(f"{base}/card", params={"edit": "true"}, headers=HX)
    assert "<html" not in form.text and 'name="summary"' in form.text
    too_long = api.post(f"{base}/summary", data={"summary": "x" * (MAX_SUMMARY_CHARS + 1)}, headers=HX)
    assert too_long.status_code == 200 and f"at most {MAX_SUMMARY_CHARS:,} characters" in too_long.text
    with sugo.session() as s:
        assert s.get(Scene, scene_id).summary == "They crossed the bridge."
    saved = api.post(f"{base}/summary", data={"summary": "  Rope bridge.  "}, headers=HX)
    assert "Manually edited" in saved.text and "Rope bridge." in saved.text
    messages = api.get(f"{base}/messages", headers=HX)
    assert "Hold the rope." in messages.text and "<html" not in messages.text
    assert api.get(f"/chats/{chat_id}/scenes/999999/card", headers=HX).status_code == 404
    other = new_chat(api, [add_character(api, "Kaito")["id"]])["id"]
    assert api.post(f"/chats/{other}/scenes/{scene_id}/delete-summary", headers=HX).status_code == 404


def test_import_without_a_file_or_with_a_bad_one_changes_nothing(sugo, api):
    chat_id, scene_id = _scene(sugo, api)
    none = api.post(f"/chats/{chat_id}/scenes/import", data={"replace": "true"}, headers=HX)
    assert none.status_code == 200 and "Choose a scenes file" in none.text
    bad = api.post(
        f"/chats/{chat_id}/scenes/import",
        files={"file": ("x.json", b"[1, 2")},
        data={"replace": "true"},
        headers=HX,
    )
    assert "This is not a JSON file. Nothing was changed." in bad.text
    with sugo.session() as s:
        assert s.get(Scene, scene_id).summary == "They crossed the bridge."


def test_reindex_embeds_the_chats_memories_again(sugo, api):
    """Scenes are ranked by the chat's memories: Reindex starts their rebuild, with the current model."""
    from tests.support.waiting import wait_for

    chat_id, _ = _scene(sugo, api)
    r = api.post(f"/chats/{chat_id}/scenes/reindex", headers=HX)
    assert r.status_code == 200 and "<html" not in r.text and "Reindexing" in r.text
    assert sugo.services.recall.rebuilds.get(chat_id) is not None
    wait_for(lambda: not sugo.services.recall.rebuilds.get(chat_id).running, timeout=60, what="the rebuild")
    assert api.post("/chats/999999/scenes/reindex", headers=HX).status_code == 404

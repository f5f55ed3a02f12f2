"""Character recollections (issue 27, acceptance 3's first part, with the group of
test_group_scene_access.py): each character present in a closed scene gets its own memory of it, written
by the helper (the test model server) from what that character saw; one copying four consecutive words
of a message its character could not see is dropped; each member's prompt shows only its own, under the
recalled scene; a change of who saw what makes a generated one due again, never an edited one."""

from __future__ import annotations

import json

from sqlmodel import Session, select

from app.memory.recall.jobs import embed_chat
from app.memory.scenes.models import SceneRecollection
from app.memory.scenes.prompt import store_window_start
from app.memory.scenes.recollections import LEAKED, save_by_hand, tasks, write_recollections
from tests.integration.test_group_scene_access import _fill, _group, _peek, _prepare

ARIA_HARBOUR = "I turned the silver compass over and over while Rowan trusted me with a secret word."
ARIA_TAVERN = "We planned the voyage over cider, sea charts spread across the table, everyone eager."
BRAM_LEAK = "I poured the cider while Cleo muttered that the harbour master is late again."


def _recollections(sugo) -> dict[tuple[int, int], SceneRecollection]:
    with Session(sugo.engine) as s:
        return {(r.scene_id, r.character_id): r for r in s.exec(select(SceneRecollection))}


def test_each_character_remembers_what_it_saw_and_a_leak_is_dropped(api, background_held, models):
    sugo = background_held
    chat_id, ids = _group(api, models)
    settings = {**api.get(f"/api/chats/{chat_id}").json()["settings"], "adv_recollections": True}
    assert api.put(f"/api/chats/{chat_id}/options", json={"settings": settings}).status_code == 200
    placed = _fill(sugo, chat_id, ids)
    # Cleo's line at the tavern is hidden from Bram, before the scenes are prepared.
    cleo_line = placed["tavern"][3]
    r = api.patch(f"/api/chats/{chat_id}/messages/{cleo_line}", json={"hidden_for": [ids["Bram"]]})
    assert r.status_code == 200, r.text
    scenes = _prepare(api, models, chat_id)
    tavern, harbour = scenes[0]["id"], scenes[1]["id"]

    models.requests.clear()
    models.script(
        json.dumps({"recollection": ARIA_HARBOUR}),
        json.dumps({"recollection": ARIA_TAVERN}),
        json.dumps({"recollection": BRAM_LEAK}),
    )
    assert write_recollections(sugo.services, chat_id, limit=10) == 3
    asked = [json.dumps(req.json["messages"], ensure_ascii=False) for req in models.requests]
    # Newest scene first; the narrator (Cleo) and the absent (Bram at the harbour) get none.
    assert len(asked) == 3 and "Character: Aria" in asked[0] and "Character: Bram" in asked[2]
    assert "harbour master is late" not in asked[2] and "harbour master is late" in asked[1]
    stored = _recollections(sugo)
    assert stored[(harbour, ids["Aria"])].text == ARIA_HARBOUR
    assert stored[(tavern, ids["Aria"])].text == ARIA_TAVERN
    leak = stored[(tavern, ids["Bram"])]
    assert leak.text == "" and leak.reason == LEAKED.format(name="Bram")
    assert set(stored) == {(harbour, ids["Aria"]), (tavern, ids["Aria"]), (tavern, ids["Bram"])}
    with Session(sugo.engine) as s:
        assert tasks(s, chat_id) == []  # all current: nothing is asked again

    # Each member's prompt: its own recollection under the recalled scene, nobody else's.
    with Session(sugo.engine) as s:
        store_window_start(s, chat_id, placed["together"][0])
        s.commit()
    embed_chat(sugo.services, chat_id)
    api.post(f"/api/chats/{chat_id}/messages", json={"content": "The silver compass, and the tavern plans?"})
    aria, bram, cleo = (_peek(api, chat_id, ids[n]) for n in ("Aria", "Bram", "Cleo"))
    assert f"Aria remembers: {ARIA_HARBOUR}" in aria and f"Aria remembers: {ARIA_TAVERN}" in aria
    assert "remembers:" not in bram and "remembers:" not in cleo
    # Under the summary, before the excerpt.
    block = aria[aria.index("### Scene 2") :]
    assert "Excerpt" not in block or block.index("Aria remembers") < block.index("Excerpt")

    # Who saw what changes in the harbour: Aria's generated one is due again; an edited one never is.
    hidden = {"hidden_for": [ids["Aria"], ids["Bram"]]}
    r = api.patch(f"/api/chats/{chat_id}/messages/{placed['harbour'][4]}", json=hidden)
    assert r.status_code == 200
    with Session(sugo.engine) as s:
        assert [(t.scene_id, t.character_id) for t in tasks(s, chat_id)] == [(harbour, ids["Aria"])]
        save_by_hand(s, harbour, ids["Aria"], "My own words about the compass.")
        s.commit()
        assert tasks(s, chat_id) == []
    # Saved by hand it is valid for the scene as it is now, and shown (the scene's recap itself waits
    # to be written again for her, a partial reader now, so the scene is not recalled for her).
    with Session(sugo.engine) as s:
        row = s.exec(select(SceneRecollection).where(SceneRecollection.scene_id == harbour)).one()
        assert row.manual and row.text == "My own words about the compass."


def test_recollections_stay_out_when_the_option_is_off(api, background_held, models):
    sugo = background_held
    chat_id, ids = _group(api, models)
    _fill(sugo, chat_id, ids)
    _prepare(api, models, chat_id)
    models.requests.clear()
    assert write_recollections(sugo.services, chat_id, limit=10) == 0
    assert models.requests == [] and _recollections(sugo) == {}


def test_export_import_and_branches_carry_recollections(api, background_held, models):
    sugo = background_held
    chat_id, ids = _group(api, models)
    settings = {**api.get(f"/api/chats/{chat_id}").json()["settings"], "adv_recollections": True}
    assert api.put(f"/api/chats/{chat_id}/options", json={"settings": settings}).status_code == 200
    placed = _fill(sugo, chat_id, ids)
    scenes = _prepare(api, models, chat_id)
    tavern, harbour = scenes[0]["id"], scenes[1]["id"]
    models.script(
        json.dumps({"recollection": ARIA_HARBOUR}),
        json.dumps({"recollection": ARIA_TAVERN}),
        json.dumps({"recollection": "I brought rope for the voyage."}),
    )
    assert write_recollections(sugo.services, chat_id, limit=10) == 3
    with Session(sugo.engine) as s:
        save_by_hand(s, tavern, ids["Bram"], "Rope, cider, and a late harbour master.")
        s.commit()

    exported = api.get(f"/api/chats/{chat_id}/scenes/export")
    assert exported.status_code == 200
    doc = json.loads(exported.content)
    assert doc["scenes"][1]["recollections"] == [
        {"character": "Aria", "text": ARIA_HARBOUR, "manual": False, "deleted": False}
    ]
    r = api.post(
        f"/api/chats/{chat_id}/scenes/import",
        params={"replace": "true"},
        files={"file": ("scenes.json", exported.content)},
    )
    assert r.status_code == 200, r.text
    assert r.json()["recollections_left_out"] == 0
    back = {(r.character_id, r.text, r.manual) for r in _recollections(sugo).values()}
    assert back == {
        (ids["Aria"], ARIA_HARBOUR, False),
        (ids["Aria"], ARIA_TAVERN, False),
        (ids["Bram"], "Rope, cider, and a late harbour master.", True),
    }
    with Session(sugo.engine) as s:
        assert tasks(s, chat_id) == []  # imported ones are current: nothing is written again

    # A branch after scene 2 keeps both scenes and their recollections.
    r = api.post(f"/api/chats/{chat_id}/messages/{placed['together'][1]}/branch")
    assert r.status_code == 201, r.text
    branch_id = r.json()["id"]
    branch_scenes = api.get(f"/api/chats/{branch_id}/scenes").json()
    assert len(branch_scenes) == 2
    kept = {
        (r.scene_id, r.character_id): r.text
        for r in _recollections(sugo).values()
        if r.scene_id in {sc["id"] for sc in branch_scenes}
    }
    assert kept[(branch_scenes[1]["id"], ids["Aria"])] == ARIA_HARBOUR and len(kept) == 3
    # A file naming a character this chat does not have: that recollection is left out, said so.
    doc["scenes"][1]["recollections"][0]["character"] = "Zed"
    r = api.post(
        f"/api/chats/{chat_id}/scenes/import",
        params={"replace": "true"},
        files={"file": ("scenes.json", json.dumps(doc).encode())},
    )
    assert r.status_code == 200 and r.json()["recollections_left_out"] == 1
    assert harbour not in {sc["id"] for sc in api.get(f"/api/chats/{chat_id}/scenes").json()}

"""Access memories for this chat (Advanced Memory, issue 14) over the JSON API, against real SQLite and
the test model server as the helper: numbered scenes with search, source messages, edited summaries
never rewritten, Delete summary kept deleted by the writer and the sweep, Delete all memories, and
export/import that changes nothing unless the whole file is right."""

from __future__ import annotations

import json

from sqlmodel import select

from app.chats.models import Message
from app.memory.scenes import jobs, writer
from app.memory.scenes.core.transfer import MAX_IMPORT_BYTES, MAX_SUMMARY_CHARS
from app.memory.scenes.models import Scene, SceneRecapPart, SceneState
from tests.conftest import add_character, add_connection, new_chat
from tests.support.scenes import stored_scene


def answer(summary: str, participants=("Aria",)) -> str:
    return json.dumps({"summary": summary, "participants": list(participants), "timeframe": ""})


def _chat(api, models, name: str = "Aria", *, on: bool = True) -> int:
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api, name)["id"]])["id"]  # message 1: the greeting
    if on:
        r = api.put(f"/api/chats/{chat_id}/options", json={"settings": {"advanced_memory": True}})
        assert r.status_code == 200, r.text
    return chat_id


def _get(sugo, scene_id: int) -> Scene | None:
    with sugo.session() as s:
        return s.get(Scene, scene_id)


def _rows(sugo, model, **where) -> list:
    with sugo.session() as s:
        stmt = select(model)
        for key, value in where.items():
            stmt = stmt.where(getattr(model, key) == value)
        return list(s.exec(stmt))


BRIDGE = [("You", "Aria, the bridge is out."), ("Aria", "*Aria ties the rope.* We cross here.")]
CAFE = [("You", "Coffee?"), ("Aria", "At the café by the river, yes.")]


def _two_scenes(sugo, chat_id: int) -> tuple[int, int]:
    first = stored_scene(
        sugo,
        chat_id,
        BRIDGE,
        state="written",
        summary="Aria and the user crossed the BRIDGE by rope.",
        participants=["Aria"],
        timeframe="dawn",
    )
    second = stored_scene(
        sugo,
        chat_id,
        CAFE,
        state="written",
        summary="They met at the Café Élan by the river.",
        participants=["Aria"],
    )
    return first, second


def test_scenes_are_listed_numbered_oldest_first_with_message_numbers(sugo, api, models):
    chat_id = _chat(api, models)
    first, second = _two_scenes(sugo, chat_id)
    r = api.get(f"/api/chats/{chat_id}/scenes")
    assert r.status_code == 200, r.text
    listed = r.json()
    assert [(s["id"], s["number"], s["first_number"], s["last_number"]) for s in listed] == [
        (first, 1, 2, 3),
        (second, 2, 4, 5),
    ]
    one = listed[0]
    assert (one["state"], one["timeframe"], one["participants"], one["enabled"], one["manual"]) == (
        "written",
        "dawn",
        ["Aria"],
        True,
        False,
    )
    assert one["first_at"] and one["last_at"] and one["check_who"] is False and one["reason"] == ""

    # a deleted first message: the scene starts at its next one
    with sugo.session() as s:
        s.delete(s.get(Message, _get(sugo, first).first_message_id))
        s.commit()
    assert [
        (s["first_number"], s["last_number"]) for s in api.get(f"/api/chats/{chat_id}/scenes").json()
    ] == [
        (2, 2),
        (3, 4),
    ]
    assert api.get("/api/chats/999999/scenes").status_code == 404


def test_search_is_case_and_accent_insensitive_and_keeps_numbers(sugo, api, models):
    chat_id = _chat(api, models)
    _, second = _two_scenes(sugo, chat_id)
    found = api.get(f"/api/chats/{chat_id}/scenes", params={"q": "cafe elan"}).json()
    assert [(s["id"], s["number"]) for s in found] == [(second, 2)]
    assert len(api.get(f"/api/chats/{chat_id}/scenes", params={"q": "the bridge"}).json()) == 1
    assert api.get(f"/api/chats/{chat_id}/scenes", params={"q": "dragon"}).json() == []
    assert api.get(f"/api/chats/{chat_id}/scenes", params={"q": ""}).status_code == 422
    assert api.get(f"/api/chats/{chat_id}/scenes", params={"q": "x" * 201}).status_code == 422


def test_a_scene_shows_its_source_messages_and_another_chats_scene_is_404(sugo, api, models):
    chat_id = _chat(api, models)
    first, _ = _two_scenes(sugo, chat_id)
    with sugo.session() as s:  # a hidden message is still shown, marked
        msg = s.get(Message, _get(sugo, first).last_message_id)
        msg.hidden = True
        s.add(msg)
        s.commit()
    r = api.get(f"/api/chats/{chat_id}/scenes/{first}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["number"] == 1 and body["summary"].startswith("Aria and the user")
    assert [(m["number"], m["name"], m["content"], m["hidden"]) for m in body["messages"]] == [
        (2, "You", "Aria, the bridge is out.", False),
        (3, "Aria", "*Aria ties the rope.* We cross here.", True),
    ]

    other = _chat(api, models, "Kaito")
    for method, path in (("get", ""), ("patch", ""), ("delete", "/summary")):
        kwargs = {"json": {"enabled": False}} if method == "patch" else {}
        r = getattr(api, method)(f"/api/chats/{other}/scenes/{first}{path}", **kwargs)
        assert r.status_code == 404, (method, r.text)
    assert api.get(f"/api/chats/{chat_id}/scenes/987654").status_code == 404
    assert _get(sugo, first).enabled is True and _get(sugo, first).state == "written"


def test_an_edited_summary_is_manual_and_never_claimed_by_the_writer(sugo, api, models):
    chat_id = _chat(api, models)
    scene_id = stored_scene(sugo, chat_id, BRIDGE, state="failed", reason="The helper gave no answer.")
    r = api.patch(
        f"/api/chats/{chat_id}/scenes/{scene_id}", json={"summary": "  My own recap of the bridge.  "}
    )
    assert r.status_code == 200, r.text
    assert (r.json()["summary"], r.json()["manual"], r.json()["state"], r.json()["reason"]) == (
        "My own recap of the bridge.",
        True,
        "written",
        "",
    )

    # the writer and the sweep leave it as the user wrote it, without calling the helper
    models.script(answer("The helper's recap."))
    assert writer.write_recap(sugo.services, scene_id) == "skipped: the recap was edited by hand"
    assert writer.write_waiting_recaps(sugo.services, chat_id) == 0
    jobs.sweep(sugo.services)
    assert not [r for r in models.requests if r.path.endswith("/chat/completions")]
    assert _get(sugo, scene_id).summary == "My own recap of the bridge."

    # a scene the writer holds when the user saves: the helper's recap is dropped
    held = stored_scene(sugo, chat_id, CAFE, state="writing")
    assert api.patch(f"/api/chats/{chat_id}/scenes/{held}", json={"summary": "Mine."}).status_code == 200
    assert _get(sugo, held).manual and _get(sugo, held).summary == "Mine."


def test_enabled_is_switched_and_bad_edits_are_refused(sugo, api, models):
    chat_id = _chat(api, models)
    first, _ = _two_scenes(sugo, chat_id)
    path = f"/api/chats/{chat_id}/scenes/{first}"
    r = api.patch(path, json={"enabled": False})
    assert r.status_code == 200 and r.json()["enabled"] is False and r.json()["manual"] is False
    assert api.patch(path, json={"enabled": True}).json()["enabled"] is True

    for body, status in (
        ({"summary": "   "}, 400),
        ({"summary": ""}, 400),
        ({"summary": "x" * (MAX_SUMMARY_CHARS + 1)}, 422),
        ({"enabled": "maybe"}, 422),
    ):
        r = api.patch(path, json=body)
        assert r.status_code == status, (body, r.text)
    assert "Delete summary" in api.patch(path, json={"summary": " "}).json()["detail"]
    scene = _get(sugo, first)
    assert scene.summary.startswith("Aria and the user") and not scene.manual and scene.enabled


def test_delete_summary_keeps_the_scene_and_routine_work_never_writes_it_again(sugo, api, models):
    chat_id = _chat(api, models)
    scene_id = stored_scene(
        sugo,
        chat_id,
        BRIDGE,
        state="failed",
        summary="An old recap.",
        participants=["Aria"],
        check_who=True,
        reason="The helper gave no answer.",
    )
    with sugo.session() as s:
        s.add(
            SceneRecapPart(scene_id=scene_id, part=1, first_message_id=1, last_message_id=2, summary="Part.")
        )
        s.commit()
    bounds = (_get(sugo, scene_id).first_message_id, _get(sugo, scene_id).last_message_id)
    r = api.delete(f"/api/chats/{chat_id}/scenes/{scene_id}/summary")
    assert r.status_code == 200, r.text
    assert (r.json()["state"], r.json()["summary"], r.json()["participants"], r.json()["check_who"]) == (
        "deleted",
        "",
        [],
        False,
    )
    scene = _get(sugo, scene_id)
    assert (scene.first_message_id, scene.last_message_id) == bounds
    assert _rows(sugo, SceneRecapPart, scene_id=scene_id) == []

    models.script(answer("A recap written again."))
    assert writer.write_recap(sugo.services, scene_id) == "skipped: already deleted"
    assert writer.write_waiting_recaps(sugo.services, chat_id) == 0
    jobs.sweep(sugo.services)
    assert not [r for r in models.requests if r.path.endswith("/chat/completions")]
    assert _get(sugo, scene_id).state == "deleted"

    # the user may write it again by hand
    r = api.patch(f"/api/chats/{chat_id}/scenes/{scene_id}", json={"summary": "Written by me."})
    assert (r.json()["state"], r.json()["manual"]) == ("written", True)
    assert api.delete(f"/api/chats/{chat_id}/scenes/987654/summary").status_code == 404


def test_delete_all_memories_keeps_the_chat_and_its_settings(sugo, api, models):
    chat_id = _chat(api, models)
    first, second = _two_scenes(sugo, chat_id)
    keep_chat = _chat(api, models, "Kaito")
    kept = stored_scene(sugo, keep_chat, [("You", "Elsewhere.")], state="written", summary="Elsewhere.")
    with sugo.session() as s:
        s.add(SceneRecapPart(scene_id=first, part=1, first_message_id=1, last_message_id=2, summary="Part."))
        s.add(SceneState(chat_id=chat_id, checked_through_id=5, paused=True))
        s.commit()
    before = api.get(f"/api/chats/{chat_id}").json()
    r = api.delete(f"/api/chats/{chat_id}/scenes")
    assert r.status_code == 200 and r.json() == {"deleted": 2}
    assert api.get(f"/api/chats/{chat_id}/scenes").json() == []
    assert _rows(sugo, SceneRecapPart) == [] and _rows(sugo, SceneState, chat_id=chat_id) == []
    after = api.get(f"/api/chats/{chat_id}")
    assert after.status_code == 200 and after.json()["settings"] == before["settings"]
    assert after.json()["settings"]["advanced_memory"] is True
    assert len(api.get(f"/api/chats/{chat_id}/messages").json()) == 5
    assert _get(sugo, kept) is not None  # another chat's scenes stay
    assert api.delete("/api/chats/999999/scenes").status_code == 404


def _export(api, chat_id: int) -> dict:
    r = api.get(f"/api/chats/{chat_id}/scenes/export")
    assert r.status_code == 200, r.text
    assert "attachment" in r.headers["content-disposition"]
    return r.json()


def _import(api, chat_id: int, doc, *, replace: bool = False, raw: bytes | None = None):
    body = raw if raw is not None else json.dumps(doc).encode()
    return api.post(
        f"/api/chats/{chat_id}/scenes/import",
        params={"replace": replace} if replace else None,
        files={"file": ("scenes.sugo.json", body, "application/json")},
    )


def _state(sugo, chat_id: int) -> list[tuple]:
    return [
        (s.first_message_id, s.last_message_id, s.state, s.summary, s.manual, s.enabled)
        for s in _rows(sugo, Scene, chat_id=chat_id)
    ]


def test_export_then_import_into_a_copy_of_the_chat_matches_by_number(sugo, api, models):
    chat_id = _chat(api, models)
    first, second = _two_scenes(sugo, chat_id)
    api.patch(f"/api/chats/{chat_id}/scenes/{first}", json={"summary": "Edited by hand.", "enabled": False})
    api.delete(f"/api/chats/{chat_id}/scenes/{second}/summary")
    doc = _export(api, chat_id)
    assert [(s["firstMessage"], s["lastMessage"], s["state"], s["manual"]) for s in doc["scenes"]] == [
        (2, 3, "written", True),
        (4, 5, "deleted", False),
    ]

    copy = _chat(api, models)  # the same messages, other ids
    for lines in (BRIDGE, CAFE):
        with sugo.session() as s:
            for name, text in lines:
                s.add(
                    Message(
                        chat_id=copy, role="user" if name == "You" else "assistant", name=name, content=text
                    )
                )
            s.commit()
    r = _import(api, copy, doc)
    assert r.status_code == 200, r.text
    assert r.json() == {"imported": 2, "replaced": 0, "recollections_left_out": 0}
    listed = api.get(f"/api/chats/{copy}/scenes").json()
    assert [
        (s["first_number"], s["last_number"], s["state"], s["summary"], s["manual"], s["enabled"])
        for s in listed
    ] == [
        (2, 3, "written", "Edited by hand.", True, False),
        (4, 5, "deleted", "", False, True),
    ]
    copy_ids = [m["id"] for m in api.get(f"/api/chats/{copy}/messages").json()]
    assert _rows(sugo, SceneState, chat_id=copy)[0].checked_through_id == copy_ids[4]

    # into a chat with scenes: refused unless replace, then the file's take their place
    r = _import(api, copy, doc)
    assert r.status_code == 409 and "replace" in r.json()["detail"]
    doc["scenes"] = doc["scenes"][:1]
    r = _import(api, copy, doc, replace=True)
    assert r.status_code == 200 and r.json() == {"imported": 1, "replaced": 2, "recollections_left_out": 0}
    assert len(api.get(f"/api/chats/{copy}/scenes").json()) == 1


def test_a_bad_import_changes_nothing(sugo, api, models):
    chat_id = _chat(api, models)
    _two_scenes(sugo, chat_id)
    good = _export(api, chat_id)
    other = _chat(api, models, "Kaito")
    stored_scene(
        sugo,
        other,
        [("You", "Different words."), ("Kaito", "Other text.")],
        state="written",
        summary="Theirs.",
    )
    before_chat, before_other = _state(sugo, chat_id), _state(sugo, other)

    def scenes(*changes: dict) -> dict:
        return {**good, "scenes": [{**good["scenes"][0], **c} for c in changes]}

    cases = [
        (None, b"not json", "not a JSON file"),
        ({"type": "something", "version": 1, "scenes": []}, None, "not a Sugo scenes file"),
        ({**good, "scenes": {}}, None, "no list of scenes"),
        (scenes({}, {"firstMessage": 3, "lastMessage": 4}), None, "overlap"),
        (scenes({"firstMessage": 4, "lastMessage": 2}), None, "ends (message 2) before it starts"),
        (scenes({"firstMessage": 0}), None, "firstMessage"),
        (scenes({"lastMessage": True}), None, "lastMessage"),
        (scenes({"summary": "x" * (MAX_SUMMARY_CHARS + 1)}), None, "at most 20,000"),
        (scenes({"participants": ["Aria", 3]}), None, "participants"),
        (scenes({"enabled": "yes"}), None, "enabled"),
        (scenes({"messagesHash": "short"}), None, "damaged"),
        # the second scene valid, the third not in this chat: the first two are not stored either
        (
            scenes(
                {},
                {"firstMessage": 4, "lastMessage": 5, "messagesHash": None},
                {"firstMessage": 6, "lastMessage": 9, "messagesHash": None},
            ),
            None,
            "messages 6–9 is not in this chat: it has 5 messages",
        ),
        (good, None, "made from other messages than this chat's"),
    ]
    for doc, raw, sentence in cases:
        target = other if doc is good else chat_id
        r = _import(api, target, doc, replace=True, raw=raw)
        assert r.status_code == 400, (sentence, r.text)
        assert sentence in r.json()["detail"], (sentence, r.json()["detail"])
        assert _state(sugo, chat_id) == before_chat and _state(sugo, other) == before_other
    r = _import(api, chat_id, None, replace=True, raw=b" " * (MAX_IMPORT_BYTES + 1))
    assert r.status_code == 400 and "MB" in r.json()["detail"]
    r = _import(api, chat_id, {**good, "scenes": [good["scenes"][0]] * 5001}, replace=True)
    assert r.status_code == 400 and "at most 5000" in r.json()["detail"]
    assert _state(sugo, chat_id) == before_chat and _state(sugo, other) == before_other
    assert _import(api, 999999, good).status_code == 404


def test_the_export_is_named_after_the_chat_in_any_script(api, models):
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]], name="小明")["id"]
    header = api.get(f"/api/chats/{chat_id}/scenes/export").headers["content-disposition"]
    assert header.startswith('attachment; filename="') and "%E5%B0%8F%E6%98%8E-scenes.sugo.json" in header
    assert _export(api, chat_id)["scenes"] == []

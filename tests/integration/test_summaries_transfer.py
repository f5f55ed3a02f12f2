"""Issue 12: Chat Summary entries travel with the chat. The export writes Marinara's `summaryEntries` and
`hideSummarisedMessages` into the header's chat_metadata (0-based line indexes); import reads them back
from Sugo's and Marinara-style files, leaving out a bad entry with a note, never failing; a branch
copies the entries that lie within it."""

from __future__ import annotations

import json

from tests.conftest import add_character, new_chat

ST_HEADER = {"user_name": "Rowan", "character_name": "Mirela", "create_date": "2024-10-18@20h52m17s"}


def _jsonl(lines) -> bytes:
    return ("\n".join(json.dumps(line) for line in lines) + "\n").encode()


def _line(i: int, *, user: bool = True) -> dict:
    return {
        "name": "Rowan" if user else "Mirela",
        "is_user": user,
        "is_system": False,
        "send_date": "2024-10-18T20:53:20.000Z",
        "mes": f"Line {i}.",
        "extra": {},
    }


def _chat(api, n: int = 12) -> tuple[dict, int, list[dict]]:
    char = add_character(api, "Mirela", first_mes="The lamp is lit.")
    chat = new_chat(api, [char["id"]])
    for i in range(2, n + 1):
        assert (
            api.post(f"/api/chats/{chat['id']}/messages", json={"content": f"Step {i}."}).status_code == 201
        )
    return char, chat["id"], api.get(f"/api/chats/{chat['id']}/messages").json()


def _summaries(api, chat_id: int) -> list[tuple]:
    return [
        (
            e["title"],
            e["content"],
            e["first_position"],
            e["last_position"],
            e["active"],
            e["origin"],
            e["awaiting_review"],
        )
        for e in api.get(f"/api/chats/{chat_id}/summaries").json()
    ]


def _import(api, raw: bytes, character_id: int | None = None) -> dict:
    data = {"character_id": character_id} if character_id else {}
    r = api.post("/api/chats/import", files={"file": ("c.jsonl", raw)}, data=data)
    assert r.status_code == 201, r.text
    return r.json()


def test_export_then_import_keeps_entries_ranges_and_active_flags(api, sugo):
    char, chat_id, messages = _chat(api)
    base = f"/api/chats/{chat_id}/summaries"
    api.post(
        base,
        json={"title": "Start", "content": "They light the lamp.", "scope": "range", "start": 1, "end": 4},
    )
    off = api.post(base, json={"content": "The storm.", "scope": "range", "start": 5, "end": 8}).json()
    api.patch(f"{base}/{off['id']}", json={"active": False})
    api.post(base, json={"title": "Now", "content": "They wait.", "scope": "last", "last": 2})
    # One held for review, as Generate leaves it under Review outputs.
    with sugo.engine.begin() as db:
        db.exec_driver_sql(
            "UPDATE summary_entry SET origin = 'model', awaiting_review = TRUE, active = FALSE WHERE title = 'Now'"
        )
    r = api.put(
        f"/api/chats/{chat_id}/options",
        json={
            "settings": {
                "summary_hide_messages": True,
                "summary_recent_tail": 3,
                "summary_collapse_hidden": False,
            }
        },
    )
    assert r.status_code == 200, r.text
    # A deleted message inside a range: the indexes are of the lines the file has.
    api.delete(f"/api/chats/{chat_id}/messages/{messages[2]['id']}")

    exported = api.get(f"/api/chats/{chat_id}/export").content
    meta = json.loads(exported.splitlines()[0])["chat_metadata"]
    assert meta["hideSummarisedMessages"] is True and meta["sugo"]["summaries"] == {
        "hide_messages": True,
        "collapse_hidden": False,
        "recent_tail": 3,
    }
    first = meta["summaryEntries"][0]
    assert {
        k: first[k]
        for k in (
            "kind",
            "origin",
            "title",
            "content",
            "enabled",
            "sourceMode",
            "rangeStartIndex",
            "rangeEndIndex",
        )
    } == {
        "kind": "rolling",
        "origin": "manual",
        "title": "Start",
        "content": "They light the lamp.",
        "enabled": True,
        "sourceMode": "range",
        "rangeStartIndex": 0,
        "rangeEndIndex": 2,
    }
    assert first["tokenEstimate"] > 0 and first["createdAt"].endswith("Z") and first["updatedAt"]
    assert [(e["rangeStartIndex"], e["rangeEndIndex"], e["enabled"]) for e in meta["summaryEntries"]] == [
        (0, 2, True),
        (3, 6, False),
        (9, 10, False),
    ]
    assert (
        meta["summaryEntries"][2]["awaitingReview"] is True
        and meta["summaryEntries"][2]["origin"] == "automated"
    )

    again = _import(api, exported, char["id"])
    assert again["notes"] == []
    assert (
        again["settings"]["summary_hide_messages"] is True and again["settings"]["summary_recent_tail"] == 3
    )
    assert again["settings"]["summary_collapse_hidden"] is False
    assert (
        _summaries(api, again["id"])
        == _summaries(api, chat_id)
        == [
            ("Start", "They light the lamp.", 1, 3, True, "user", False),
            ("", "The storm.", 4, 7, False, "user", False),
            ("Now", "They wait.", 10, 11, False, "model", True),
        ]
    )
    # The re-exported file says the same.
    second = json.loads(api.get(f"/api/chats/{again['id']}/export").content.splitlines()[0])["chat_metadata"]
    strip = lambda es: [{k: v for k, v in e.items() if k not in ("id", "createdAt", "updatedAt")} for e in es]  # noqa: E731
    assert strip(second["summaryEntries"]) == strip(meta["summaryEntries"])


def test_a_marinara_style_file_with_bad_entries_imports_the_good_ones_with_notes(api):
    add_character(api, "Mirela")
    entries = [
        {
            "id": "a1",
            "kind": "rolling",
            "origin": "automated",
            "title": "Arrival",
            "content": "Rowan washes ashore.",
            "enabled": True,
            "sourceMode": "range",
            "rangeStartIndex": 0,
            "rangeEndIndex": 2,
            "tokenEstimate": 5,
            "createdAt": "2025-01-02T10:00:00.000Z",
            "updatedAt": "2025-01-02T10:00:00.000Z",
        },
        {
            "id": "a2",
            "kind": "rolling",
            "origin": "manual",
            "title": "Off",
            "content": "The gulls.",
            "enabled": False,
            "sourceMode": "range",
            "rangeStartIndex": 3,
            "rangeEndIndex": 4,
        },
        {"id": "bad1", "content": "Past the end.", "rangeStartIndex": 4, "rangeEndIndex": 9},
        {"id": "bad2", "content": "  ", "rangeStartIndex": 0, "rangeEndIndex": 1},
        "not an entry",
        {"id": "bad3", "content": "Backwards.", "rangeStartIndex": 3, "rangeEndIndex": 1},
        {"id": "bad4", "content": "Only a count.", "sourceMode": "last", "messageCount": 3},
    ]
    header = {
        **ST_HEADER,
        "chat_metadata": {
            "summaryEntries": entries,
            "hideSummarisedMessages": True,
            "summary": "Old compiled text.",
        },
    }
    chat = _import(api, _jsonl([header, *(_line(i, user=i % 2 == 0) for i in range(5))]))
    assert chat["settings"]["summary_hide_messages"] is True
    assert _summaries(api, chat["id"]) == [
        ("Arrival", "Rowan washes ashore.", 1, 3, True, "model", False),
        ("Off", "The gulls.", 4, 5, False, "user", False),
    ]
    notes = chat["notes"]
    assert (
        "Summary entry 3 in the file covers messages 5–10, which do not fit the 5 messages imported; it was left out."
        in notes
    )
    assert "Summary entry 4 in the file has no text and was left out." in notes
    assert "Summary entry 5 in the file is not an entry and was left out." in notes
    assert any(n.startswith("Summary entry 6 ") for n in notes) and any(
        n.startswith("Summary entry 7 ") for n in notes
    )
    assert len(notes) == 5

    header = {**ST_HEADER, "chat_metadata": {"summaryEntries": {"not": "a list"}}}
    chat = _import(api, _jsonl([header, _line(0)]))
    assert chat["notes"] == ["The file's summary entries are not a list and were left out."]
    # Conversation chats have no Chat Summary entries: they are left out, said so.
    header = {
        **ST_HEADER,
        "chat_metadata": {"sugo": {"version": 1, "mode": "conversation"}, "summaryEntries": entries[:1]},
    }
    chat = _import(api, _jsonl([header, *(_line(i) for i in range(3))]))
    assert chat["mode"] == "conversation" and api.get(f"/api/chats/{chat['id']}/summaries").json() == []
    assert chat["notes"] == ["The file's summary entries were left out: Chat Summary is for Roleplay chats."]


def test_import_respects_the_entry_limit(api):
    add_character(api, "Mirela")
    entries = [
        {"content": f"Part {i}.", "rangeStartIndex": i % 5, "rangeEndIndex": i % 5} for i in range(1_002)
    ]
    chat = _import(
        api,
        _jsonl([{**ST_HEADER, "chat_metadata": {"summaryEntries": entries}}, *(_line(i) for i in range(5))]),
    )
    assert len(api.get(f"/api/chats/{chat['id']}/summaries").json()) == 1_000
    assert chat["notes"] == ["Only 1,000 summary entries fit a chat; the file's other 2 were left out."]


def test_a_branch_copies_the_entries_within_it_and_leaves_out_those_reaching_past(api):
    _, chat_id, messages = _chat(api)
    base = f"/api/chats/{chat_id}/summaries"
    api.post(base, json={"title": "A", "content": "First.", "scope": "range", "start": 1, "end": 3})
    api.post(base, json={"title": "B", "content": "Second.", "scope": "range", "start": 4, "end": 6})
    api.post(
        base, json={"title": "C", "content": "Crosses the point.", "scope": "range", "start": 6, "end": 9}
    )
    off = api.post(
        base, json={"title": "D", "content": "Off.", "scope": "range", "start": 2, "end": 2}
    ).json()
    api.patch(f"{base}/{off['id']}", json={"active": False})
    branch = api.post(f"/api/chats/{chat_id}/messages/{messages[6]['id']}/branch")
    assert branch.status_code == 201, branch.text
    branch_id = branch.json()["id"]
    assert _summaries(api, branch_id) == [
        ("A", "First.", 1, 3, True, "user", False),
        ("D", "Off.", 2, 2, False, "user", False),
        ("B", "Second.", 4, 6, True, "user", False),
    ]
    # The copies cover the branch's own messages, and leave the source's entries alone.
    new_ids = [m["id"] for m in api.get(f"/api/chats/{branch_id}/messages").json()]
    copied = api.get(f"/api/chats/{branch_id}/summaries").json()
    assert all(new_ids[0] <= e["first_message_id"] <= e["last_message_id"] <= new_ids[-1] for e in copied)
    assert len(api.get(base).json()) == 4


def test_the_chat_pages_branch_and_import_carry_entries_too(api):
    char, chat_id, messages = _chat(api, 6)
    api.post(
        f"/api/chats/{chat_id}/summaries",
        json={"title": "A", "content": "First.", "scope": "range", "start": 1, "end": 3},
    )
    r = api.post(f"/chats/{chat_id}/messages/{messages[4]['id']}/branch", headers={"HX-Request": "true"})
    assert r.status_code == 204, r.text
    branch_id = int(r.headers["HX-Redirect"].rsplit("/", 1)[1])
    assert _summaries(api, branch_id) == [("A", "First.", 1, 3, True, "user", False)]
    exported = api.get(f"/api/chats/{chat_id}/export").content
    r = api.post(
        "/chats/import",
        files={"file": ("c.jsonl", exported)},
        data={"character_id": str(char["id"])},
        headers={"HX-Request": "true"},
    )
    assert r.status_code in (200, 204), r.text
    imported_id = int(r.headers["HX-Redirect"].rsplit("/", 1)[1])
    assert _summaries(api, imported_id) == [("A", "First.", 1, 3, True, "user", False)]

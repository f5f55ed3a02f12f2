"""Issue 21, item 18: an imported chat is named after its file (cleaned, capped, numbered when the name is
taken), a Sugo export imported again keeps its exact name, and the answer says what arrived: "Imported 160
messages (3 summaries, 2 lorebooks attached)." over JSON and, for the page, in the notice the chat opens
with."""

from __future__ import annotations

import json
from urllib.parse import unquote

from tests.conftest import add_character, new_chat

ST_HEADER = {
    "user_name": "Rowan",
    "character_name": "Aria",
    "create_date": "2024-05-01@21h13m05s",
    "chat_metadata": {},
}


def _st_chat(n: int) -> bytes:
    lines = [ST_HEADER] + [
        {
            "name": "Rowan" if i % 2 else "Aria",
            "is_user": bool(i % 2),
            "is_system": False,
            "send_date": "2024-05-01T21:13:05.000Z",
            "mes": f"Line {i}.",
            "extra": {},
        }
        for i in range(n)
    ]
    return ("\n".join(json.dumps(line) for line in lines) + "\n").encode()


def _import(api, file_name: str, raw: bytes, **data) -> dict:
    r = api.post("/api/chats/import", files={"file": (file_name, raw)}, data=data)
    assert r.status_code == 201, r.text
    return r.json()


def test_a_sillytavern_chat_takes_its_files_name_and_a_second_import_is_numbered(api):
    add_character(api, "Aria")
    first = _import(api, "Aria - 2024-05-01@21h13m05s.jsonl", _st_chat(160))
    assert first["name"] == "Aria - 2024-05-01@21h13m05s"
    assert first["result"] == "Imported 160 messages."
    assert (first["imported_messages"], first["imported_summaries"], first["attached_lorebooks"]) == (
        160,
        0,
        [],
    )
    second = _import(api, "Aria - 2024-05-01@21h13m05s.jsonl", _st_chat(3))
    third = _import(api, "Aria - 2024-05-01@21h13m05s.jsonl", _st_chat(1))
    assert (second["name"], third["name"]) == (
        "Aria - 2024-05-01@21h13m05s (2)",
        "Aria - 2024-05-01@21h13m05s (3)",
    )
    assert third["result"] == "Imported 1 message."
    names = [c["name"] for c in api.get("/api/chats").json()]
    assert len(names) == len(set(names)) == 3


def test_a_file_name_is_cleaned_and_capped(api):
    add_character(api, "Aria")
    cases = {
        "C:\\Users\\me\\Downloads\\Night\r\n  talk\n.jsonl": "Night talk",  # sent as %0D%0A: read back
        'The "best" one.jsonl': 'The "best" one',
        "sneaky\u202egnp.exe.jsonl": "sneakygnp.exe",  # the bidi override that would show it reversed is gone
        "  spaced   out  .JSON": "spaced out",
        ".jsonl": ".jsonl",  # nothing but an extension is a name, not an extension
    }
    for file_name, name in cases.items():
        assert _import(api, file_name, _st_chat(2))["name"] == name, file_name
    long = _import(api, "x" * 400 + ".jsonl", _st_chat(2))["name"]
    assert len(long) == 200 and long.endswith("…")
    # Nothing usable in the file's name: the character and the time, as before.
    assert _import(api, "   .jsonl", _st_chat(2))["name"].startswith("Aria – imported ")


def test_a_sugo_export_keeps_its_exact_name_unless_the_file_was_renamed(api):
    char = add_character(api, "Aria")
    chat = new_chat(api, [char["id"]], name="Road trip: day 2/3")
    exported = api.get(f"/api/chats/{chat['id']}/export")
    disposition = exported.headers["content-disposition"]
    file_name = (
        unquote(disposition.split("filename*=UTF-8''")[-1])
        if "filename*" in disposition
        else disposition.split('"')[1]
    )
    assert file_name != "Road trip: day 2/3.jsonl"  # a download name cannot carry ":" or "/"
    assert (
        _import(api, file_name, exported.content, character_id=char["id"])["name"] == "Road trip: day 2/3 (2)"
    )
    assert (
        _import(api, "Coast, renamed.jsonl", exported.content, character_id=char["id"])["name"]
        == "Coast, renamed"
    )


def test_the_answer_counts_summaries_and_attached_lorebooks(api):
    char = add_character(api, "Mirela")
    chat = new_chat(api, [char["id"]])
    for i in range(2, 7):
        assert (
            api.post(f"/api/chats/{chat['id']}/messages", json={"content": f"Step {i}."}).status_code == 201
        )
    base = f"/api/chats/{chat['id']}/summaries"
    for start, end in ((1, 2), (3, 4), (5, 6)):
        assert (
            api.post(
                base,
                json={"content": f"From {start} to {end}.", "scope": "range", "start": start, "end": end},
            ).status_code
            == 201
        )
    books = [api.post("/api/lorebooks", json={"name": name}).json() for name in ("Coast", "Storms", "Gone")]
    assert (
        api.put(f"/api/chats/{chat['id']}/lorebooks", json={"book_ids": [b["id"] for b in books]}).status_code
        == 200
    )
    exported = api.get(f"/api/chats/{chat['id']}/export").content
    assert api.delete(f"/api/lorebooks/{books[2]['id']}").status_code == 204

    back = _import(api, "Mirela's trip.jsonl", exported, character_id=char["id"])
    assert back["result"] == "Imported 6 messages (3 summaries, 2 lorebooks attached)."
    assert (back["imported_messages"], back["imported_summaries"], back["attached_lorebooks"]) == (
        6,
        3,
        ["Coast", "Storms"],
    )
    assert back["notes"] == ["Lorebook “Gone” was not found; import it and attach it in Chat Settings."]

    # The page's import opens the chat and hands it the same sentence, first, with the notes after it.
    r = api.post(
        "/chats/import",
        files={"file": ("Mirela's trip.jsonl", exported)},
        data={"character_id": str(char["id"])},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 204 and r.headers["HX-Redirect"].startswith("/chats/")
    told = json.loads(r.headers["HX-Trigger"])["sugo:notices-next-page"]
    assert told == {
        "done": "Imported 6 messages (3 summaries, 2 lorebooks attached).",
        "notices": back["notes"],
    }
    assert (
        api.get(f"/api/chats/{r.headers['HX-Redirect'].rsplit('/', 1)[1]}").json()["name"]
        == "Mirela's trip (2)"
    )

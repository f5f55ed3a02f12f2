"""Numbers no row or column can hold are refused with a 4xx and write nothing; each case below was a
500 (an OverflowError or ValueError from SQLite or int()) found by the API fuzz pass or beside it."""

import json

import pytest

from tests.conftest import add_character, add_connection, new_chat

HUGE = 10**25  # past SQLite's 64-bit integers
SUPERSCRIPT_THREE = "\u00b3"  # str.isdigit() says yes, int() says no


def _total_rows(api) -> tuple[int, ...]:
    return tuple(
        len(api.get(p).json())
        for p in ("/api/chats", "/api/characters", "/api/lorebooks", "/api/connections")
    )


@pytest.mark.parametrize(
    "method, path",
    [
        ("DELETE", f"/api/personas/{HUGE}"),
        ("PUT", f"/api/chats/{HUGE}/options"),
        ("POST", f"/api/chats/{HUGE}/messages/1/branch"),
        ("DELETE", f"/api/chats/1/memories/{HUGE}"),
        ("GET", f"/api/lorebooks/{HUGE}"),
        ("GET", f"/chats/{HUGE}"),
    ],
)
def test_an_id_past_64_bits_in_the_path_is_not_found(api, method, path):
    r = api.request(method, path, json={} if method == "PUT" else None)
    assert r.status_code == 404, r.text


def test_an_id_past_64_bits_in_a_body_is_refused_and_nothing_is_written(api, models):
    add_connection(api, models)
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    book = api.post("/api/lorebooks", json={"name": "Eldoria"}).json()
    before = _total_rows(api)
    requests = [
        ("POST", "/api/chats", {"character_ids": [HUGE]}),
        ("POST", "/api/chats", {"character_ids": [char["id"]], "persona_id": HUGE}),
        ("PUT", f"/api/chats/{chat['id']}/options", {"persona_id": HUGE}),
        ("PUT", f"/api/chats/{chat['id']}/lorebooks", {"book_ids": [HUGE]}),
        ("POST", "/api/lorebooks/test", {"text": "dragon", "chat_id": HUGE}),
        ("POST", "/api/lorebooks/test", {"text": "dragon", "book_ids": [HUGE]}),
        ("POST", f"/api/lorebooks/{book['id']}/links", {"target": "chat", "target_id": HUGE}),
        (
            "POST",
            "/api/connections",
            {"name": "x", "base_url": models.base_url, "embedding_connection_id": HUGE},
        ),
    ]
    for method, path, body in requests:
        r = api.request(method, path, json=body)
        assert r.status_code == 422, (path, body, r.text)
    r = api.post("/api/chats/import", files={"file": ("c.jsonl", b"{}\n")}, data={"character_id": str(HUGE)})
    assert r.status_code == 422, r.text
    assert _total_rows(api) == before


@pytest.mark.parametrize("value", [f"connection:{SUPERSCRIPT_THREE}", f"connection:{HUGE}"])
def test_a_default_embedding_connection_that_names_no_row_is_refused(api, value):
    r = api.put("/api/connections/defaults", json={"embeddings": value})
    assert r.status_code == 400 and "Pick a built-in model" in r.json()["detail"]


@pytest.mark.parametrize(
    "entries",
    [
        {SUPERSCRIPT_THREE: {"key": ["dragon"], "content": "c"}},
        {str(HUGE): {"key": ["dragon"], "content": "c"}},
        {"0": {"uid": HUGE, "key": ["dragon"], "content": "c"}},
    ],
)
def test_a_world_info_entry_id_no_app_could_write_falls_back_to_its_place(api, entries):
    r = api.post("/api/lorebooks/import", files={"file": ("b.json", json.dumps({"entries": entries}))})
    assert r.status_code == 201, r.text
    book = api.get(f"/api/lorebooks/{r.json()['id']}").json()
    assert [e["content"] for e in book["entries"]] == ["c"]


def test_a_marinara_entry_id_no_app_could_write_falls_back_to_its_place(api):
    doc = {
        "type": "marinara_lorebook",
        "version": 1,
        "data": {
            "lorebook": {"name": "x"},
            "entries": [
                {"id": SUPERSCRIPT_THREE, "keys": ["a"], "content": "c"},
                {"id": HUGE, "keys": ["b"], "content": "d"},
            ],
        },
    }
    r = api.post("/api/lorebooks/import", files={"file": ("b.marinara.json", json.dumps(doc))})
    assert r.status_code == 201, r.text


def test_a_lorebook_number_past_what_a_file_can_hold_is_refused_with_the_reason(api):
    before = _total_rows(api)
    doc = {"entries": {"0": {"key": ["dragon"], "content": "c", "order": 1e30}}}
    r = api.post("/api/lorebooks/import", files={"file": ("b.json", json.dumps(doc))})
    assert r.status_code == 400 and "'order'" in r.json()["detail"], r.text
    assert _total_rows(api) == before


def test_a_chat_file_with_an_infinite_swipe_number_imports(api):
    char = add_character(api)
    lines = [
        {"user_name": "Rowan", "character_name": "Aria"},
        {"name": "Aria", "is_user": False, "mes": "hi", "swipes": ["hi", "hello"], "swipe_id": float("inf")},
    ]
    r = api.post(
        "/api/chats/import",
        files={"file": ("c.jsonl", "\n".join(json.dumps(x) for x in lines))},
        data={"character_id": str(char["id"])},
    )
    assert r.status_code == 201, r.text
    assert api.get(f"/api/chats/{r.json()['id']}/messages").json()[-1]["content"] == "hi"


@pytest.mark.parametrize("value", [SUPERSCRIPT_THREE, str(HUGE)])
def test_form_ids_that_name_no_row_are_left_out(api, value):
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    book = api.post("/api/lorebooks", json={"name": "Eldoria"}).json()
    r = api.post("/chats", data={"character_ids": [str(char["id"]), value], "name": "Picked"})
    assert r.status_code == 204, r.text
    r = api.post(f"/lorebooks/{book['id']}/links", data={"link": [f"chat:{value}", f"chat:{chat['id']}"]})
    assert r.status_code == 200, r.text
    r = api.post(
        f"/chats/{chat['id']}/settings",
        data={"name": "Talk", "lorebooks_shown": "1", "lorebook_ids": [value, str(book["id"])]},
    )
    assert r.status_code == 200, r.text
    assert api.get(f"/api/chats/{chat['id']}/lorebooks").json()["attached"] == [book["id"]]

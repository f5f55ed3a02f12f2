"""Issue 10 finding 8: size limits. A message is at most 256 KB (send, edit, import), a chat file
at most 100,000 messages, and a request body is refused while it arrives: a declared size over
the limit is answered before a byte of the body is read."""

import json
import socket

from sqlalchemy import text

from tests.conftest import add_character, new_chat

BIG = "x" * (256 * 1024 + 1)
TABLES = ("chat", "message")


def _rows(sugo) -> dict[str, int]:
    with sugo.engine.connect() as db:
        return {t: db.execute(text(f'select count(*) from "{t}"')).scalar_one() for t in TABLES}


def _limited(r, words: str = "messages are limited to 256 KB") -> None:
    assert r.status_code == 400, (r.status_code, r.text[:300])
    assert words in r.text, r.text[:300]


def test_a_message_over_256_kb_is_refused_on_send_edit_and_import(api, sugo):
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    message = api.post(f"/api/chats/{chat['id']}/messages", json={"content": "Hello."}).json()
    before = _rows(sugo)
    _limited(api.post(f"/api/chats/{chat['id']}/messages", json={"content": BIG}))
    _limited(api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": BIG}))
    _limited(api.patch(f"/api/chats/{chat['id']}/messages/{message['id']}", json={"content": BIG}))
    _limited(api.post(f"/chats/{chat['id']}/messages/{message['id']}/edit", data={"content": BIG}))
    lines = [{"user_name": "Rowan", "character_name": "Aria"}, {"name": "Aria", "is_user": False, "mes": BIG}]
    jsonl = "\n".join(json.dumps(line) for line in lines).encode()
    r = api.post(
        "/api/chats/import", files={"file": ("big.jsonl", jsonl)}, data={"character_id": str(char["id"])}
    )
    _limited(r, "Line 2: The message is 262,145 bytes; messages are limited to 256 KB")
    assert _rows(sugo) == before
    assert api.get(f"/api/chats/{chat['id']}/messages").json()[-1]["content"] == "Hello."


def test_a_chat_file_over_100000_messages_is_refused(api, sugo):
    char = add_character(api)
    before = _rows(sugo)
    line = json.dumps({"name": "Aria", "is_user": False, "mes": "hi"})
    jsonl = (
        "\n".join([json.dumps({"user_name": "Rowan", "character_name": "Aria"})] + [line] * 100_001)
    ).encode()
    r = api.post(
        "/api/chats/import", files={"file": ("long.jsonl", jsonl)}, data={"character_id": str(char["id"])}
    )
    _limited(r, "more than 100,000 messages")
    assert _rows(sugo) == before


def test_a_body_over_the_limit_is_refused_before_it_is_read(api, sugo):
    chat = new_chat(api, [add_character(api)["id"]])
    before = _rows(sugo)
    # Over the 2 MB limit for everything but uploads, sent in full: refused as it arrives.
    r = api.post(
        f"/api/chats/{chat['id']}/messages",
        content=json.dumps({"content": "y" * (3 * 1024 * 1024)}),
        headers={"Content-Type": "application/json"},
    )
    assert (
        r.status_code == 413 and "Requests other than file uploads are limited to 2 MB" in r.json()["detail"]
    ), r.text[:300]

    # Streamed without a declared size (chunked): counted as it arrives, refused once past the limit.
    def chunks():
        yield b'{"content": "'
        for _ in range(3 * 1024):
            yield b"z" * 1024
        yield b'"}'

    r = api.post(
        f"/api/chats/{chat['id']}/messages", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413 and "limited to 2 MB" in r.json()["detail"], r.text[:300]
    # An upload declaring 200 MB gets its answer at once, though not one byte of the body was sent.
    with socket.create_connection(("127.0.0.1", sugo.port), timeout=10) as conn:
        conn.sendall(
            b"POST /api/lorebooks/import HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 209715200\r\n\r\n"
        )
        answer = ""
        while "Uploads are limited" not in answer and (chunk := conn.recv(65536)):
            answer += chunk.decode("latin-1")
    assert answer.startswith("HTTP/1.1 413"), answer[:300]
    assert "Uploads are limited to 65 MB" in answer
    assert _rows(sugo) == before


def test_a_422_echoes_a_few_hundred_characters_of_a_big_invalid_body(api):
    """Issue 21 (19): a refused body came back whole in the 422 (up to the 2 MB body limit). Each error
    keeps its location and message; the value sent is cut to MAX_ECHOED_INPUT characters."""
    from app.web.api_common import MAX_ECHOED_INPUT

    story = "The lighthouse keeper's story. " * 60_000  # ~1.8 MB, under the body limit
    bodies = (
        {"name": "Aria", "description": [story]},  # a list where text goes: the list is the input
        {"description": story},  # no name: the whole object is the input
        story,  # not an object at all
    )
    for body in bodies:
        raw = json.dumps(body).encode()
        assert len(raw) > 1_500_000
        r = api.post("/api/characters", content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 422, r.text[:300]
        assert len(r.content) < 4_000, len(r.content)
        errors = r.json()["detail"]
        assert errors and all(e["loc"][0] == "body" and e["msg"] for e in errors), errors
        for e in errors:
            shown = e["input"] if isinstance(e["input"], str) else json.dumps(e["input"])
            assert len(shown) <= MAX_ECHOED_INPUT + 1, len(shown)
    # A small refused value comes back as it was sent.
    r = api.post("/api/characters", json={"name": 12})
    assert r.status_code == 422 and r.json()["detail"][0]["input"] == 12, r.text

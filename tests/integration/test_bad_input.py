"""Issue 10 finding 9: input that used to answer 500 is refused with a reason and writes nothing:
JSON nested 3,000 deep in every file Sugo imports, and pictures claiming more pixels than any
avatar needs (a few hundred bytes can claim 30000 x 30000)."""

import base64
import json
import struct
import zlib

from sqlalchemy import text

from tests.conftest import add_character, new_chat

DEEP = "[" * 3000 + "]" * 3000
TABLES = (
    "character",
    "persona",
    "chat",
    "message",
    "lorebook",
    "lorebook_entry",
    "memory_chunk",
    "memory_vector",
    "image",
)


def _rows(sugo) -> dict[str, int]:
    with sugo.engine.connect() as db:
        return {t: db.execute(text(f'select count(*) from "{t}"')).scalar_one() for t in TABLES}


def _png(width: int, height: int, extra_chunks: list[tuple[bytes, bytes]] = ()) -> bytes:
    """A PNG whose header claims width x height (its pixel data is a token few bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = [
        chunk(b"IHDR", ihdr),
        *(chunk(k, d) for k, d in extra_chunks),
        chunk(b"IDAT", zlib.compress(b"\0" * 64)),
    ]
    return b"\x89PNG\r\n\x1a\n" + b"".join(body) + chunk(b"IEND", b"")


def _refused(r, *words: str) -> None:
    assert r.status_code == 400, (r.status_code, r.text[:300])
    detail = r.json()["detail"]
    assert all(w in detail for w in words), detail
    assert "Traceback" not in detail and "RecursionError" not in detail


def test_json_nested_3000_deep_is_refused_by_every_import(api, sugo):
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    before = _rows(sugo)
    deep_card = (
        '{"spec": "chara_card_v2", "data": {"name": "Deep", "extensions": {"x": ' + DEEP + "}}}"
    ).encode()
    r = api.post("/api/characters/import", files={"file": ("deep.json", deep_card)})
    _refused(r, "nested more than 100 levels")
    chara = base64.b64encode(deep_card)
    r = api.post(
        "/api/characters/import", files={"file": ("deep.png", _png(2, 2, [(b"tEXt", b"chara\0" + chara)]))}
    )
    _refused(r, "nested more than 100 levels")
    r = api.post(
        "/api/lorebooks/import", files={"file": ("deep.json", ('{"entries": ' + DEEP + "}").encode())}
    )
    _refused(r, "nested more than 100 levels")
    line = '{"name": "Rowan", "is_user": true, "mes": "hi", "extra": ' + DEEP + "}"
    r = api.post(
        "/api/chats/import",
        files={"file": ("deep.jsonl", line.encode())},
        data={"character_id": str(char["id"])},
    )
    _refused(r, "nested more than 100 levels")
    memory = '{"type": "marinara_memory_recall", "version": 1, "data": ' + DEEP + "}"
    r = api.post(
        f"/api/chats/{chat['id']}/memories/import", files={"file": ("deep.marinara.json", memory.encode())}
    )
    _refused(r, "nested more than 100 levels")
    assert _rows(sugo) == before


def test_a_picture_claiming_too_many_pixels_is_refused(api, sugo):
    char = add_character(api)
    before = _rows(sugo)
    r = api.post(f"/api/characters/{char['id']}/avatar", files={"file": ("huge.png", _png(30000, 30000))})
    _refused(r, "too many pixels", "40 megapixels")
    r = api.post(f"/api/characters/{char['id']}/avatar", files={"file": ("big.png", _png(7000, 7000))})
    _refused(r, "7000 × 7000 pixels", "40 megapixels")
    card = base64.b64encode(
        json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Huge"}}).encode()
    )
    r = api.post(
        "/api/characters/import",
        files={"file": ("huge.png", _png(30000, 30000, [(b"tEXt", b"chara\0" + card)]))},
    )
    _refused(r, "too many pixels")
    assert _rows(sugo) == before
    ok = api.post(f"/api/characters/{char['id']}/avatar", files={"file": ("small.png", _png(64, 64))})
    assert ok.status_code == 200, ok.text

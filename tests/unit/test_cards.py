import base64
import copy
import io
import json
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from app.characters.core.cards import (
    MAX_CARD_BYTES,
    CardData,
    CardError,
    card_to_dict,
    card_to_json_bytes,
    read_card,
    read_png_text_chunks,
    write_card_png,
)

SERAPHINA = Path(__file__).parent.parent / "fixtures" / "default_Seraphina.png"

CONTENT_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "alternate_greetings",
    "tags",
    "creator",
    "character_version",
    "extensions",
    "character_book",
)

V2_CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mira",
        "description": "A lighthouse keeper. Ünïcödé ☂ and {{user}}",
        "personality": "calm",
        "scenario": "A storm night.",
        "first_mes": "*Mira looks up.* Hello, {{user}}.",
        "mes_example": "<START>\n{{char}}: Hi.",
        "creator_notes": "notes",
        "system_prompt": "{{original}} Stay in character.",
        "post_history_instructions": "",
        "alternate_greetings": ["Second hello", "Third hello"],
        "tags": ["fantasy", "sea"],
        "creator": "someone",
        "character_version": "1.2",
        "extensions": {
            "chub": {"full_path": "someone/mira", "id": 123, "related_lorebooks": []},
            "myapp_x": 1,
            "depth_prompt": {"prompt": "Mira fears thunder.", "depth": 4, "role": "system"},
            "talkativeness": "0.5",
            "fav": False,
            "world": "Lighthouse",
        },
        "character_book": {
            # No book-level "extensions": SillyTavern writes books like this.
            "name": "Lighthouse",
            "entries": [
                {
                    "id": 0,
                    "keys": ["lamp"],
                    "secondary_keys": [],
                    "content": "The lamp never goes out.",
                    "extensions": {"position": 1, "depth": 4, "weird_key": [1, 2]},
                    "enabled": True,
                    "insertion_order": 100,
                }
            ],
        },
        "group_only_greetings": [],
        "unknown_data_key": {"nested": [1, "two", None]},
    },
    "name": "Mira",
    "description": "A lighthouse keeper. Ünïcödé ☂ and {{user}}",
    "personality": "calm",
    "scenario": "A storm night.",
    "first_mes": "*Mira looks up.* Hello, {{user}}.",
    "mes_example": "<START>\n{{char}}: Hi.",
    "creatorcomment": "notes",
    "avatar": "none",
    "chat": "Mira - 2024-10-18@20h52m17s",
    "talkativeness": "0.5",
    "fav": False,
    "tags": ["fantasy", "sea"],
    "create_date": "2024-10-18 @20h 52m 17s 123ms",
    "unknown_top_key": 42,
}

V3_CARD = {
    "spec": "chara_card_v3",
    "spec_version": "3.0",
    "data": {
        "name": "Kestrel",
        "description": "A courier.",
        "personality": "",
        "scenario": "",
        "first_mes": "Package for you.",
        "mes_example": "",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],
        "creator": "",
        "character_version": "",
        "extensions": {"risuai": {"x": 1}},
        "group_only_greetings": ["Hi all"],
        "nickname": "Kes",
        "creator_notes_multilingual": {"en": "Notes", "fr": "Notes fr"},
        "source": ["https://example.invalid/kestrel"],
        "creation_date": 1700000000,
        "modification_date": 1700000500,
        "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
        "character_book": {
            "extensions": {},
            "entries": [
                {
                    "keys": ["route"],
                    "content": "@@depth 2\nThe route is secret.",
                    "extensions": {},
                    "enabled": True,
                    "insertion_order": 10,
                    "use_regex": False,
                    "id": "r1",
                }
            ],
        },
        "future_field": True,
    },
}


def _png_bytes(size: tuple[int, int] = (32, 48), fmt: str = "PNG", mode: str = "RGB") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, (200, 10, 10)).save(buf, format=fmt)
    return buf.getvalue()


def _chunk(ctype: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data))


def _with_text_chunk(png: bytes, keyword: str, text: str) -> bytes:
    """Insert a tEXt chunk right before IEND (the last 12 bytes of a plain PNG)."""
    return png[:-12] + _chunk(b"tEXt", keyword.encode() + b"\0" + text.encode("latin-1")) + png[-12:]


def _b64(obj: dict) -> str:
    return base64.b64encode(json.dumps(obj).encode("utf-8")).decode("ascii")


# --------------------------------------------------------------------------- Seraphina


def test_seraphina_png_reads_from_ccv3():
    card = read_card(SERAPHINA.read_bytes(), "default_Seraphina.png")
    assert card.name == "Seraphina"
    assert card.spec == "chara_card_v3"  # ccv3 chunk wins over chara
    assert card.spec_version == "3.0"
    assert isinstance(card.alternate_greetings, list)
    assert card.character_book is not None
    assert len(card.character_book["entries"]) > 0
    assert card.extensions["world"] == "Eldoria"
    assert card.creator == "OtisAlejandro"
    assert card.top_extra["chat"] == "Seraphina - 2023-5-12 @21h 32m 29s 224ms"
    assert card.data_extra == {"group_only_greetings": []}


def test_seraphina_image_has_card_chunks_removed():
    raw = SERAPHINA.read_bytes()
    assert {"chara", "ccv3"} <= set(read_png_text_chunks(raw))
    card = read_card(raw)
    assert card.image is not None
    assert read_png_text_chunks(card.image) == {}
    with Image.open(io.BytesIO(card.image)) as img:
        img.load()
        with Image.open(io.BytesIO(raw)) as original:
            assert img.size == original.size


def test_seraphina_export_equals_embedded_v3_json():
    raw = SERAPHINA.read_bytes()
    embedded = json.loads(base64.b64decode(read_png_text_chunks(raw)["ccv3"]))
    assert card_to_dict(read_card(raw), spec="v3") == embedded


def test_ccv3_preferred_over_chara():
    v2 = copy.deepcopy(V2_CARD)
    v2["data"]["name"] = "FromChara"
    v3 = copy.deepcopy(V3_CARD)
    png = _with_text_chunk(_with_text_chunk(_png_bytes(), "chara", _b64(v2)), "CCV3", _b64(v3))
    card = read_card(png)
    assert card.name == "Kestrel"


def test_broken_ccv3_falls_back_to_chara():
    png = _with_text_chunk(
        _with_text_chunk(_png_bytes(), "chara", _b64(V2_CARD)), "ccv3", "!!!not base64 json"
    )
    assert read_card(png).name == "Mira"


# --------------------------------------------------------------------------- JSON round trips


def test_v2_json_round_trip_keeps_everything():
    card = read_card(json.dumps(V2_CARD).encode())
    assert card.spec == "chara_card_v2"
    assert card.extensions["chub"] == {"full_path": "someone/mira", "id": 123, "related_lorebooks": []}
    assert card.extensions["myapp_x"] == 1
    assert card.data_extra == {"group_only_greetings": [], "unknown_data_key": {"nested": [1, "two", None]}}
    assert card.top_extra["unknown_top_key"] == 42
    assert "extensions" not in card.character_book
    assert card_to_dict(card, spec="v2") == V2_CARD


def test_v2_json_bytes_round_trip_with_bom():
    raw = b"\xef\xbb\xbf" + json.dumps(V2_CARD, ensure_ascii=False).encode("utf-8")
    out = card_to_json_bytes(read_card(raw, "mira.json"), spec="v2")
    assert "Ünïcödé ☂".encode() in out  # not \u-escaped
    assert json.loads(out) == V2_CARD


def test_v3_json_round_trip_keeps_everything():
    card = read_card(json.dumps(V3_CARD).encode())
    assert card.spec == "chara_card_v3"
    assert card.data_extra["nickname"] == "Kes"
    assert card.data_extra["future_field"] is True
    assert card_to_dict(card, spec="v3") == V3_CARD


def test_v2_exported_as_v3_gains_group_only_greetings():
    d = copy.deepcopy(V2_CARD)
    del d["data"]["group_only_greetings"]
    out = card_to_dict(read_card(json.dumps(d).encode()), spec="v3")
    assert out["spec"] == "chara_card_v3"
    assert out["spec_version"] == "3.0"
    assert out["data"]["group_only_greetings"] == []


def test_v3_exported_as_v2_keeps_v3_keys():
    out = card_to_dict(read_card(json.dumps(V3_CARD).encode()), spec="v2")
    assert out["spec"] == "chara_card_v2"
    assert out["spec_version"] == "2.0"
    for key in ("nickname", "assets", "source", "creation_date", "group_only_greetings", "future_field"):
        assert out["data"][key] == V3_CARD["data"][key]


def test_edited_name_refreshes_flat_copies():
    card = read_card(json.dumps(V2_CARD).encode())
    card.name = "Mira the Second"
    out = card_to_dict(card, spec="v2")
    assert out["data"]["name"] == "Mira the Second"
    assert out["name"] == "Mira the Second"
    assert out["creatorcomment"] == "notes"  # not a V1 field: untouched


def test_v1_card_is_upgraded():
    v1 = {"name": "Old", "description": "d", "first_mes": "hi", "creatorcomment": "cc", "avatar": "none"}
    card = read_card(json.dumps(v1).encode())
    assert card.spec == "v1"
    assert card.spec_version == ""
    assert card.personality == ""
    assert card.creator_notes == "cc"
    out = card_to_dict(card, spec="v2")
    assert out["spec"] == "chara_card_v2"
    assert out["spec_version"] == "2.0"
    assert out["data"]["name"] == "Old"
    assert out["data"]["first_mes"] == "hi"
    assert out["data"]["extensions"] == {}
    assert out["data"]["alternate_greetings"] == []
    assert out["avatar"] == "none"
    v3 = card_to_dict(card, spec="v3")
    assert v3["spec"] == "chara_card_v3"
    assert v3["data"]["group_only_greetings"] == []


def test_newer_v3_minor_version_accepted_with_warning(caplog):
    d = copy.deepcopy(V3_CARD)
    d["spec_version"] = "3.1"
    with caplog.at_level("WARNING"):
        card = read_card(json.dumps(d).encode())
    assert card.spec_version == "3.1"
    assert "3.1" in caplog.text
    assert card_to_dict(card, spec="v3") == d


def test_v4_refused():
    d = copy.deepcopy(V3_CARD)
    d["spec_version"] = "4.0"
    with pytest.raises(CardError, match="4.0"):
        read_card(json.dumps(d).encode())


# --------------------------------------------------------------------------- PNG writing


def test_png_round_trip():
    card = read_card(json.dumps(V2_CARD).encode())
    avatar = _png_bytes((64, 96))
    png = write_card_png(card, avatar)
    chunks = read_png_text_chunks(png)
    assert json.loads(base64.b64decode(chunks["chara"]))["spec"] == "chara_card_v2"
    assert json.loads(base64.b64decode(chunks["ccv3"]))["spec"] == "chara_card_v3"
    back = read_card(png)
    for name in CONTENT_FIELDS:
        assert getattr(back, name) == getattr(card, name), name
    assert back.top_extra == card.top_extra
    assert back.data_extra == card.data_extra
    with Image.open(io.BytesIO(png)) as img:
        img.load()
        assert img.size == (64, 96)


def test_png_rewrite_replaces_old_card_chunks():
    first = write_card_png(read_card(json.dumps(V3_CARD).encode()), _png_bytes())
    second = write_card_png(read_card(json.dumps(V2_CARD).encode()), first)
    assert second.count(b"tEXtchara") == 1
    assert second.count(b"tEXtccv3") == 1
    assert read_card(second).name == "Mira"


def test_png_without_image_gets_placeholder():
    png = write_card_png(read_card(json.dumps(V3_CARD).encode()), None)
    with Image.open(io.BytesIO(png)) as img:
        assert img.size == (400, 600)
    assert read_card(png).name == "Kestrel"


@pytest.mark.parametrize("fmt", ["JPEG", "WEBP", "GIF"])
def test_non_png_avatar_is_converted(fmt):
    avatar = _png_bytes((50, 70), fmt=fmt)
    assert not avatar.startswith(b"\x89PNG")
    png = write_card_png(read_card(json.dumps(V2_CARD).encode()), avatar)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(png)) as img:
        assert img.format == "PNG"
        assert img.size == (50, 70)
    assert read_card(png).name == "Mira"


def test_unreadable_avatar_refused():
    with pytest.raises(CardError, match="avatar image"):
        write_card_png(read_card(json.dumps(V2_CARD).encode()), b"GIF89a garbage")


# --------------------------------------------------------------------------- refusals


def test_truncated_png_refused():
    png = SERAPHINA.read_bytes()[:5000]
    with pytest.raises(CardError, match="This PNG file is damaged"):
        read_card(png)


def test_png_with_bad_crc_refused():
    png = bytearray(write_card_png(read_card(json.dumps(V2_CARD).encode()), None))
    png[45] ^= 0xFF  # inside the first chunk after IHDR
    with pytest.raises(CardError, match="damaged"):
        read_card(bytes(png))


def test_png_without_card_refused():
    with pytest.raises(CardError) as exc:
        read_card(_png_bytes())
    assert str(exc.value) == "This PNG has no character card inside (no 'chara' or 'ccv3' data)."


def test_json_without_name_refused():
    with pytest.raises(CardError, match="name"):
        read_card(json.dumps({"description": "no name"}).encode())
    d = copy.deepcopy(V2_CARD)
    d["data"]["name"] = ""
    with pytest.raises(CardError, match="name"):
        read_card(json.dumps(d).encode())


def test_data_not_object_refused():
    d = copy.deepcopy(V2_CARD)
    d["data"] = "oops"
    with pytest.raises(CardError, match="'data'"):
        read_card(json.dumps(d).encode())
    del d["data"]
    with pytest.raises(CardError, match="'data'"):
        read_card(json.dumps(d).encode())


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("alternate_greetings", ["ok", 3], "alternate_greetings"),
        ("alternate_greetings", "hello", "alternate_greetings"),
        ("extensions", [], "extensions"),
        ("description", {"a": 1}, "description"),
        ("character_book", "book", "character_book"),
    ],
)
def test_wrong_field_types_refused(key, value, field):
    d = copy.deepcopy(V2_CARD)
    d["data"][key] = value
    with pytest.raises(CardError, match=field):
        read_card(json.dumps(d).encode())


def test_twenty_megabyte_file_refused():
    raw = b"{" + b" " * (20 * 1024 * 1024 - 1)
    assert len(raw) > MAX_CARD_BYTES
    with pytest.raises(CardError) as exc:
        read_card(raw)
    assert str(exc.value) == "This file is 20.0 MB; cards larger than 12 MB are refused."


def test_not_json_refused():
    with pytest.raises(CardError) as exc:
        read_card(b"hello, I am a text file")
    assert str(exc.value) == "This file is neither a PNG character card nor card JSON."
    with pytest.raises(CardError, match="neither"):
        read_card(_png_bytes(fmt="JPEG"))


def test_empty_refused():
    with pytest.raises(CardError, match="empty"):
        read_card(b"")


def test_json_array_refused():
    with pytest.raises(CardError, match="object"):
        read_card(b"[1, 2]")


def test_carddata_defaults():
    card = CardData(spec="chara_card_v2", spec_version="2.0", name="X")
    out = card_to_dict(card, spec="v2")
    assert out == {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "X",
            "description": "",
            "personality": "",
            "scenario": "",
            "first_mes": "",
            "mes_example": "",
            "creator_notes": "",
            "system_prompt": "",
            "post_history_instructions": "",
            "creator": "",
            "character_version": "",
            "alternate_greetings": [],
            "tags": [],
            "extensions": {},
        },
    }

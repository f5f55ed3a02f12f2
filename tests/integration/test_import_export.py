"""Cards and chats in and out: a round trip loses no field; a refused file creates nothing."""

import json

from sqlalchemy import text

from app.characters.cards import read_card
from app.chats import st_jsonl
from tests.conftest import SERAPHINA_PNG, add_character, add_connection, new_chat, read_sse

V2_CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mirela",
        "description": "A lighthouse keeper on a cold coast. {{char}} talks to gulls.",
        "personality": "patient, dry humour",
        "scenario": "{{user}} washes up on the rocks below the lighthouse.",
        "first_mes": "*Mirela lowers her lantern.* You're alive, {{user}}.",
        "mes_example": "<START>\n{{user}}: Who are you?\n{{char}}: The one who keeps the light.",
        "creator_notes": "Slow burn.",
        "system_prompt": "{{original}} Keep replies under 200 words.",
        "post_history_instructions": "Remember the storm.",
        "alternate_greetings": ["*The gulls scream.* Up you get.", "Morning, drowned one."],
        "character_book": {"name": "Coast", "extensions": {}, "entries": [
            {"keys": ["lighthouse"], "content": "The lighthouse is 80 years old.", "extensions": {"position": 0},
             "enabled": True, "insertion_order": 100, "id": 0}]},
        "tags": ["drama", "coast"],
        "creator": "someone",
        "character_version": "1.2",
        "extensions": {"talkativeness": "0.5", "fav": False, "world": "Coast",
                       "depth_prompt": {"prompt": "It is raining.", "depth": 4, "role": "system"},
                       "chub": {"full_path": "someone/mirela", "id": 42}, "myapp_future_key": [1, 2, 3]},
        "group_only_greetings": [],
        "some_unknown_data_field": {"kept": True},
    },
    "creatorcomment": "legacy flat copy",
    "talkativeness": "0.5",
    "create_date": "2024-10-18 @20h 52m 17s 123ms",
}


def _counts(sugo) -> tuple[int, int]:
    with sugo.engine.connect() as db:
        return (db.execute(text("select count(*) from character")).scalar_one(),
                db.execute(text("select count(*) from image")).scalar_one())  # fmt: skip


class TestCards:
    def test_v2_json_round_trip_loses_no_field(self, api):
        raw = json.dumps(V2_CARD).encode()
        char = api.post("/api/characters/import", files={"file": ("mirela.json", raw, "application/json")}).json()
        assert char["alternate_greetings"] == V2_CARD["data"]["alternate_greetings"]
        exported = api.get(f"/api/characters/{char['id']}/export", params={"format": "json", "spec": "v2"}).json()
        assert exported == V2_CARD

    def test_png_card_round_trip_keeps_everything_and_the_picture(self, api):
        original = read_card(SERAPHINA_PNG.read_bytes())
        r = api.post("/api/characters/import", files={"file": ("Seraphina.png", SERAPHINA_PNG.read_bytes(), "image/png")})
        assert r.status_code == 201, r.text
        char = r.json()
        assert char["name"] == "Seraphina" and char["has_character_book"] and char["avatar_url"]
        png = api.get(f"/api/characters/{char['id']}/export", params={"format": "png"})
        assert png.headers["content-type"] == "image/png"
        again = read_card(png.content)
        for field in ("name", "description", "personality", "scenario", "first_mes", "mes_example", "creator_notes",
                      "system_prompt", "post_history_instructions", "alternate_greetings", "tags", "creator",
                      "character_version", "extensions", "character_book", "data_extra"):  # fmt: skip
            assert getattr(again, field) == getattr(original, field), field
        # Re-importing the exported PNG gives the same card again.
        r2 = api.post("/api/characters/import", files={"file": ("again.png", png.content, "image/png")}).json()
        a = api.get(f"/api/characters/{char['id']}/export", params={"format": "json", "spec": "v3"}).json()
        b = api.get(f"/api/characters/{r2['id']}/export", params={"format": "json", "spec": "v3"}).json()
        assert a == b

    def test_edit_keeps_extensions_and_unknown_fields(self, api):
        raw = json.dumps(V2_CARD).encode()
        char = api.post("/api/characters/import", files={"file": ("m.json", raw)}).json()
        body = {k: char[k] for k in ("name", "description", "personality", "scenario", "first_mes", "mes_example",
                                     "creator_notes", "system_prompt", "post_history_instructions",
                                     "alternate_greetings", "tags", "creator", "character_version")}  # fmt: skip
        body["description"] = "Changed."
        api.put(f"/api/characters/{char['id']}", json=body)
        exported = api.get(f"/api/characters/{char['id']}/export", params={"format": "json", "spec": "v2"}).json()
        assert exported["data"]["description"] == "Changed."
        assert exported["data"]["extensions"] == V2_CARD["data"]["extensions"]
        assert exported["data"]["some_unknown_data_field"] == {"kept": True}
        assert exported["creatorcomment"] == "legacy flat copy"

    def test_malformed_cards_are_refused_and_create_nothing(self, api, sugo):
        png = SERAPHINA_PNG.read_bytes()
        cases = [
            ("broken.png", png[: len(png) // 2], "damaged"),
            ("nocard.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "damaged"),
            ("nameless.json", json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {}}).encode(), "name"),
            ("big.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * (20 * 1024 * 1024), "20.0 MB"),
            ("text.json", b"this is not json", "neither"),
        ]
        before = _counts(sugo)
        for name, raw, words in cases:
            r = api.post("/api/characters/import", files={"file": (name, raw)})
            assert r.status_code == 400, (name, r.text)
            assert words in r.json()["detail"], (name, r.json())
        assert _counts(sugo) == before

    def test_a_png_without_a_card_says_so(self, api, sugo):
        from io import BytesIO

        from PIL import Image

        buf = BytesIO()
        Image.new("RGB", (8, 8)).save(buf, "PNG")
        r = api.post("/api/characters/import", files={"file": ("plain.png", buf.getvalue())})
        assert r.status_code == 400 and "no character card" in r.json()["detail"]
        assert _counts(sugo) == (0, 0)

    def test_import_page_shows_the_error_in_place(self, api):
        r = api.post("/characters/import", files={"file": ("x.json", b"{}")}, headers={"HX-Request": "true"})
        assert r.status_code == 400 and "toast" in r.text and "<html" not in r.text


ST_CHAT = [
    {"user_name": "Rowan", "character_name": "Mirela", "create_date": "2024-10-18@20h52m17s",
     "chat_metadata": {"note_prompt": "Rain.", "note_interval": 1, "note_depth": 4, "variables": {"mood": "calm"},
                       "timedWorldInfo": {"sticky": {}, "cooldown": {}}, "integrity": "abc-123", "future_key": 7}},
    {"name": "Mirela", "is_user": False, "is_system": False, "send_date": "October 18, 2024 8:52pm",
     "mes": "You're alive.", "swipe_id": 1, "swipes": ["Up you get.", "You're alive."],
     "swipe_info": [{"send_date": "October 18, 2024 8:52pm", "extra": {}}, {"send_date": "October 18, 2024 8:53pm"}],
     "extra": {"api": "openai", "model": "gpt-4o", "token_count": 5, "reasoning": "", "unknown_ext": {"x": 1}}},
    {"name": "Rowan", "is_user": True, "is_system": False, "send_date": 1729284800000, "mes": "Where am I?",
     "extra": {}},
    {"name": "Rowan", "is_user": True, "is_system": True, "send_date": "2024-10-18T21:00:00.000Z",
     "mes": "(ooc: hidden note)", "extra": {"type": "narrator"}, "force_avatar": "User Avatars/rowan.png"},
    {"name": "Mirela", "is_user": False, "is_system": False, "send_date": "2024-10-18 @21h 05m 10s 500ms",
     "mes": "On my rock.", "swipe_id": 0, "swipes": ["On my rock."], "gen_started": "2024-10-18T21:05:00.000Z",
     "gen_finished": "2024-10-18T21:05:10.000Z", "title": "", "extra": {"api": "openai"}},
]  # fmt: skip


def _jsonl(lines) -> bytes:
    return ("\n".join(json.dumps(line) for line in lines) + "\n").encode()


class TestStChats:
    def _import(self, api):
        add_character(api, "Mirela")
        r = api.post("/api/chats/import", files={"file": ("chat.jsonl", _jsonl(ST_CHAT))})
        assert r.status_code == 201, r.text
        return r.json()

    def test_round_trip_loses_no_field(self, api):
        chat = self._import(api)
        exported = api.get(f"/api/chats/{chat['id']}/export")
        lines = [json.loads(line) for line in exported.text.splitlines()]
        assert lines == ST_CHAT

    def test_imported_messages_keep_swipes_hidden_and_dates(self, api):
        chat = self._import(api)
        msgs = api.get(f"/api/chats/{chat['id']}/messages").json()
        assert [m["role"] for m in msgs] == ["assistant", "user", "user", "assistant"]
        assert msgs[0]["content"] == "You're alive." and msgs[0]["active_swipe"] == 1 and len(msgs[0]["swipes"]) == 2
        assert msgs[2]["hidden"] is True
        assert msgs[1]["created_at"].startswith("2024-10-18T20:53:20")

    def test_chat_made_in_sugo_exports_and_reimports_identically(self, api, models):
        add_connection(api, models)
        char = add_character(api, "Mirela", alternate_greetings=["Alt"])
        chat = new_chat(api, [char["id"]])
        read_sse(api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Hi *there*"}))
        read_sse(api.post(f"/api/chats/{chat['id']}/generate", json={"action": "swipe"}))
        first = api.get(f"/api/chats/{chat['id']}/export").content
        again = api.post("/api/chats/import", files={"file": ("c.jsonl", first)}, data={"character_id": char["id"]}).json()
        second = api.get(f"/api/chats/{again['id']}/export").content
        assert [json.loads(x) for x in first.splitlines()] == [json.loads(x) for x in second.splitlines()]
        parsed = st_jsonl.parse_chat_jsonl(first)
        assert [m.mes for m in parsed.messages][:2] == ["*Mirela waves.* Hello, {{user}}!", "Hi *there*"]
        assert parsed.messages[0].swipes == ["*Mirela waves.* Hello, {{user}}!", "Alt"]

    def test_bad_chat_files_are_refused_and_create_nothing(self, api, sugo):
        add_character(api, "Mirela")
        for raw, words in [(b"not json at all\n", "Line 1"), (_jsonl(ST_CHAT[:1]) + b"{broken\n", "Line 2")]:
            r = api.post("/api/chats/import", files={"file": ("c.jsonl", raw)})
            assert r.status_code == 400 and words in r.json()["detail"], r.text
        r = api.post("/api/chats/import", files={"file": ("c.jsonl", _jsonl([{**ST_CHAT[0], "character_name": "Nobody"}]))})
        assert r.status_code == 400 and "Nobody" in r.json()["detail"]
        with sugo.engine.connect() as db:
            assert db.execute(text("select count(*) from chat")).scalar_one() == 0
            assert db.execute(text("select count(*) from message")).scalar_one() == 0


def test_v2_only_png_imports_as_v2_and_exports_both_chunks(api):
    from app.characters.cards import read_png_text_chunks
    from tests.support.cards import v2_only_png

    raw = v2_only_png(SERAPHINA_PNG.read_bytes())
    assert set(read_png_text_chunks(raw)) >= {"chara"} and "ccv3" not in read_png_text_chunks(raw)
    char = api.post("/api/characters/import", files={"file": ("s.png", raw, "image/png")}).json()
    assert char["card_spec"] == "chara_card_v2" and char["name"] == "Seraphina"
    chunks = read_png_text_chunks(api.get(f"/api/characters/{char['id']}/export", params={"format": "png"}).content)
    assert {"chara", "ccv3"} <= set(chunks)

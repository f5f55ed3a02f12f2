"""Cards and chats in and out: a round trip loses no field; a refused file creates nothing."""

import json

from sqlalchemy import text

from app.characters.core.cards import read_card
from app.chats.core import st_jsonl
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
        "character_book": {
            "name": "Coast",
            "extensions": {},
            "entries": [
                {
                    "keys": ["lighthouse"],
                    "content": "The lighthouse is 80 years old.",
                    "extensions": {"position": 0},
                    "enabled": True,
                    "insertion_order": 100,
                    "id": 0,
                }
            ],
        },
        "tags": ["drama", "coast"],
        "creator": "someone",
        "character_version": "1.2",
        "extensions": {
            "talkativeness": "0.5",
            "fav": False,
            "world": "Coast",
            "depth_prompt": {"prompt": "It is raining.", "depth": 4, "role": "system"},
            "chub": {"full_path": "someone/mirela", "id": 42},
            "myapp_future_key": [1, 2, 3],
        },
        "group_only_greetings": [],
        "some_unknown_data_field": {"kept": True},
    },
    "creatorcomment": "legacy flat copy",
    "talkativeness": "0.5",
    "create_date": "2024-10-18 @20h 52m 17s 123ms",
}


def _counts(sugo) -> tuple[int, int]:
    with sugo.engine.connect() as db:
        return (
            db.execute(text("select count(*) from character")).scalar_one(),
            db.execute(text("select count(*) from image")).scalar_one(),
        )


class TestCards:
    def test_v2_json_round_trip_loses_no_field(self, api):
        raw = json.dumps(V2_CARD).encode()
        char = api.post(
            "/api/characters/import", files={"file": ("mirela.json", raw, "application/json")}
        ).json()
        assert char["alternate_greetings"] == V2_CARD["data"]["alternate_greetings"]
        exported = api.get(
            f"/api/characters/{char['id']}/export", params={"format": "json", "spec": "v2"}
        ).json()
        assert exported == V2_CARD

    def test_png_card_round_trip_keeps_everything_and_the_picture(self, api):
        original = read_card(SERAPHINA_PNG.read_bytes())
        r = api.post(
            "/api/characters/import",
            files={"file": ("Seraphina.png", SERAPHINA_PNG.read_bytes(), "image/png")},
        )
        assert r.status_code == 201, r.text
        char = r.json()
        assert char["name"] == "Seraphina" and char["has_character_book"] and char["avatar_url"]
        png = api.get(f"/api/characters/{char['id']}/export", params={"format": "png"})
        assert png.headers["content-type"] == "image/png"
        again = read_card(png.content)
        for field in (
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
            "data_extra",
        ):
            assert getattr(again, field) == getattr(original, field), field
        # Re-importing the exported PNG gives the same card again.
        r2 = api.post(
            "/api/characters/import", files={"file": ("again.png", png.content, "image/png")}
        ).json()
        a = api.get(f"/api/characters/{char['id']}/export", params={"format": "json", "spec": "v3"}).json()
        b = api.get(f"/api/characters/{r2['id']}/export", params={"format": "json", "spec": "v3"}).json()
        assert a == b

    def test_edit_keeps_extensions_and_unknown_fields(self, api):
        raw = json.dumps(V2_CARD).encode()
        char = api.post("/api/characters/import", files={"file": ("m.json", raw)}).json()
        body = {
            k: char[k]
            for k in (
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
            )
        }
        body["description"] = "Changed."
        api.put(f"/api/characters/{char['id']}", json=body)
        exported = api.get(
            f"/api/characters/{char['id']}/export", params={"format": "json", "spec": "v2"}
        ).json()
        assert exported["data"]["description"] == "Changed."
        assert exported["data"]["extensions"] == V2_CARD["data"]["extensions"]
        assert exported["data"]["some_unknown_data_field"] == {"kept": True}
        assert exported["creatorcomment"] == "legacy flat copy"

    def test_malformed_cards_are_refused_and_create_nothing(self, api, sugo):
        png = SERAPHINA_PNG.read_bytes()
        cases = [
            ("broken.png", png[: len(png) // 2], "damaged"),
            ("nocard.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "damaged"),
            (
                "nameless.json",
                json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {}}).encode(),
                "name",
            ),
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
    {
        "user_name": "Rowan",
        "character_name": "Mirela",
        "create_date": "2024-10-18@20h52m17s",
        "chat_metadata": {
            "note_prompt": "Rain.",
            "note_interval": 1,
            "note_depth": 4,
            "variables": {"mood": "calm"},
            "timedWorldInfo": {"sticky": {}, "cooldown": {}},
            "integrity": "abc-123",
            "future_key": 7,
        },
    },
    {
        "name": "Mirela",
        "is_user": False,
        "is_system": False,
        "send_date": "October 18, 2024 8:52pm",
        "mes": "You're alive.",
        "swipe_id": 1,
        "swipes": ["Up you get.", "You're alive."],
        "swipe_info": [
            {"send_date": "October 18, 2024 8:52pm", "extra": {}},
            {"send_date": "October 18, 2024 8:53pm"},
        ],
        "extra": {
            "api": "openai",
            "model": "gpt-4o",
            "token_count": 5,
            "reasoning": "",
            "unknown_ext": {"x": 1},
        },
    },
    {
        "name": "Rowan",
        "is_user": True,
        "is_system": False,
        "send_date": 1729284800000,
        "mes": "Where am I?",
        "extra": {},
    },
    {
        "name": "Rowan",
        "is_user": True,
        "is_system": True,
        "send_date": "2024-10-18T21:00:00.000Z",
        "mes": "(ooc: hidden note)",
        "extra": {"type": "narrator"},
        "force_avatar": "User Avatars/rowan.png",
    },
    {
        "name": "Mirela",
        "is_user": False,
        "is_system": False,
        "send_date": "2024-10-18 @21h 05m 10s 500ms",
        "mes": "On my rock.",
        "swipe_id": 0,
        "swipes": ["On my rock."],
        "gen_started": "2024-10-18T21:05:00.000Z",
        "gen_finished": "2024-10-18T21:05:10.000Z",
        "title": "",
        "extra": {"api": "openai"},
    },
]


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
        assert lines[1:] == ST_CHAT[1:]
        header, meta = lines[0], lines[0]["chat_metadata"]
        assert {k: v for k, v in header.items() if k != "chat_metadata"} == {
            k: v for k, v in ST_CHAT[0].items() if k != "chat_metadata"
        }
        # Every key SillyTavern wrote comes back; Sugo adds the Author's Note keys it fills and its own.
        assert {k: v for k, v in meta.items() if k in ST_CHAT[0]["chat_metadata"]} == ST_CHAT[0][
            "chat_metadata"
        ]
        assert set(meta) - set(ST_CHAT[0]["chat_metadata"]) == {
            "note_position",
            "note_role",
            "sugo",
            "summaryEntries",
            "hideSummarisedMessages",
            "daySummaries",
            "weekSummaries",
            "dayRolloverHour",
        }

    def test_imported_messages_keep_swipes_hidden_and_dates(self, api):
        chat = self._import(api)
        msgs = api.get(f"/api/chats/{chat['id']}/messages").json()
        assert [m["role"] for m in msgs] == ["assistant", "user", "user", "assistant"]
        assert (
            msgs[0]["content"] == "You're alive."
            and msgs[0]["active_swipe"] == 1
            and len(msgs[0]["swipes"]) == 2
        )
        assert msgs[2]["hidden"] is True
        assert msgs[1]["created_at"].startswith("2024-10-18T20:53:20")

    def test_chat_made_in_sugo_exports_and_reimports_identically(self, api, models):
        add_connection(api, models)
        char = add_character(api, "Mirela", alternate_greetings=["Alt"])
        chat = new_chat(api, [char["id"]])
        read_sse(
            api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Hi *there*"})
        )
        read_sse(api.post(f"/api/chats/{chat['id']}/generate", json={"action": "swipe"}))
        exported = api.get(f"/api/chats/{chat['id']}/export")
        first = exported.content
        file_name = exported.headers["content-disposition"].split('"')[1]  # the file as downloaded
        again = api.post(
            "/api/chats/import", files={"file": (file_name, first)}, data={"character_id": char["id"]}
        ).json()
        assert (
            again["name"] == chat["name"] + " (2)"
        )  # the name inside the file, numbered: the first one is there
        second = api.get(f"/api/chats/{again['id']}/export").content
        renamed = [json.loads(x) for x in second.splitlines()]
        renamed[0]["chat_metadata"]["sugo"]["name"] = chat["name"]
        assert [json.loads(x) for x in first.splitlines()] == renamed
        parsed = st_jsonl.parse_chat_jsonl(first)
        assert [m.mes for m in parsed.messages][:2] == ["*Mirela waves.* Hello, {{user}}!", "Hi *there*"]
        assert parsed.messages[0].swipes == ["*Mirela waves.* Hello, {{user}}!", "Alt"]

    def test_bad_chat_files_are_refused_and_create_nothing(self, api, sugo):
        add_character(api, "Mirela")
        for raw, words in [(b"not json at all\n", "Line 1"), (_jsonl(ST_CHAT[:1]) + b"{broken\n", "Line 2")]:
            r = api.post("/api/chats/import", files={"file": ("c.jsonl", raw)})
            assert r.status_code == 400 and words in r.json()["detail"], r.text
        r = api.post(
            "/api/chats/import",
            files={"file": ("c.jsonl", _jsonl([{**ST_CHAT[0], "character_name": "Nobody"}]))},
        )
        assert r.status_code == 400 and "Nobody" in r.json()["detail"]
        with sugo.engine.connect() as db:
            assert db.execute(text("select count(*) from chat")).scalar_one() == 0
            assert db.execute(text("select count(*) from message")).scalar_one() == 0


def test_v2_only_png_imports_as_v2_and_exports_both_chunks(api):
    from app.characters.core.cards import read_png_text_chunks
    from tests.support.cards import v2_only_png

    raw = v2_only_png(SERAPHINA_PNG.read_bytes())
    assert set(read_png_text_chunks(raw)) >= {"chara"} and "ccv3" not in read_png_text_chunks(raw)
    char = api.post("/api/characters/import", files={"file": ("s.png", raw, "image/png")}).json()
    assert char["card_spec"] == "chara_card_v2" and char["name"] == "Seraphina"
    chunks = read_png_text_chunks(
        api.get(f"/api/characters/{char['id']}/export", params={"format": "png"}).content
    )
    assert {"chara", "ccv3"} <= set(chunks)


def _settings_round_trip_chat(api):
    char = add_character(api, "Mirela")
    chat = new_chat(api, [char["id"]])
    books = [api.post("/api/lorebooks", json={"name": name}).json() for name in ("Coast", "Storms")]
    assert (
        api.put(f"/api/chats/{chat['id']}/lorebooks", json={"book_ids": [b["id"] for b in books]}).status_code
        == 200
    )
    settings = {
        "context_note": "Rain taps the glass.",
        "context_note_depth": 2,
        "context_note_role": "user",
        "recent_message_limit": 40,
        "memory_recall": True,
        "time_awareness": True,
        "temperature": 0.7,
    }
    r = api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings, "mode": "conversation"})
    assert r.status_code == 200, r.text
    return char, chat, books


class TestChatSettingsInChatFiles:
    def test_round_trip_keeps_note_lorebooks_limit_and_recall(self, api):
        char, chat, books = _settings_round_trip_chat(api)
        download = api.get(f"/api/chats/{chat['id']}/export")
        exported, file_name = download.content, download.headers["content-disposition"].split('"')[1]
        meta = json.loads(exported.splitlines()[0])["chat_metadata"]
        # Where SillyTavern reads them: the Author's Note and the chat lorebook (one name).
        assert meta["note_prompt"] == "Rain taps the glass."
        assert (meta["note_depth"], meta["note_role"], meta["note_position"], meta["note_interval"]) == (
            2,
            1,
            1,
            1,
        )
        assert meta["world_info"] == "Coast"
        assert meta["sugo"]["lorebooks"] == ["Coast", "Storms"]

        again = api.post(
            "/api/chats/import", files={"file": (file_name, exported)}, data={"character_id": char["id"]}
        )
        assert again.status_code == 201, again.text
        back = again.json()
        assert back["notes"] == [] and back["name"] == chat["name"] + " (2)"
        s = back["settings"]
        assert s["context_note"] == "Rain taps the glass."
        assert (s["context_note_depth"], s["context_note_role"]) == (2, "user")
        assert s["recent_message_limit"] == 40 and s["memory_recall"] is True
        assert s["time_awareness"] is True and s["temperature"] == 0.7 and back["mode"] == "conversation"
        attached = api.get(f"/api/chats/{back['id']}/lorebooks").json()["attached"]
        assert sorted(attached) == sorted(b["id"] for b in books)
        # And out again: the same header.
        second = api.get(f"/api/chats/{back['id']}/export").content
        assert json.loads(second.splitlines()[0])["chat_metadata"] == {
            **meta,
            "sugo": {**meta["sugo"], "name": back["name"]},
        }

    def test_lorebook_not_found_is_named_and_the_rest_imports(self, api):
        char, chat, books = _settings_round_trip_chat(api)
        exported = api.get(f"/api/chats/{chat['id']}/export").content
        assert api.delete(f"/api/lorebooks/{books[1]['id']}").status_code == 204
        back = api.post(
            "/api/chats/import", files={"file": ("c.jsonl", exported)}, data={"character_id": char["id"]}
        )
        assert back.status_code == 201, back.text
        assert back.json()["notes"] == [
            "Lorebook “Storms” was not found; import it and attach it in Chat Settings."
        ]
        assert api.get(f"/api/chats/{back.json()['id']}/lorebooks").json()["attached"] == [books[0]["id"]]
        assert back.json()["settings"]["context_note"] == "Rain taps the glass."


def test_sillytavern_file_with_authors_note_and_chat_lorebook(api):
    """A file SillyTavern wrote: no `sugo` key, only note_* and world_info."""
    add_character(api, "Mirela")
    book = api.post("/api/lorebooks", json={"name": "Eldoria"}).json()
    header = {
        "user_name": "Rowan",
        "character_name": "Mirela",
        "create_date": "2024-10-18@20h52m17s",
        "chat_metadata": {
            "note_prompt": "[Style: terse.]",
            "note_interval": 1,
            "note_position": 1,
            "note_depth": 6,
            "note_role": 2,
            "world_info": "Eldoria",
        },
    }
    lines = [header, ST_CHAT[1]]
    r = api.post("/api/chats/import", files={"file": ("st.jsonl", _jsonl(lines))})
    assert r.status_code == 201, r.text
    chat = r.json()
    assert chat["notes"] == []
    s = chat["settings"]
    assert (s["context_note"], s["context_note_depth"], s["context_note_role"]) == (
        "[Style: terse.]",
        6,
        "assistant",
    )
    assert api.get(f"/api/chats/{chat['id']}/lorebooks").json()["attached"] == [book["id"]]
    # The note is sent where SillyTavern put it: 6 messages above the newest, as the assistant.
    prompt = api.get(f"/api/chats/{chat['id']}/prompt").json()
    assert any(b["text"] == "[Style: terse.]" and b["role"] == "assistant" for b in prompt["blocks"])


def test_bad_metadata_values_are_left_out_with_a_note(api):
    add_character(api, "Mirela")
    header = {
        "user_name": "Rowan",
        "character_name": "Mirela",
        "chat_metadata": {
            "note_prompt": "Fog.",
            "note_depth": "deep",
            "note_role": 7,
            "note_position": 0,
            "world_info": ["Nowhere", 3],
        },
    }
    r = api.post("/api/chats/import", files={"file": ("st.jsonl", _jsonl([header, ST_CHAT[1]]))})
    assert r.status_code == 201, r.text
    s, notes = r.json()["settings"], r.json()["notes"]
    assert (s["context_note"], s["context_note_depth"], s["context_note_role"]) == ("Fog.", 4, "system")
    assert any("depth" in n for n in notes) and any("role" in n for n in notes)
    assert any("Lorebook “Nowhere” was not found" in n for n in notes)
    sugo = {
        "sugo": {
            "version": 1,
            "recent_message_limit": 5,
            "recall": {"enabled": "yes"},
            "mode": "chaos",
            "context_note": {"text": 12},
            "lorebooks": "not a list",
        }
    }
    r = api.post(
        "/api/chats/import",
        files={"file": ("s.jsonl", _jsonl([{**header, "chat_metadata": sugo}, ST_CHAT[1]]))},
    )
    assert r.status_code == 201, r.text
    assert (
        r.json()["settings"]["recent_message_limit"] == 80 and r.json()["settings"]["memory_recall"] is None
    )
    assert r.json()["mode"] == "roleplay"
    assert any("recent_message_limit" in n and "recall.enabled" in n for n in r.json()["notes"])
    r = api.post(
        "/api/chats/import",
        files={"file": ("n.jsonl", _jsonl([{**header, "chat_metadata": "x"}, ST_CHAT[1]]))},
    )
    assert r.status_code == 201 and r.json()["notes"]

"""SillyTavern groups in and out (issue 27, acceptance 2): a group file and its chats in both layouts
(the header line SillyTavern writes since PR #4805, and the older header-less chat whose metadata
lives in the group file's `past_metadata`), members found by avatar key, `original_avatar` and
`extra.gen_id` kept; the chat and its group export back to SillyTavern's shape."""

import json
from pathlib import Path

from tests.conftest import add_character

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NEW_CHAT = "2025-01-02@10h00m00s"
OLD_CHAT = "2024-12-31@09h00m00s"

GROUP = {
    "id": "1735812000000",
    "name": "Tavern night",
    "members": ["default_Seraphina.png", "Kaito.png", "Mira.png"],
    "disabled_members": ["Mira.png"],
    "activation_strategy": 3,
    "generation_mode": 1,
    "generation_mode_join_prefix": "[<FIELDNAME> of {{char}}: ",
    "generation_mode_join_suffix": "]",
    "allow_self_responses": True,
    "auto_mode_delay": 7,
    "hideMutedSprites": False,
    "avatar_url": "",
    "fav": True,
    "chat_id": NEW_CHAT,
    "chats": [OLD_CHAT, NEW_CHAT],
    "past_metadata": {OLD_CHAT: {"note_prompt": "Rain all night.", "note_depth": 2}},
}


def _line(name, mes, *, user=False, avatar=None, gen_id=None, date="2025-01-02T10:00:00.000Z"):
    line = {"name": name, "is_user": user, "is_system": False, "send_date": date, "mes": mes, "extra": {}}
    if avatar:
        line["original_avatar"] = avatar
        line["force_avatar"] = f"/thumbnail?type=avatar&file={avatar}"
    if gen_id:
        line["extra"]["gen_id"] = gen_id
    return line


def _jsonl(lines, header=None) -> bytes:
    rows = ([header] if header else []) + lines
    return "\n".join(json.dumps(r) for r in rows).encode()


NEW_LINES = [
    _line("Rowan", "Evening, all.", user=True),
    _line("Seraphina", "Welcome, traveller.", avatar="default_Seraphina.png", gen_id=1735812001000),
    _line("Kaito", "Another round!", avatar="Kaito.png", gen_id=1735812001000),
]
OLD_LINES = [
    _line("Rowan", "Is anyone awake?", user=True, date="2024-12-31T09:00:00.000Z"),
    _line("Mira", "Only me.", avatar="Mira.png", date="2024-12-31T09:00:05.000Z"),
]


def _members(api):
    seraphina = api.post(
        "/api/characters/import",
        files={"file": ("default_Seraphina.png", (FIXTURES / "default_Seraphina.png").read_bytes())},
    ).json()
    return {
        "Seraphina": seraphina["id"],
        "Kaito": add_character(api, "Kaito")["id"],
        "Mira": add_character(api, "Mira")["id"],
    }


def _import(api, group=GROUP, chats=None):
    chats = (
        chats
        if chats is not None
        else [
            (
                f"{NEW_CHAT}.jsonl",
                _jsonl(
                    NEW_LINES,
                    {
                        "chat_metadata": {"note_prompt": "Candles gutter."},
                        "user_name": "unused",
                        "character_name": "unused",
                    },
                ),
            ),
            (f"{OLD_CHAT}.jsonl", _jsonl(OLD_LINES)),
        ]
    )
    files = [("group", ("1735812000000.json", json.dumps(group).encode()))]
    files += [("chats", (name, raw)) for name, raw in chats]
    return api.post("/api/chats/import-group", files=files)


def test_a_group_and_its_chats_in_both_layouts_come_in_with_members_settings_and_speakers(api):
    ids = _members(api)
    r = _import(api)
    assert r.status_code == 201, r.text
    new, old = r.json()
    assert new["name"] == f"Tavern night – {NEW_CHAT}" and old["name"] == f"Tavern night – {OLD_CHAT}"
    assert [(m["name"], m["muted"]) for m in new["members"]] == [
        ("Seraphina", False),
        ("Kaito", False),
        ("Mira", True),
    ]
    s = new["settings"]
    assert (s["reply_order"], s["group_cards"], s["allow_self_responses"]) == ("pooled", "join_unmuted", True)
    assert (s["group_join_prefix"], s["group_join_suffix"]) == ("[<FIELDNAME> of {{char}}: ", "]")
    # Each chat's own metadata: the header's (new layout), the group file's past_metadata (old).
    assert s["context_note"] == "Candles gutter."
    assert old["settings"]["context_note"] == "Rain all night." and old["settings"]["context_note_depth"] == 2

    msgs = api.get(f"/api/chats/{new['id']}/messages").json()
    assert [(m["name"], m["character_id"]) for m in msgs] == [
        ("Rowan", None),
        ("Seraphina", ids["Seraphina"]),
        ("Kaito", ids["Kaito"]),
    ]
    old_msgs = api.get(f"/api/chats/{old['id']}/messages").json()
    assert old_msgs[-1]["character_id"] == ids["Mira"]


def test_the_group_chat_exports_back_to_sillytaverns_shape(api):
    ids = _members(api)
    new = _import(api).json()[0]
    lines = [json.loads(x) for x in api.get(f"/api/chats/{new['id']}/export").text.splitlines()]
    header, body = lines[0], lines[1:]
    assert header["user_name"] == header["character_name"] == "unused"
    assert header["chat_metadata"]["note_prompt"] == "Candles gutter."
    assert [x.get("original_avatar") for x in body] == [None, "default_Seraphina.png", "Kaito.png"]
    assert [x["extra"].get("gen_id") for x in body] == [None, 1735812001000, 1735812001000]

    group = api.get(f"/api/chats/{new['id']}/export-group").json()
    assert group["members"] == GROUP["members"] and group["disabled_members"] == ["Mira.png"]
    assert (group["activation_strategy"], group["generation_mode"], group["allow_self_responses"]) == (
        3,
        1,
        True,
    )
    assert group["generation_mode_join_prefix"] == GROUP["generation_mode_join_prefix"]
    assert group["id"] == GROUP["id"] and group["fav"] is True and group["auto_mode_delay"] == 7
    assert "past_metadata" not in group and group["chat_id"] in group["chats"]

    # What comes out goes back in: the exported pair imports as the same group.
    again = _import(
        api,
        group=group,
        chats=[(f"{group['chat_id']}.jsonl", api.get(f"/api/chats/{new['id']}/export").content)],
    )
    assert again.status_code == 201, again.text
    copy = again.json()[0]
    assert [m["character_id"] for m in copy["members"]] == [ids["Seraphina"], ids["Kaito"], ids["Mira"]]
    copied = api.get(f"/api/chats/{copy['id']}/messages").json()
    assert [m["character_id"] for m in copied] == [None, ids["Seraphina"], ids["Kaito"]]


def test_a_missing_member_or_a_bad_file_refuses_the_import_and_creates_nothing(api):
    add_character(api, "Kaito")
    before = api.get("/api/chats").json()
    r = _import(api)
    assert (
        r.status_code == 400 and "default_Seraphina.png, Mira.png are not in Sugo yet" in r.json()["detail"]
    )
    _members(api)
    bad = _import(api, chats=[(f"{NEW_CHAT}.jsonl", _jsonl(NEW_LINES)), ("broken.jsonl", b"{not json")])
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["detail"]
    assert api.get("/api/chats").json() == before
    not_a_group = api.post("/api/chats/import-group", files=[("group", ("x.json", b'{"name": "x"}'))])
    assert not_a_group.status_code == 400 and "no `members` list" in not_a_group.json()["detail"]
    no_chats = api.post("/api/chats/import-group", files=[("group", ("g.json", json.dumps(GROUP).encode()))])
    assert no_chats.status_code == 400 and "Add the group's chats" in no_chats.json()["detail"]

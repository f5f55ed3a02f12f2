"""SillyTavern group files read and written as data (app/chats/core/st_group.py)."""

import json

import pytest

from app.chats.core.st_group import GroupImportError, avatar_stem, group_file, parse_group


def _raw(**fields) -> bytes:
    return json.dumps({"name": "Crew", "members": ["A.png", "B.png"], **fields}).encode()


def test_numbers_become_sugo_settings_and_junk_is_left_out():
    group = parse_group(_raw(activation_strategy=2, generation_mode=0, allow_self_responses="yes"))
    assert group.settings == {"reply_order": "manual", "group_cards": "swap"}
    assert parse_group(_raw(activation_strategy=9)).settings == {}
    assert parse_group(_raw(name="", members=["Kai.png", "Mo.png"])).name == "Group: Kai, Mo"


def test_old_layout_metadata_is_found_by_chat_id():
    group = parse_group(
        _raw(
            chat_id="c2", chat_metadata={"note_prompt": "now"}, past_metadata={"c1": {"note_prompt": "then"}}
        )
    )
    assert group.metadata_for("c1") == {"note_prompt": "then"}
    assert group.metadata_for("c2") == {"note_prompt": "now"}
    assert group.metadata_for("c3") is None


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b"{", "not valid JSON"),
        (b"[]", "no `members` list"),
        (_raw(members=[]), "no members"),
        (_raw(members=[f"{i}.png" for i in range(101)]), "at most 100"),
        (b"[" * 5000 + b"]" * 5000, "refused"),
    ],
)
def test_files_that_are_not_groups_are_refused_with_a_reason(raw, says):
    with pytest.raises(GroupImportError, match=says):
        parse_group(raw)


def test_the_group_file_written_back_keeps_unknown_fields_and_drops_the_old_metadata():
    out = group_file(
        raw={"id": "7", "fav": True, "past_metadata": {}, "hideMutedSprites": True},
        name="Crew",
        members=["A.png", "B.png"],
        disabled=["B.png"],
        settings={"reply_order": "pooled", "group_cards": "join_unmuted", "allow_self_responses": True},
        chat_id="Crew",
    )
    assert out["id"] == "7" and out["fav"] is True and out["hideMutedSprites"] is True
    assert "past_metadata" not in out
    assert (out["activation_strategy"], out["generation_mode"], out["disabled_members"]) == (3, 1, ["B.png"])
    assert out["chats"] == ["Crew"] and out["chat_id"] == "Crew"


def test_avatar_stem():
    assert avatar_stem("default_Seraphina.png") == "default_Seraphina"
    assert avatar_stem("dir/Kai") == "Kai"

"""A chat's settings in SillyTavern's chat_metadata: written where SillyTavern reads them, read back."""

from app.chats.settings import ChatSettings
from app.chats.st_metadata import chat_metadata, merge_metadata, read_metadata


def test_note_maps_to_authors_note_keys():
    meta = chat_metadata(
        ChatSettings(context_note="Rain.", context_note_depth=0, context_note_role="assistant"),
        name="C",
        mode="roleplay",
        lorebooks=[],
    )
    assert {k: v for k, v in meta.items() if k.startswith("note_")} == {
        "note_prompt": "Rain.",
        "note_interval": 1,
        "note_position": 1,
        "note_depth": 0,
        "note_role": 2,
    }
    assert "world_info" not in meta


def test_sugo_key_reads_back_every_setting():
    settings = ChatSettings(
        context_note="x",
        recent_message_limit=33,
        memory_recall=False,
        memory_chunking_paused=True,
        builtin_embedding="multilingual-e5-small",
        stop=["\nUser:"],
        top_p=0.9,
        reply_order="manual",
        recall_dense_weight=0.65,
        recall_neighbour_share=0.0,
    )
    meta = chat_metadata(settings, name="Harbour", mode="conversation", lorebooks=["A", "B"])
    assert meta["world_info"] == "A"
    back = read_metadata(meta)
    assert ChatSettings.model_validate(back.settings) == settings
    assert (back.lorebooks, back.mode, back.name, back.notes) == (["A", "B"], "conversation", "Harbour", [])


def test_sugo_key_wins_over_sillytavern_keys():
    meta = {
        "note_prompt": "old",
        "world_info": "Old book",
        "sugo": {"version": 1, "context_note": {"text": "new"}},
    }
    back = read_metadata(meta)
    assert back.settings == {"context_note": "new"} and back.lorebooks == []


def test_lax_values_are_not_taken():
    back = read_metadata({"note_prompt": "n", "note_depth": 4.5, "note_role": True})
    assert back.settings == {"context_note": "n"} and len(back.notes) == 2
    back = read_metadata({"sugo": {"time_awareness": "true", "recent_message_limit": 40.0}})
    assert back.settings == {} and "time_awareness" in back.notes[0]


def test_a_too_long_note_is_left_out():
    back = read_metadata({"note_prompt": "x" * 4001})
    assert back.settings == {} and "4000" in back.notes[0]


def test_merge_keeps_unknown_keys_and_drops_a_detached_book():
    merged = merge_metadata(
        {"variables": {"a": "1"}, "world_info": "Gone", "note_prompt": "old"},
        {"note_prompt": "new", "sugo": {}},
    )
    assert merged == {"variables": {"a": "1"}, "note_prompt": "new", "sugo": {}}

"""Advanced Memory's prompt text and scene ranking inputs (app/memory/scenes/core/recalled.py)."""

from app.memory.scenes.core.recalled import (
    ChunkHit,
    QueryMessage,
    QuotedMessage,
    RecalledText,
    SceneSpan,
    range_header,
    recalled_scenes_block,
    scene_candidates,
    scene_of,
    scene_query,
)
from app.memory.scenes.core.window import MAX_RUN_MESSAGES


def _m(role, name, text):
    return QueryMessage(role, name, text)


def test_the_query_is_the_users_messages_since_the_speaker_last_spoke():
    history = [
        _m("user", "Rowan", "old question"),
        _m("assistant", "Aria", "old answer"),
        _m("user", "Rowan", "Where is the key?"),
        _m("assistant", "Bram", "Ask Aria."),
        _m("user", "Rowan", "And the lighthouse?"),
    ]
    assert scene_query(history, "Aria") == "Where is the key?\nAnd the lighthouse?"
    # Nothing from the user since: the newest message stands in.
    assert (
        scene_query([_m("user", "Rowan", "Hi"), _m("assistant", "Aria", "Hello there")], "Aria")
        == "Hello there"
    )


def test_the_speakers_and_personas_names_do_not_count_in_the_query():
    history = [_m("user", "Rowan", "Aria, do you remember Kestrel Point? Rowan's boat was there.")]
    assert (
        scene_query(history, "Aria", ignore=("Aria", "Rowan"))
        == ", do you remember Kestrel Point? boat was there."
    )
    # Only whole words: "Arian" stays.
    assert "Arian" in scene_query([_m("user", "R", "Arian sailed.")], "Aria", ignore=("Aria",))


def test_the_query_keeps_at_most_six_messages_and_the_newest_text():
    history = [_m("user", "R", f"message {i}") for i in range(10)]
    assert scene_query(history, "Aria") == "\n".join(f"message {i}" for i in range(4, 10))
    long = scene_query([_m("user", "R", "x" * 10_000)], "Aria")
    assert len(long) == 4000


def test_a_chunk_belongs_to_the_scene_holding_most_of_its_messages():
    scenes = [SceneSpan(1, 1, 10), SceneSpan(2, 11, 20)]
    assert scene_of([9, 10, 11], scenes) == 1
    assert scene_of([10, 11, 12], scenes) == 2
    assert scene_of([10, 11], scenes) == 1  # a tie: the earlier scene
    assert scene_of([30, 31], scenes) is None
    assert scene_of([], scenes) is None


def test_a_chunk_whose_messages_straddle_a_scene_belongs_to_one_holding_them():
    scenes = [SceneSpan(1, 1, 10), SceneSpan(2, 11, 20), SceneSpan(3, 21, 30)]
    assert scene_of([5, 25], scenes) == 1  # the scene between holds neither; a tie: the earlier
    assert scene_of([5, 25, 26], scenes) == 3
    assert scene_of([25, 5, 15, 16], scenes) == 2  # in any order


def test_candidates_follow_the_hits_once_per_scene_with_the_excerpt_centred_on_the_hit():
    scenes = [SceneSpan(1, 1, 10), SceneSpan(2, 11, 20)]
    quotable = {1: [(i, 5) for i in range(1, 11)], 2: [(i, 5) for i in range(11, 21) if i != 15]}
    got = scene_candidates([ChunkHit((14, 15, 16)), ChunkHit((3, 4)), ChunkHit((17, 18))], scenes, quotable)
    assert [c.scene_id for c in got] == [2, 1]
    run = got[0].runs[0]
    assert run.messages[run.best][0] == 16  # 15 cannot be quoted: the middle of the quotable ones
    assert got[1].runs[0].messages[got[1].runs[0].best][0] == 4
    # A scene with nothing quotable is still a candidate (its summary), without runs.
    assert scene_candidates([ChunkHit((5,))], scenes, {1: []})[0].runs == ()


def test_a_long_scene_offers_a_bounded_run_around_the_hit():
    scenes = [SceneSpan(1, 1, 500)]
    quotable = {1: [(i, 5) for i in range(1, 501)]}
    run = scene_candidates([ChunkHit((400,))], scenes, quotable)[0].runs[0]
    assert len(run.messages) == MAX_RUN_MESSAGES and run.messages[run.best][0] == 400


def test_one_recalled_scenes_block_with_the_range_header_and_excerpts():
    header = range_header(529, 577, 577)
    block = recalled_scenes_block(
        [
            RecalledText(
                1, 1, 48, "They hid the key.", "day 1", (QuotedMessage(11, "Rowan", "Under the stair."),)
            ),
            RecalledText(3, 97, 97, "They slept.", ""),
        ],
        header,
    )
    assert block.count("## Recalled Scenes") == 1
    assert "The current history is messages #529–#577; the user's last message is #577" in block
    assert (
        "### Scene 1 (messages #1–#48; story timeframe: day 1)\nThey hid the key.\nExcerpt:\n#11 Rowan: Under the stair."
        in block
    )
    assert "### Scene 3 (messages #97)\nThey slept." in block
    assert recalled_scenes_block([], header) == ""
    assert "no messages yet" in range_header(None, None, None)


def test_the_receipt_names_scenes_by_their_numbers_in_the_chat():
    from app.memory.scenes.core.recalled import receipt_lines
    from app.memory.scenes.core.window import NO_SPACE, Receipt

    receipt = Receipt(
        prompt_tokens=5000,
        ceiling=6000,
        constants=(),
        recalled=(41, 7),
        nothing_recalled=None,
        no_excerpt=((7, NO_SPACE),),
        restarted=True,
        fallback=None,
    )
    assert receipt_lines(receipt, None, {41: 3, 7: 1}) == (
        "Context: ~5,000 of 6,000 tokens",
        "The current window restarted at the newest scene.",
        "Recalled scenes: 3, 1.",
        "Scene 1 has no excerpt: no space left after the summaries.",
    )
    assert receipt_lines(receipt, "It does not fit.", {})[0] == "It does not fit."

"""Re-scan scenes' pure part (app/memory/scenes/core/rescan.py): the range checks, the widening to whole
scenes, and what a re-scan replaces given the scenes, the readable messages and the ends found."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.memory.scenes.core.rescan import MAX_RANGE, OldScene, Plan, Stop, check_range, plan, widen

READ = list(range(1, 61))  # message ids 1–60, all readable


def _scenes(*bounds, manual=()):
    return [OldScene(k, k, a, b, k in manual, f"Recap {k}") for k, (a, b) in enumerate(bounds, 1)]


def test_check_range_refuses_each_bad_range_with_a_sentence():
    assert check_range(1, 60, 60) is None
    assert check_range(60, 60, 60) is None
    assert check_range(1, 1, 0) == "This chat has no messages to re-scan yet."
    assert check_range(0, 5, 60) == "Re-scan: message numbers start at 1."
    assert check_range(9, 3, 60) == "Re-scan: the first message (9) comes after the last one (3)."
    assert check_range(1, 61, 60) == "Re-scan: this chat has 60 messages; message 61 does not exist."
    assert check_range(1, MAX_RANGE, 5000) is None
    assert check_range(1, MAX_RANGE + 1, 5000) == (
        "Re-scan: messages 1–2,001 are 2,001 messages; one re-scan reads at most 2,000. "
        "Re-scan a shorter range, then the next one."
    )


def test_widen_grows_the_range_to_the_scenes_crossing_its_edges():
    scenes = _scenes((1, 8), (9, 25), (26, 33))
    assert widen(scenes, 12, 30) == (9, 33)
    assert widen(scenes, 9, 25) == (9, 25)
    assert widen(scenes, 34, 60) == (34, 60)  # the open scene: nothing to widen
    assert widen(scenes, 20, 50) == (9, 50)


def test_a_new_end_splits_the_open_scene():
    scenes = _scenes((1, 8), (9, 25))
    result = plan(scenes, READ, [40], 26, 60)
    assert result == Plan(keep=(), remove=(), create=((26, 40),))  # 41–60 stay the open scene


def test_a_range_is_split_again_and_the_scene_after_it_keeps_its_start():
    scenes = _scenes((1, 8), (9, 25), (26, 33), (34, 40))
    result = plan(scenes, READ, [15], 9, 33)
    # 33 stays an end: scene 4 starts at 34 and keeps its bounds.
    assert isinstance(result, Plan)
    assert [s.id for s in result.remove] == [2, 3]
    assert result.create == ((9, 15), (16, 33)) and result.keep == ()


def test_unchanged_scenes_are_kept_and_ends_outside_the_range_ignored():
    scenes = _scenes((1, 8), (9, 25), (26, 33))
    result = plan(scenes, READ, [8, 25, 70], 9, 33)
    assert result == Plan(keep=(2, 3), remove=(), create=())
    assert not result.changed


def test_the_range_end_stays_an_end_when_it_was_one():
    scenes = _scenes((1, 8), (9, 25))
    # The helper named nothing: 25 is still the end of scene 2 (the helper could not judge it).
    assert plan(scenes, READ, [], 9, 25) == Plan(keep=(2,), remove=(), create=())


def test_bounds_are_compared_by_the_readable_messages_they_cover():
    scenes = _scenes((1, 8), (9, 25))
    readable = [m for m in READ if m != 9]  # message 9 was hidden after the scene closed
    assert plan(scenes, readable, [25], 9, 25) == Plan(keep=(2,), remove=(), create=())


def test_a_hand_edited_scene_that_would_change_stops_everything():
    scenes = _scenes((1, 8), (9, 25), (26, 33), manual=(3,))
    result = plan(scenes, READ, [15], 9, 33)
    assert isinstance(result, Stop) and result.scene.id == 3
    assert result.sentence.startswith("Scene 3 has a summary you edited: “Recap 3”. The re-scan")
    # Unchanged, it does not stop anything.
    assert isinstance(plan(scenes, READ, [15, 25], 9, 33), Plan)


def test_the_stop_sentence_shortens_a_long_summary():
    scene = OldScene(7, 4, 1, 5, True, "word " * 100)
    sentence = plan([scene], READ, [2], 1, 5).sentence
    assert "Scene 4 has a summary you edited: “word" in sentence and "…”" in sentence
    assert len(sentence) < 400


@given(st.lists(st.integers(1, 60), max_size=12), st.integers(1, 60), st.integers(0, 40))
def test_new_scenes_tile_the_range_and_outside_scenes_are_untouched(ends, first, extra):
    scenes = _scenes((1, 8), (9, 25), (26, 33), (34, 40))
    first, last = widen(scenes, first, min(first + extra, 60))
    result = plan(scenes, READ, ends, first, last)
    assert isinstance(result, Plan)
    kept = [(s.first, s.last) for s in scenes if s.id in result.keep]
    bounds = sorted(kept + list(result.create))
    # Contiguous, inside the range, starting at its first message, none overlapping.
    if bounds:
        assert bounds[0][0] == first and bounds[-1][1] <= last
    for (a, b), (c, _) in zip(bounds, bounds[1:], strict=False):
        assert a <= b and c == b + 1
    for s in result.remove:
        assert first <= s.first and s.last <= last
    outside = {s.id for s in scenes if s.last < first or s.first > last}
    assert not outside & ({s.id for s in result.remove} | set(result.keep))
    if any(s.first > last for s in scenes):  # a closed scene follows: the range ends a scene
        assert bounds and bounds[-1][1] == last

"""Advanced Memory's problems (app/memory/scenes/core/problems.py): which scenes are broken, what Fix may do
about each, the set key that announces a set once, and Fix's end sentence."""

from datetime import UTC, datetime, timedelta

from app.memory.scenes.core.problems import (
    UNDECIDED,
    WAITING_TOO_LONG,
    CheckFacts,
    SceneFacts,
    classify,
    end_sentence,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def scene(id_: int, state: str = "written", *, fp: str = "a", current: str | None = "a", **kw) -> SceneFacts:
    fields = {"manual": False, "check_who": False, "enabled": True, "reason": "", "updated_at": NOW} | kw
    return SceneFacts(id=id_, number=id_, state=state, fingerprint=fp, current=current, **fields)


def kinds(*scenes: SceneFacts, check: CheckFacts = CheckFacts()) -> list[tuple[int, str, bool]]:
    return [(p.scene_id, p.kind, p.review) for p in classify(scenes, check, now=NOW).items]


def test_an_up_to_date_written_scene_is_no_problem():
    assert kinds(scene(1)) == []


def test_changed_messages_are_fixable_unless_the_recap_was_edited_by_hand():
    assert kinds(scene(1, current="b"), scene(2, current="b", manual=True)) == [
        (1, "changed", False),
        (2, "changed_manual", True),
    ]


def test_failed_and_long_waiting_scenes_need_a_recap_and_a_fresh_waiting_one_does_not():
    old = NOW - WAITING_TOO_LONG
    fresh = NOW - timedelta(minutes=1)
    assert kinds(
        scene(1, "failed", fp="", reason="x"),
        scene(2, "waiting", fp="", updated_at=old),
        scene(3, "waiting", fp="", updated_at=fresh),
    ) == [(1, "failed", False), (2, "unsummarised", False)]


def test_deleted_writing_disabled_and_unknown_fingerprints_are_not_problems():
    assert (
        kinds(
            scene(1, "deleted", fp="", current="b"),
            scene(2, "writing", current="b"),
            scene(3, current="b", enabled=False),
            scene(4, fp="", current="b"),
        )
        == []
    )


def test_check_who_is_asked_again_once_then_left_for_review():
    assert kinds(
        scene(1, check_who=True),
        scene(2, check_who=True, reason=UNDECIDED),
        scene(3, check_who=True, manual=True),
    ) == [(1, "check_who", False), (2, "check_who_undecided", True), (3, "check_who_undecided", True)]


def test_a_scene_without_readable_messages_is_for_review():
    assert kinds(scene(1, current=None), scene(2, "waiting", current=None)) == [(1, "no_messages", True)]


def test_a_failed_scene_check_comes_first_and_counts_no_scene():
    found = classify(
        [scene(1, "failed", reason="x")], CheckFacts("The scene check failed: no answer.", 1), now=NOW
    )
    assert [(p.scene_id, p.kind) for p in found.items] == [(0, "check_failed"), (1, "failed")]
    assert (found.count, found.scenes, len(found.fixable)) == (2, 1, 2)
    assert classify([], CheckFacts("old reason", 0), now=NOW).count == 0


def test_the_set_key_is_stable_and_changes_with_the_set():
    a = classify([scene(1, current="b"), scene(2, "failed")], CheckFacts(), now=NOW)
    b = classify([scene(2, "failed"), scene(1, current="b")], CheckFacts(), now=NOW)
    c = classify([scene(1, current="b")], CheckFacts(), now=NOW)
    assert a.key == b.key and a.key != c.key and len(a.key) == 16
    assert classify([], CheckFacts(), now=NOW).key == ""


def test_end_sentence():
    assert end_sentence(1, []) == "Advanced Memory fixed 1 scene."
    assert end_sentence(3, [7, 3, 7]) == "Advanced Memory fixed 3 scenes; need your review: scenes 3, 7."
    assert end_sentence(0, [2]) == "Advanced Memory fixed 0 scenes; need your review: scene 2."

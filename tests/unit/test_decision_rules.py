"""Recall by decision, its pure rules (app/memory/scenes/core/decision.py)."""

from app.memory.scenes.core.decision import (
    MAX_SCORED,
    PRESELECT,
    RecapForPick,
    ScoredMessage,
    best_matching,
    centres,
    pick_request,
    preselect,
    read_pick,
    read_scores,
    step_limit,
)
from app.memory.summaries.core.answers import Failure


def test_preselection_cuts_the_ranking_and_adds_the_scene_after_each_of_the_top_three():
    in_order = list(range(1, 41))
    assert preselect([10, 3, 40, 7], in_order, 3) == [10, 3, 40, 7, 11, 4]
    ranked = list(range(40, 0, -1))
    assert len(preselect(ranked, in_order, 3)) == PRESELECT  # the following ones are in already
    assert len(preselect(ranked, in_order, 30)) == 30  # Maximum recalled scenes when higher


def test_time_limits():
    assert step_limit(0.5, 4, 40) == 10  # at least 10 s
    assert step_limit(1.0, 12, 40) == 18  # 12 questions × 1 s, plus half
    assert step_limit(3.0, 24, 40) == 25  # at most 25 s
    assert step_limit(3.0, 24, 12.5) == 12.5  # never past what is left of the reply's 40 s
    assert step_limit(1.0, 4, 0) == 0


RECAPS = [
    RecapForPick(11, 1, 1, 8, "day 1", ("Mirela",), "At the lighthouse."),
    RecapForPick(12, 2, 9, 16, "", (), "At the orchard."),
]


def test_the_pick_request_and_its_answer():
    body = pick_request(RECAPS, "the key?")[1]["content"]
    assert "[Scene 1] messages #1–#8 · story date: day 1 · speakers: Mirela\nAt the lighthouse." in body
    assert "[Scene 2] messages #9–#16\nAt the orchard." in body
    assert read_pick('{"relevant": [2, "1", 7, 2]}', "stop", "", RECAPS) == [12, 11]
    assert read_pick('{"relevant": ["Scene 2"]}', "stop", "", RECAPS) == [12]
    assert read_pick('{"relevant": []}', "stop", "", RECAPS) == []  # a valid decision may pick none
    for junk in ("", "Scene 2 matters.", '{"scenes": [1]}', '{"relevant": 2}', '{"relevant": [1'):
        assert isinstance(read_pick(junk, "stop", "", RECAPS), Failure), junk


MESSAGES = [ScoredMessage(11, 100 + n, n, "Mirela", f"text {n}") for n in range(1, 4)]


def test_scores_centre_each_scene_on_its_best_message():
    scores = read_scores('{"scores": {"#1": 2, "2": 9.5, "3": "high", "9": 10}}', "stop", "", MESSAGES)
    assert scores == {101: 2.0, 102: 9.5}
    assert centres(scores, MESSAGES) == {11: 102}
    assert isinstance(read_scores('{"scores": [1, 2]}', "stop", "", MESSAGES), Failure)


def test_the_best_matching_messages_are_scored_in_scene_order():
    many = [ScoredMessage(1, i, i, "A", "brass key" if i in (3, 30) else f"filler {i}") for i in range(1, 41)]
    got = best_matching(many, "Where is the brass key?")
    assert len(got) == MAX_SCORED and [m.number for m in got] == sorted(m.number for m in got)
    assert {3, 30} <= {m.number for m in got}

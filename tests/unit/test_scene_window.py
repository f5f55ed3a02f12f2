from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.scenes.core.window import (
    CONSTANT_TOO_BIG,
    COVERS_WINDOW,
    NO_EARLIER_SCENES,
    NO_SPACE,
    NO_SPACE_LEFT,
    NOT_QUOTABLE,
    NOTHING_RELEVANT,
    OPEN_SCENE_TOO_BIG,
    PROBLEM_NO_ROOM,
    RECALL_OFF,
    TOLERANCE_TOKENS,
    TOO_BIG,
    Candidate,
    ClosedScene,
    Constant,
    ExcerptRun,
    HistoryMessage,
    LeftOut,
    MemorySettings,
    excerpt_span,
    newest_scene_start,
    plan_memory,
)


def history(n, tokens=100, skip=()):
    return [HistoryMessage(i, i, tokens) for i in range(1, n + 1) if i not in skip]


def scene(id, first, last, tokens=100, **kw):
    return ClosedScene(id, first, last, tokens, **kw)


def run(first, last, tokens=10, best=0):
    return ExcerptRun(tuple((i, tokens) for i in range(first, last + 1)), best)


# 20 messages of 100 tokens: 2,000; with the 500-token budget they pass a 2,000 ceiling.
SMALL = MemorySettings(ceiling=2000, budget=500, max_scenes=3, moving_min=3, moving_max=5)
BIG = MemorySettings(ceiling=100_000, budget=1000, max_scenes=3, moving_min=3, moving_max=5)


# The window -------------------------------------------------------------------------------------------


def test_window_grows_from_the_start_under_the_ceiling():
    plan = plan_memory(history(10), [scene(1, 1, 4)], mark_id=None, other_tokens=300, settings=SMALL)
    assert (plan.mark_id, plan.restarted, plan.first_id) == (None, False, 1)
    assert plan.window_tokens == 1000
    assert plan.fallback is None and plan.problem is None


def test_ceiling_reached_restarts_at_the_newest_scene():
    plan = plan_memory(
        history(20), [scene(1, 1, 8), scene(2, 9, 14)], mark_id=None, other_tokens=0, settings=SMALL
    )
    assert plan.restarted
    assert plan.mark_id == 15 and plan.first_id == 15  # the open scene's first message
    assert plan.window_tokens == 600
    assert plan.receipt.restarted


def test_one_token_under_the_ceiling_does_not_restart():
    plan = plan_memory(history(20), [scene(1, 1, 8)], mark_id=None, other_tokens=-1, settings=SMALL)
    assert plan.restarted  # negative counts are 0: 2,000 + 500 > 2,000
    plan = plan_memory(history(15), [scene(1, 1, 8)], mark_id=None, other_tokens=0, settings=SMALL)
    assert not plan.restarted  # 1,500 + 500 == 2,000: reached, not passed
    assert plan.first_id == 1


def test_restart_never_passes_the_newest_message():
    # The last closed scene ends at the newest message: the open scene has no message yet, so the
    # window restarts at that closed scene's beginning.
    plan = plan_memory(
        history(20), [scene(1, 1, 8), scene(2, 9, 20)], mark_id=None, other_tokens=0, settings=SMALL
    )
    assert plan.mark_id == 9 and plan.first_id == 9
    assert newest_scene_start(history(20), [scene(2, 9, 20)]) == 8  # index of message 9
    assert newest_scene_start(history(20), []) is None


def test_stored_mark_is_kept_while_the_window_fits():
    plan = plan_memory(
        history(20), [scene(1, 1, 8), scene(2, 9, 14)], mark_id=9, other_tokens=0, settings=SMALL
    )
    assert (plan.mark_id, plan.restarted, plan.first_id) == (9, False, 9)


def test_mark_on_a_deleted_message_starts_at_the_next_one():
    plan = plan_memory(history(20, skip={9}), [scene(1, 1, 8)], mark_id=9, other_tokens=0, settings=SMALL)
    assert plan.first_id == 10 and plan.mark_id == 9 and not plan.restarted


def test_mark_moves_only_forward():
    # Already restarted at the open scene, which alone is now too big: no new mark, the fallback.
    plan = plan_memory(history(30), [scene(1, 1, 8)], mark_id=9, other_tokens=0, settings=SMALL)
    assert not plan.restarted and plan.mark_id == 9
    assert plan.fallback == OPEN_SCENE_TOO_BIG
    assert plan.first_id == 16  # the newest 15 messages: 1,500 + the 500 budget
    assert plan.prompt_tokens <= SMALL.ceiling


def test_request_after_a_tool_call_never_restarts():
    plan = plan_memory(
        history(20), [scene(1, 1, 8)], mark_id=None, other_tokens=0, settings=SMALL, may_restart=False
    )
    assert not plan.restarted and plan.mark_id is None
    assert plan.first_id == 6 and plan.fallback == OPEN_SCENE_TOO_BIG


def test_open_scene_too_big_keeps_the_newest_messages_and_quotes_its_beginning():
    plan = plan_memory(history(20), [], mark_id=None, other_tokens=0, settings=SMALL)
    assert not plan.restarted and plan.mark_id is None
    assert plan.first_id == 6 and plan.window_tokens == 1500
    (quoted,) = plan.source_excerpts
    assert quoted.kind == "open_scene" and quoted.message_ids == (1, 2, 3, 4, 5)  # Moving context max
    assert plan.prompt_tokens == 2000
    assert plan.receipt.fallback == OPEN_SCENE_TOO_BIG


def test_restart_that_still_does_not_fit_stores_the_mark_and_falls_back():
    plan = plan_memory(history(40), [scene(1, 1, 10)], mark_id=None, other_tokens=0, settings=SMALL)
    assert plan.restarted and plan.mark_id == 11
    assert plan.first_id == 26 and plan.fallback == OPEN_SCENE_TOO_BIG
    assert plan.source_excerpts[0].message_ids == (11, 12, 13, 14, 15)  # from the open scene's start


def test_instructions_too_big_keep_only_the_newest_message_and_say_so():
    plan = plan_memory(
        history(5), [], mark_id=None, other_tokens=1950, settings=SMALL, constants=[Constant(1, 10)]
    )
    assert plan.first_id == 5
    assert plan.problem == PROBLEM_NO_ROOM
    assert plan.constants == () and plan.memory_tokens == 0


# Constants --------------------------------------------------------------------------------------------


def test_constant_covering_a_window_message_is_left_out():
    constants = [Constant(1, 50, 1, 14), Constant(2, 50, 9, 15), Constant(3, 50)]
    plan = plan_memory(
        history(20),
        [scene(1, 1, 8), scene(2, 9, 14)],
        mark_id=None,
        other_tokens=0,
        settings=SMALL,
        constants=constants,
    )
    assert plan.first_id == 15
    assert plan.constants == (1, 3)
    assert plan.left_out == (LeftOut(2, COVERS_WINDOW),)


def test_constants_past_seventy_percent_still_go_in_and_ask_for_continuity():
    at_target = plan_memory(
        history(3),
        [],
        mark_id=None,
        other_tokens=0,
        settings=BIG,
        constants=[Constant(1, 400), Constant(2, 300)],
    )
    assert at_target.constants == (1, 2) and not at_target.continuity_due
    over = plan_memory(
        history(3),
        [],
        mark_id=None,
        other_tokens=0,
        settings=BIG,
        constants=[Constant(1, 400), Constant(2, 301)],
    )
    assert over.constants == (1, 2) and over.continuity_due


def test_constants_come_before_scene_summaries():
    plan = plan_memory(
        history(20),
        [scene(1, 1, 8, tokens=900)],
        mark_id=9,
        other_tokens=0,
        settings=BIG,
        constants=[Constant(1, 2500)],
        candidates=[Candidate(1)],
    )
    assert plan.constants == (1,)
    assert plan.scenes == ()
    assert plan.receipt.nothing_recalled == NO_SPACE_LEFT


def test_giant_constant_falls_back_to_quoting_its_newest_messages():
    settings_ = MemorySettings(ceiling=100_000, budget=1000, moving_max=0, moving_min=0)
    plan = plan_memory(
        history(100),
        [scene(1, 1, 80)],
        mark_id=81,
        other_tokens=0,
        settings=settings_,
        constants=[Constant(1, 50), Constant(7, 5000, 1, 80)],
    )
    assert plan.constants == (1,)
    assert plan.left_out == (LeftOut(7, TOO_BIG),)
    assert plan.fallback == CONSTANT_TOO_BIG
    (quoted,) = plan.source_excerpts
    # 3,000 - 50 tokens of room: the newest 29 messages it covers
    assert quoted.kind == "constant" and quoted.source_id == 7
    assert quoted.message_ids == tuple(range(52, 81))
    assert plan.memory_tokens <= 1000 + TOLERANCE_TOKENS


# Recall -----------------------------------------------------------------------------------------------


def scenes_12():
    return [scene(1, 1, 4, 100), scene(2, 5, 8, 100), scene(3, 9, 12, 100)]


def test_scene_overlapping_the_window_is_not_recalled():
    cands = [Candidate(3, (run(9, 12),)), Candidate(2, (run(5, 8),))]
    plan = plan_memory(history(20), scenes_12(), mark_id=10, other_tokens=0, settings=BIG, candidates=cands)
    assert plan.receipt.recalled == (2,)
    plan = plan_memory(history(20), scenes_12(), mark_id=13, other_tokens=0, settings=BIG, candidates=cands)
    assert plan.receipt.recalled == (3, 2)


def test_scene_before_the_cut_of_a_fallback_window_can_be_recalled():
    plan = plan_memory(
        history(20),
        [scene(1, 1, 4)],
        mark_id=None,
        other_tokens=0,
        settings=SMALL,
        candidates=[Candidate(1)],
        may_restart=False,
    )
    assert plan.first_id == 6
    assert plan.receipt.recalled == (1,)


def test_summaries_may_use_the_tolerance_but_not_more():
    scenes = [scene(i, 4 * i - 3, 4 * i, tokens=900) for i in range(1, 5)]
    cands = [Candidate(i) for i in range(1, 5)]
    s = MemorySettings(ceiling=100_000, budget=1000, max_scenes=4, moving_min=0, moving_max=0)
    plan = plan_memory(history(20), scenes, mark_id=17, other_tokens=0, settings=s, candidates=cands)
    assert plan.receipt.recalled == (1, 2, 3)  # 2,700 <= 1,000 + 2,000; a fourth would be 3,600
    assert plan.memory_tokens == 2700


def test_tolerance_never_passes_the_ceiling():
    scenes = [scene(i, 4 * i - 3, 4 * i, tokens=300) for i in range(1, 5)]
    s = MemorySettings(ceiling=2000, budget=500, max_scenes=4, moving_min=0, moving_max=0)
    plan = plan_memory(
        history(20, tokens=50),
        scenes,
        mark_id=17,
        other_tokens=1000,
        settings=s,
        candidates=[Candidate(i) for i in range(1, 5)],
    )
    # 2,000 - 1,000 - 4 x 50 = 800 left: two summaries, not three (which the tolerance would allow)
    assert plan.receipt.recalled == (1, 2)
    assert plan.prompt_tokens == 1800


def test_excerpts_stay_within_the_budget_after_all_summaries():
    scenes = [scene(1, 1, 4, tokens=600), scene(2, 5, 8, tokens=600)]
    cands = [Candidate(1, (run(1, 4),)), Candidate(2, (run(5, 8),))]
    plan = plan_memory(history(20), scenes, mark_id=17, other_tokens=0, settings=BIG, candidates=cands)
    assert [(r.id, r.excerpt, r.no_excerpt) for r in plan.scenes] == [(1, (), NO_SPACE), (2, (), NO_SPACE)]
    assert plan.receipt.no_excerpt == ((1, NO_SPACE), (2, NO_SPACE))
    assert "Scene 1 has no excerpt: no space left after the summaries." in plan.receipt.lines()


def test_excerpt_is_shortened_to_fit_around_the_best_match():
    cands = [Candidate(1, (run(1, 9, tokens=100, best=6),))]
    # budget 1,000 - summary 100 - header 50 = 850: 5 messages of 100 fit
    s = MemorySettings(ceiling=100_000, budget=1000, moving_min=3, moving_max=5, header_tokens=50)
    plan = plan_memory(
        history(20), [scene(1, 1, 9)], mark_id=10, other_tokens=0, settings=s, candidates=cands
    )
    assert plan.scenes[0].excerpt == (5, 6, 7, 8, 9)  # best match 7, shifted to stay inside the run
    s = MemorySettings(ceiling=100_000, budget=500, moving_min=3, moving_max=5, header_tokens=50)
    plan = plan_memory(
        history(20), [scene(1, 1, 9)], mark_id=10, other_tokens=0, settings=s, candidates=cands
    )
    assert plan.scenes[0].excerpt == (6, 7, 8)  # 350 left: 3 messages, the best in the middle
    assert plan.memory_tokens == 450


def test_excerpt_never_below_min_tries_the_next_run():
    big = run(1, 5, tokens=200, best=2)
    small = run(6, 8, tokens=20, best=1)
    s = MemorySettings(ceiling=100_000, budget=500, moving_min=3, moving_max=5)
    plan = plan_memory(
        history(20),
        [scene(1, 1, 8)],
        mark_id=10,
        other_tokens=0,
        settings=s,
        candidates=[Candidate(1, (big, small))],
    )
    assert plan.scenes[0].excerpt == (6, 7, 8)


def test_short_run_is_quoted_whole():
    plan = plan_memory(
        history(20),
        [scene(1, 1, 8)],
        mark_id=10,
        other_tokens=0,
        settings=BIG,
        candidates=[Candidate(1, (run(3, 4),))],
    )
    assert plan.scenes[0].excerpt == (3, 4)


def test_scene_without_quotable_messages_says_so():
    plan = plan_memory(
        history(20),
        [scene(1, 1, 8)],
        mark_id=10,
        other_tokens=0,
        settings=BIG,
        candidates=[Candidate(1, (ExcerptRun(()),))],
    )
    assert plan.scenes[0].no_excerpt == NOT_QUOTABLE
    assert "none of its messages can be quoted" in plan.receipt.lines()[-1]


def test_moving_context_zero_gives_summaries_without_excerpts():
    s = MemorySettings(ceiling=100_000, budget=1000, moving_min=0, moving_max=0)
    plan = plan_memory(
        history(20),
        [scene(1, 1, 8)],
        mark_id=10,
        other_tokens=0,
        settings=s,
        candidates=[Candidate(1, (run(1, 8),))],
    )
    assert plan.scenes[0].excerpt == () and plan.scenes[0].no_excerpt is None


def test_never_more_scenes_or_excerpts_than_maximum_recalled_scenes():
    scenes = [scene(i, 2 * i - 1, 2 * i, tokens=10) for i in range(1, 9)]
    cands = [Candidate(i, (run(2 * i - 1, 2 * i, tokens=5),)) for i in (8, 3, 5, 1, 2, 7)]
    s = MemorySettings(ceiling=100_000, budget=5000, max_scenes=2)
    plan = plan_memory(history(20), scenes, mark_id=17, other_tokens=0, settings=s, candidates=cands)
    assert plan.receipt.recalled == (8, 3)
    assert sum(1 for r in plan.scenes if r.excerpt) == 2


def test_summary_that_does_not_fit_is_skipped_for_the_next_ranked():
    scenes = [scene(1, 1, 4, tokens=5000), scene(2, 5, 8, tokens=100)]
    plan = plan_memory(
        history(20), scenes, mark_id=10, other_tokens=0, settings=BIG, candidates=[Candidate(1), Candidate(2)]
    )
    assert plan.receipt.recalled == (2,)


def test_disabled_unsummarised_unknown_and_repeated_scenes_are_ignored():
    scenes = [scene(1, 1, 2, enabled=False), scene(2, 3, 4, has_summary=False), scene(3, 5, 6)]
    cands = [Candidate(1), Candidate(2), Candidate(99), Candidate(3), Candidate(3)]
    plan = plan_memory(history(20), scenes, mark_id=10, other_tokens=0, settings=BIG, candidates=cands)
    assert plan.receipt.recalled == (3,)


def test_why_nothing_was_recalled():
    def reason(scenes, cands, mark=10, s=BIG):
        plan = plan_memory(history(20), scenes, mark_id=mark, other_tokens=0, settings=s, candidates=cands)
        assert plan.receipt.recalled == ()
        return plan.receipt.nothing_recalled

    assert reason([], []) == NO_EARLIER_SCENES
    assert reason([scene(1, 1, 12)], [Candidate(1)]) == NO_EARLIER_SCENES  # overlaps the window
    assert reason([scene(1, 1, 8, enabled=False)], [Candidate(1)]) == NO_EARLIER_SCENES
    assert reason([scene(1, 1, 8)], []) == NOTHING_RELEVANT
    assert reason([scene(1, 1, 8, tokens=9000)], [Candidate(1)]) == NO_SPACE_LEFT
    off = MemorySettings(ceiling=100_000, budget=1000, max_scenes=0)
    assert reason([scene(1, 1, 8)], [Candidate(1)], s=off) == RECALL_OFF


def test_receipt_estimates_the_whole_prompt():
    plan = plan_memory(
        history(20),
        [scene(1, 1, 8, tokens=200)],
        mark_id=10,
        other_tokens=700,
        settings=BIG,
        constants=[Constant(5, 300)],
        candidates=[Candidate(1, (run(1, 3, tokens=10),))],
    )
    assert plan.prompt_tokens == 700 + 11 * 100 + 300 + 200 + 30
    lines = plan.receipt.lines()
    assert lines[0] == "Context: ~2,330 of 100,000 tokens"
    assert "Recalled scenes: 1" in lines
    assert "Chat Summaries: 1" in lines and plan.receipt.constants == (5,)


def test_settings_are_clamped_not_refused():
    s = MemorySettings(ceiling=10, budget=10**9, max_scenes=999, moving_min=9, moving_max=2).clamped()
    assert (s.ceiling, s.budget, s.max_scenes, s.moving_min, s.moving_max) == (1024, 1024, 50, 2, 2)


def test_excerpt_span():
    assert excerpt_span(9, 6, 5) == (4, 9)
    assert excerpt_span(9, 4, 3) == (3, 6)
    assert excerpt_span(9, 0, 4) == (0, 4)
    assert excerpt_span(9, 4, 4) == (3, 7)  # an even size puts the extra message after the match
    assert excerpt_span(2, 1, 5) == (0, 2)
    assert excerpt_span(5, 99, 2) == (3, 5)


# Properties -------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 60),
    tokens=st.lists(st.integers(-5, 400), min_size=60, max_size=60),
    bounds=st.lists(st.integers(1, 60), max_size=8, unique=True),
    other=st.integers(0, 3000),
    ceiling=st.integers(1024, 6000),
    budget=st.integers(64, 3000),
    max_scenes=st.integers(0, 6),
    low=st.integers(0, 6),
    high=st.integers(0, 6),
    summary=st.integers(0, 1500),
    mark=st.one_of(st.none(), st.integers(1, 70)),
    constant=st.integers(0, 5000),
)
def test_prompt_stays_under_the_ceiling(
    n, tokens, bounds, other, ceiling, budget, max_scenes, low, high, summary, mark, constant
):
    messages = [HistoryMessage(i, i, tokens[i - 1]) for i in range(1, n + 1)]
    ends = sorted(b for b in bounds if b <= n)
    scenes = [scene(k, (ends[k - 1] + 1 if k else 1), end, summary) for k, end in enumerate(ends)]
    cands = [
        Candidate(sc.id, (run(sc.first_message_id, sc.last_message_id, 30, 1),)) for sc in reversed(scenes)
    ]
    s = MemorySettings(ceiling=ceiling, budget=budget, max_scenes=max_scenes, moving_min=low, moving_max=high)
    plan = plan_memory(
        messages,
        scenes,
        mark_id=mark,
        other_tokens=other,
        settings=s,
        constants=[Constant(1, constant, 1, 3)],
        candidates=cands,
    )
    if plan.problem is None:
        assert plan.prompt_tokens <= s.clamped().ceiling
    assert plan.memory_tokens <= s.clamped().budget + TOLERANCE_TOKENS
    assert len(plan.scenes) <= max_scenes
    assert all(len(r.excerpt) <= high for r in plan.scenes)
    window_first = plan.first_id
    for r in plan.scenes:  # recalled scenes lie wholly before the sent window
        assert next(sc for sc in scenes if sc.id == r.id).last_message_id < window_first
    if messages:
        assert window_first is not None and window_first <= messages[-1].id  # the newest message is sent

"""Character recollections: the four-consecutive-words rule, reading the helper's answer, who gets one
(app/memory/scenes/core/recollection.py), and their place in the memory budget (core/window.py):
summaries, then recollections, then excerpts; excerpts shrink first, then whole recollections leave."""

from app.memory.scenes.core.recollection import (
    MAX_WORDS,
    SeenLine,
    leaks,
    present,
    read_recollection,
    recollection_request,
)
from app.memory.scenes.core.window import (
    Candidate,
    ClosedScene,
    ExcerptRun,
    HistoryMessage,
    MemorySettings,
    plan_memory,
)
from app.memory.summaries.core.answers import Failure

HIDDEN = "Cleo whispers that the harbour master is late and the vault is open."
SEEN = ["Bram pours cider.", "The vault is open, everyone knows."]


def test_four_consecutive_words_of_what_it_could_not_see_is_a_leak():
    assert leaks("I heard the harbour master is late.", [HIDDEN], SEEN)
    # Case and punctuation do not hide a copy.
    assert leaks("HARBOUR MASTER, IS LATE!", [HIDDEN], SEEN)
    # Three words are not four; a run the character also saw is no leak.
    assert not leaks("The harbour master waited.", [HIDDEN], SEEN)
    assert not leaks("I knew the vault is open.", [HIDDEN], SEEN)
    assert not leaks("Anything at all here.", [], SEEN)


def test_the_answer_is_read_in_one_place():
    assert (
        read_recollection('{"recollection": "I  remember\\nthe rain."}', "stop", "") == "I remember the rain."
    )
    assert read_recollection('<think>who am I</think>{"Recollection": "Rain."}', "stop", "") == "Rain."
    for junk in (
        "",
        "I remember the rain.",
        '{"memory": "x"}',
        '{"recollection": ""}',
        '{"recollection": "cut',
    ):
        assert isinstance(read_recollection(junk, "stop", ""), Failure), junk
    long = " ".join(["word"] * (MAX_WORDS + 1))
    assert isinstance(read_recollection(f'{{"recollection": "{long}"}}', "stop", ""), Failure)


def test_who_gets_one_and_what_the_helper_reads():
    members = {1: "Aria", 2: "Bram", 3: "Cleo"}
    assert present(["Aria", "Rowan", "cleo"], False, members, narrator=3) == [1]
    assert present([], True, members, narrator=None) == [1, 2, 3]
    assert present([], False, members, narrator=None) == []
    request = recollection_request("Bram", "A sailor.", "They planned.", [SeenLine(4, "Bram", "Rope.")])
    body = request[1]["content"]
    assert "Character: Bram" in body and "A sailor." in body and "#4 Bram: Rope." in body


def _plan(budget: int):
    run = ExcerptRun(tuple((i, 30) for i in range(1, 6)), 2)
    return plan_memory(
        [HistoryMessage(100, 20, 10)],
        [ClosedScene(1, 1, 5, 100, recollections=(50, 60))],
        mark_id=None,
        other_tokens=0,
        settings=MemorySettings(ceiling=100_000, budget=budget, max_scenes=3, moving_min=3, moving_max=5),
        candidates=[Candidate(1, (run,))],
    ).scenes[0]


def test_recollections_come_after_summaries_and_before_excerpts():
    roomy = _plan(1000)
    assert roomy.recollections == (0, 1) and len(roomy.excerpt) == 5
    # The excerpt shrinks first (to its minimum of three)...
    shrunk = _plan(100 + 110 + 90)
    assert shrunk.recollections == (0, 1) and len(shrunk.excerpt) == 3
    # ...then goes, while both recollections stay whole...
    no_excerpt = _plan(100 + 110 + 40)
    assert (
        no_excerpt.recollections == (0, 1)
        and no_excerpt.excerpt == ()
        and no_excerpt.no_excerpt == "no_space"
    )
    # ...then whole recollections leave; one is never cut.
    one = _plan(100 + 50 + 30)
    assert one.recollections == (0,) and one.tokens == 150


def test_a_scenes_file_carries_recollections_and_refuses_bad_ones():
    import json
    from datetime import UTC, datetime

    import pytest

    from app.memory.scenes.core.transfer import (
        FileRecollection,
        FileScene,
        SceneFileError,
        read_file,
        write_file,
    )

    rec = FileRecollection("Aria", "I remember the rain.", manual=True)
    raw = write_file(
        chat_name="c",
        scenes=[FileScene(1, 2, "written", "Rain.", recollections=(rec,))],
        now=datetime.now(UTC),
    )
    assert read_file(raw)[0].recollections == (rec,)
    doc = json.loads(raw)
    for bad in (
        [{"text": "x"}],
        "nope",
        [{"character": "Aria", "text": 5}],
        [{"character": "A", "manual": "yes"}],
    ):
        doc["scenes"][0]["recollections"] = bad
        with pytest.raises(SceneFileError):
            read_file(json.dumps(doc).encode())

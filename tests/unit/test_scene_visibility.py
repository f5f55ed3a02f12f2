"""Decide who sees new messages: the helper's request and the reading of its answer
(app/memory/scenes/core/visibility.py)."""

from app.memory.scenes.core.visibility import (
    MAX_CONTEXT_MESSAGES,
    VISIBILITY_PROMPT,
    Line,
    read_visibility,
    to_ask,
    visibility_request,
)
from app.memory.summaries.core.answers import Failure

ASKED = ["Aria Vale", "Bram"]


def test_the_request_names_who_is_asked_the_hint_and_the_new_message():
    scene = [Line(n, "Rowan", f"line {n}") for n in range(1, 60)]
    request = visibility_request(scene, Line(60, "Rowan", "Bram leaves."), ASKED, ["Rowan", "Aria Vale"])
    assert request[0]["content"] == VISIBILITY_PROMPT
    body = request[1]["content"]
    assert body.startswith("Characters to decide about: Aria Vale, Bram\n")
    assert "(a hint only): Rowan, Aria Vale" in body and body.endswith(
        "NEW message:\n#60 Rowan: Bram leaves."
    )
    assert body.count("Rowan: line") == MAX_CONTEXT_MESSAGES and "#59 Rowan: line 59" in body


def test_an_answer_names_only_characters_asked_about_and_an_unclear_one_hides_nothing():
    assert read_visibility('{"cannot_see": ["Bram"]}', "stop", "", ASKED, "Rowan") == ["Bram"]
    # A run of a card's words matches it; the persona, strangers and notes do not.
    got = read_visibility(
        '{"cannotSee": ["Aria", "Rowan", "Kaito", "Bram (mentioned)"]}', "stop", "", ASKED, "Rowan"
    )
    assert got == ["Aria Vale"]
    assert read_visibility('<think>hm</think>{"cannot_see": "Bram"}', "stop", "", ASKED, None) == ["Bram"]
    assert read_visibility('{"cannot_see": []}', "stop", "", ASKED, None) == []
    for junk in ("Everyone can see it.", '{"visible": true}', '{"cannot_see": 3}', "", '{"cannot_see": ["Br'):
        assert isinstance(read_visibility(junk, "stop", "", ASKED, None), Failure), junk
    assert isinstance(read_visibility("", "stop", "thinking only", ASKED, None), Failure)


def test_the_author_the_narrator_and_those_already_hidden_from_are_not_asked():
    members = {1: "Aria", 2: "Bram", 3: "Cleo", 4: "Dara"}
    assert to_ask(members, author=1, narrator=3, already_hidden=[4]) == {2: "Bram"}
    assert to_ask(members, author=None, narrator=None, already_hidden=[]) == members

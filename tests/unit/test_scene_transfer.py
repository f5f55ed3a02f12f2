"""Access memories' pure parts (issue 14): the summary search and the scenes file read back."""

import json

import pytest

from app.memory.scenes.core.transfer import (
    FileScene,
    SceneFileError,
    check_against,
    matches,
    messages_hash,
    read_file,
    write_file,
)
from app.platform.timeutil import utcnow


@pytest.mark.parametrize(
    ("summary", "query", "found"),
    [
        ("They met at the Café Élan.", "cafe elan", True),
        ("été à Paris", "ÉTÉ", True),
        ("Straße  and   river", "STRASSE AND river", True),
        ("The bridge fell.", "dragon", False),
    ],
)
def test_search_folds_case_accents_and_spaces(summary, query, found):
    assert matches(summary, query) is found


def _file(*scenes: dict) -> bytes:
    return json.dumps({"type": "sugo_scenes", "version": 1, "scenes": list(scenes)}).encode()


def test_states_come_back_written_deleted_or_waiting():
    read = read_file(
        _file(
            {"firstMessage": 9, "lastMessage": 12, "state": "failed", "summary": "Old."},
            {"firstMessage": 1, "lastMessage": 4, "state": "written", "summary": " Kept. ", "manual": True},
            {"firstMessage": 5, "lastMessage": 6, "state": "deleted", "summary": "Gone.", "manual": True},
            {"firstMessage": 7, "lastMessage": 8, "state": "written", "summary": "", "manual": True},
        )
    )
    assert [(s.first, s.state, s.summary, s.manual) for s in read] == [
        (1, "written", "Kept.", True),
        (5, "deleted", "", False),
        (7, "waiting", "", False),
        (9, "waiting", "Old.", False),
    ]


def test_a_written_file_reads_back_and_is_checked_against_the_messages():
    messages = [("Aria", "Hello."), ("You", "Hi."), ("Aria", "Bye.")]
    scene = FileScene(
        first=2,
        last=3,
        state="written",
        summary="They parted.",
        participants=("Aria",),
        messages_hash=messages_hash(messages[1:3]),
    )
    read = read_file(write_file(chat_name="x", scenes=[scene], now=utcnow()))
    assert read == [scene]
    check_against(read, messages)
    with pytest.raises(SceneFileError, match="other messages"):
        check_against(read, [*messages[:2], ("Aria", "Changed.")])
    with pytest.raises(SceneFileError, match="not in this chat: it has 2 messages"):
        check_against(read, messages[:2])

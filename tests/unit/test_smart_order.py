"""The smart order's pure parts (app/generation/core/smart_order.py)."""

from app.chats.core.turns import Member
from app.generation.core.smart_order import Line, mentioned, read_choice, request, round_robin
from app.memory.summaries.core.answers import Failure

MEMBERS = [Member(1, "Mary"), Member(2, "Mary Ann"), Member(3, "Bo", muted=True)]


def test_an_at_name_picks_the_longest_name_that_fits_muted_members_included():
    assert mentioned(MEMBERS, "@Mary Ann, come here") == 2
    assert mentioned(MEMBERS, "hi @mary!") == 1
    assert mentioned(MEMBERS, "@Bo?") == 3
    assert mentioned(MEMBERS, "mail me at x@Mary.com") is None  # not an @ that starts a word
    assert mentioned(MEMBERS, "@Maryland") is None and mentioned(MEMBERS, "no one") is None


def test_round_robin_goes_to_the_unmuted_member_after_the_last_speaker():
    assert round_robin(MEMBERS, 1) == 2
    assert round_robin(MEMBERS, 2) == 1  # Bo is muted: passed by
    assert round_robin(MEMBERS, None) == 1 and round_robin(MEMBERS, 99) == 1
    assert round_robin([], None) is None


def test_the_helpers_answer_is_read_by_the_one_reader():
    assert read_choice('<think>Mary Ann was asked.</think>{"next": "mary ann"}', "stop", MEMBERS) == 2
    assert read_choice('```json\n{"Next": "Mary"}\n```', "stop", MEMBERS) == 1
    for answer, finish in (
        ('{"next": "Bo"}', "stop"),
        ('{"next": ""}', "stop"),
        ("Mary", "stop"),
        ('{"next": "Ma', "length"),
        ("", "stop"),
    ):
        assert isinstance(read_choice(answer, finish, MEMBERS), Failure), answer


def test_the_request_lists_the_unmuted_members_and_the_chats_end():
    lines = [Line("User", f"line {i}") for i in range(30)]
    messages = request(MEMBERS, {1: "A cook. " * 100}, lines)
    assert "- Mary: A cook." in messages[0]["content"] and "Bo" not in messages[0]["content"]
    assert "line 29" in messages[1]["content"] and "line 17" not in messages[1]["content"]
    assert len(messages[0]["content"]) < 1500

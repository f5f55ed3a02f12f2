"""The automatic trigger's count: readable user messages after the newest entry's end."""

from app.memory.summaries.runs import user_messages_after


def test_counts_only_readable_user_messages_after_the_newest_entry():
    msgs = [
        (1, False, "assistant"),
        (2, False, "user"),
        (3, False, "assistant"),
        (4, True, "user"),
        (5, False, "user"),
    ]
    assert user_messages_after(msgs, None) == 2
    assert user_messages_after(msgs, 2) == 1
    assert user_messages_after(msgs, 5) == 0
    assert user_messages_after([], None) == 0

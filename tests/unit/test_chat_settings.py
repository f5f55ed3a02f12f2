import pytest
from pydantic import ValidationError

from app.chats.settings import ChatSettings, read_settings


def test_defaults():
    s = ChatSettings()
    assert s.recent_message_limit == 80 and s.temperature is None and s.reply_order == "natural"
    assert s.allow_self_responses is False


def test_a_chat_saved_with_the_old_turns_order_reads_as_pooled():
    assert read_settings({"reply_order": "turns"}).reply_order == "pooled"
    with pytest.raises(ValidationError):
        ChatSettings(reply_order="random")


@pytest.mark.parametrize("limit", [19, 101])
def test_recent_limit_bounds(limit):
    with pytest.raises(ValidationError):
        ChatSettings(recent_message_limit=limit)


def test_bad_stored_values_fall_back_field_by_field():
    s = read_settings({"temperature": 0.7, "recent_message_limit": 5000})
    assert s.temperature == 0.7 and s.recent_message_limit == 80

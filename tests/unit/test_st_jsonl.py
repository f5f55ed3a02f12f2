import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.chats.core.st_jsonl import (
    MAX_CHAT_BYTES,
    ChatImportError,
    format_send_date,
    message_line,
    parse_chat_jsonl,
    parse_send_date,
    write_chat_jsonl,
)

HEADER = {
    "user_name": "Alex",
    "character_name": "Seraphina",
    "create_date": "2024-10-18@20h52m17s",
    "chat_metadata": {
        "note_prompt": "Remember the storm.",
        "note_interval": 1,
        "note_position": 1,
        "note_depth": 4,
        "note_role": 0,
        "variables": {"mood": "calm", "count": "3"},
        "timedWorldInfo": {"sticky": {}, "cooldown": {}},
        "integrity": "5b1c2c4e-aaaa-bbbb-cccc-123456789abc",
        "some_future_key": [1, {"x": None}],
    },
}

MESSAGES = [
    {
        "name": "Seraphina",
        "is_user": False,
        "is_system": False,
        "send_date": "October 18, 2024 8:52pm",
        "mes": "*You wake up.* Hello ☀ — “friend”.",
        "swipe_id": 1,
        "swipes": ["First greeting", "*You wake up.* Hello ☀ — “friend”."],
        "swipe_info": [
            {"send_date": "October 18, 2024 8:52pm", "gen_started": None, "gen_finished": None, "extra": {}},
            {"send_date": "October 18, 2024 8:53pm", "extra": {"api": "openai", "model": "gpt-4o"}},
        ],
        "extra": {},
    },
    {
        "name": "Alex",
        "is_user": True,
        "is_system": False,
        "send_date": 1729284780000,
        "mes": "Where am I?\nLine two\u2028with a line separator.",
        "force_avatar": "User Avatars/alex.png",
        "extra": {"some_plugin": {"k": 1}},
    },
    {
        "name": "Seraphina",
        "is_user": False,
        "is_system": False,
        "send_date": "2024-10-18T20:54:10.123Z",
        "gen_started": "2024-10-18T20:54:05.000Z",
        "gen_finished": "2024-10-18T20:54:10.000Z",
        "mes": "You are in Eldoria.",
        "title": "",
        "swipe_id": 0,
        "swipes": ["You are in Eldoria."],
        "swipe_info": [{"send_date": "2024-10-18T20:54:10.123Z", "extra": {"api": "openai"}}],
        "extra": {
            "api": "openai",
            "model": "gpt-4o",
            "reasoning": "The user is confused.",
            "token_count": 12,
            "memory": "Alex woke in the forest.",
            "unknown_extra": True,
        },
    },
    {
        "name": "Alex",
        "is_user": True,
        "is_system": True,
        "send_date": "2024-6-5 @14h 56m 50s 682ms",
        "mes": "(hidden note)",
        "extra": {"isSmallSys": False},
    },
    {
        "name": "Seraphina",
        "is_user": False,
        "is_system": False,
        "send_date": "2024-7-12@01h31m37s",
        "mes": "Rest now.",
        "extra": {"api": "koboldcpp"},
    },
]


def _jsonl(*objs: dict, sep: str = "\n") -> bytes:
    return (sep.join(json.dumps(o, ensure_ascii=False) for o in objs) + sep).encode("utf-8")


# --------------------------------------------------------------------------- dates


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1729284780000, datetime(2024, 10, 18, 20, 53, 0, tzinfo=UTC)),
        (1729284780123.0, datetime(2024, 10, 18, 20, 53, 0, 123000, tzinfo=UTC)),
        ("1729284780000", datetime(2024, 10, 18, 20, 53, 0, tzinfo=UTC)),
        (1729284780, datetime(2024, 10, 18, 20, 53, 0, tzinfo=UTC)),
        ("1729284780", datetime(2024, 10, 18, 20, 53, 0, tzinfo=UTC)),
        ("June 19, 2023 2:20pm", datetime(2023, 6, 19, 14, 20, tzinfo=UTC)),
        ("October 18, 2024 8:52 pm", datetime(2024, 10, 18, 20, 52, tzinfo=UTC)),
        ("October 18, 2024 12:05am", datetime(2024, 10, 18, 0, 5, tzinfo=UTC)),
        ("October 18, 2024 12:05pm", datetime(2024, 10, 18, 12, 5, tzinfo=UTC)),
        ("2024-7-12@01h31m37s", datetime(2024, 7, 12, 1, 31, 37, tzinfo=UTC)),
        ("2024-6-5 @14h 56m 50s 682ms", datetime(2024, 6, 5, 14, 56, 50, 682000, tzinfo=UTC)),
        ("2024-10-18@20h52m17s", datetime(2024, 10, 18, 20, 52, 17, tzinfo=UTC)),
        ("2024-10-18 @20h 52m 17s 123ms", datetime(2024, 10, 18, 20, 52, 17, 123000, tzinfo=UTC)),
        ("2024-10-18T20:52:17Z", datetime(2024, 10, 18, 20, 52, 17, tzinfo=UTC)),
        ("2024-10-18T20:52:17.456Z", datetime(2024, 10, 18, 20, 52, 17, 456000, tzinfo=UTC)),
        ("2024-10-18T22:52:17+02:00", datetime(2024, 10, 18, 20, 52, 17, tzinfo=UTC)),
        ("2024-10-18T20:52:17", datetime(2024, 10, 18, 20, 52, 17, tzinfo=UTC)),
        ("2024-10-18T20:52:17.5-05:00", datetime(2024, 10, 19, 1, 52, 17, 500000, tzinfo=UTC)),
    ],
)
def test_parse_send_date_formats(value, expected):
    parsed = parse_send_date(value)
    assert parsed == expected
    assert parsed.tzinfo is not None
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        "yesterday",
        "Smarch 3, 2024 1:00pm",
        "2024-13-40@99h99m99s",
        True,
        [],
        {},
        float("nan"),
    ],
)
def test_parse_send_date_unparseable_is_none(value):
    assert parse_send_date(value) is None


def test_format_send_date():
    assert format_send_date(datetime(2024, 10, 18, 20, 52, 17, tzinfo=UTC)) == "October 18, 2024 8:52pm"
    assert format_send_date(datetime(2023, 6, 19, 0, 5, tzinfo=UTC)) == "June 19, 2023 12:05am"
    assert format_send_date(datetime(2023, 6, 19, 12, 0)) == "June 19, 2023 12:00pm"
    plus2 = timezone(timedelta(hours=2))
    assert format_send_date(datetime(2024, 1, 1, 1, 0, tzinfo=plus2)) == "December 31, 2023 11:00pm"
    stamp = format_send_date(datetime(2024, 3, 9, 7, 4, tzinfo=UTC))
    assert parse_send_date(stamp) == datetime(2024, 3, 9, 7, 4, tzinfo=UTC)


# --------------------------------------------------------------------------- parsing


def test_parse_solo_chat_with_header():
    chat = parse_chat_jsonl(_jsonl(HEADER, *MESSAGES))
    assert chat.header == HEADER
    assert chat.user_name == "Alex"
    assert chat.character_name == "Seraphina"
    assert len(chat.messages) == 5
    first = chat.messages[0]
    assert first.name == "Seraphina"
    assert not first.is_user
    assert first.swipes == MESSAGES[0]["swipes"]
    assert first.swipe_id == 1
    assert first.mes == MESSAGES[0]["mes"]
    assert first.send_date == datetime(2024, 10, 18, 20, 52, tzinfo=UTC)
    assert first.raw == MESSAGES[0]
    user = chat.messages[1]
    assert user.is_user
    assert user.swipes == []
    assert user.swipe_id == 0
    assert "\u2028" in user.mes  # not split as a line break
    hidden = chat.messages[3]
    assert hidden.is_system
    assert hidden.send_date == datetime(2024, 6, 5, 14, 56, 50, 682000, tzinfo=UTC)


def test_group_chat_without_header():
    lines = [
        {"name": "Alex", "is_user": True, "is_system": False, "send_date": 1, "mes": "hi all"},
        {
            "name": "Narrator",
            "is_user": False,
            "is_system": True,
            "mes": "The scene opens.",
            "extra": {"type": "narrator"},
        },
        {"name": "Bob", "is_user": False, "is_system": False, "mes": "Hey"},
        {"name": "Carol", "is_user": False, "is_system": False, "mes": "Hello"},
    ]
    chat = parse_chat_jsonl(_jsonl(*lines))
    assert chat.header == {}
    assert len(chat.messages) == 4
    assert chat.user_name == "User"
    assert chat.character_name == "Bob"
    assert write_chat_jsonl(chat.header, [m.raw for m in chat.messages]).startswith(b'{"name":"Alex"')


@pytest.mark.parametrize(
    "header",
    [{"user_name": "U"}, {"name": "Old style header"}, {"chat_metadata": {}}],
)
def test_header_detection(header):
    chat = parse_chat_jsonl(_jsonl(header, {"name": "C", "is_user": False, "mes": "x"}))
    assert chat.header == header
    assert len(chat.messages) == 1


def test_header_only_chat_is_empty_not_error():
    chat = parse_chat_jsonl(_jsonl(HEADER))
    assert chat.messages == []
    assert chat.character_name == "Seraphina"


def test_blank_lines_crlf_and_bom():
    raw = b"\xef\xbb\xbf" + _jsonl(HEADER, MESSAGES[4], sep="\r\n\r\n")
    chat = parse_chat_jsonl(raw)
    assert chat.header == HEADER
    assert [m.mes for m in chat.messages] == ["Rest now."]


def test_missing_mes_and_character_name_fallback():
    chat = parse_chat_jsonl(_jsonl({"user_name": "Me"}, {"name": "Zed", "is_user": False}))
    assert chat.messages[0].mes == ""
    assert chat.messages[0].send_date is None
    assert chat.character_name == "Zed"


def test_swipe_objects_are_flattened_and_swipe_id_clamped():
    line = {
        "name": "C",
        "is_user": False,
        "mes": {"message": "second"},
        "swipes": [{"message": "first"}, {"mes": "second"}, {"text": "third"}, "fourth", None],
        "swipe_id": 9,
    }
    msg = parse_chat_jsonl(_jsonl(line)).messages[0]
    assert msg.swipes == ["first", "second", "third", "fourth", ""]
    assert msg.swipe_id == 4
    assert msg.mes == "second"
    assert msg.raw == line
    assert parse_chat_jsonl(_jsonl({**line, "swipe_id": -3})).messages[0].swipe_id == 0


def test_bad_swipes_refused():
    with pytest.raises(ChatImportError, match="Line 2: 'swipes' must be a list"):
        parse_chat_jsonl(_jsonl(HEADER, {"name": "C", "mes": "x", "swipes": "x"}))
    with pytest.raises(ChatImportError, match="Line 1: swipe 2 is not text"):
        parse_chat_jsonl(_jsonl({"name": "C", "mes": "x", "swipes": ["a", 5]}))


def test_malformed_line_names_line_number():
    raw = _jsonl(HEADER, *MESSAGES[:4]) + b'{"name": "C", "mes": oops}\n'
    with pytest.raises(ChatImportError) as exc:
        parse_chat_jsonl(raw)
    assert str(exc.value).startswith("Line 6 is not valid JSON: ")


def test_non_object_line_names_line_number():
    raw = _jsonl(HEADER) + b"\n[1, 2]\n"
    with pytest.raises(ChatImportError, match="^Line 3 is not valid JSON"):
        parse_chat_jsonl(raw)


@pytest.mark.parametrize("raw", [b"", b"\n\n  \n"])
def test_empty_file_refused(raw):
    with pytest.raises(ChatImportError, match="no chat messages"):
        parse_chat_jsonl(raw)


def test_oversize_refused():
    raw = b" " * (MAX_CHAT_BYTES + 1)
    with pytest.raises(ChatImportError, match="64.0 MB; chats larger than 64 MB are refused"):
        parse_chat_jsonl(raw)


def test_not_utf8_refused():
    with pytest.raises(ChatImportError, match="UTF-8"):
        parse_chat_jsonl(b'{"name": "\xff"}\n')


# --------------------------------------------------------------------------- export


def test_round_trip_is_lossless():
    original = parse_chat_jsonl(_jsonl(HEADER, *MESSAGES))
    lines = [
        message_line(
            name=m.name,
            is_user=m.is_user,
            is_system=m.is_system,
            mes=m.mes,
            send_date=m.send_date,
            swipes=m.swipes,
            swipe_id=m.swipe_id,
            base=m.raw,
        )
        for m in original.messages
    ]
    raw = write_chat_jsonl(original.header, lines)
    again = parse_chat_jsonl(raw)
    assert again.header == HEADER
    assert [m.raw for m in again.messages] == MESSAGES
    # Original send_date spellings survive verbatim.
    assert again.messages[1].raw["send_date"] == 1729284780000
    assert again.messages[3].raw["send_date"] == "2024-6-5 @14h 56m 50s 682ms"


def test_message_line_does_not_mutate_base():
    base = json.loads(json.dumps(MESSAGES[0]))
    message_line(
        name="X",
        is_user=False,
        is_system=False,
        mes="new",
        send_date=datetime.now(UTC),
        swipes=[],
        swipe_id=0,
        base=base,
    )
    assert base == MESSAGES[0]


def test_message_line_edits_override_base():
    when = datetime(2025, 1, 2, 15, 4, 5, tzinfo=UTC)
    line = message_line(
        name="Seraphina",
        is_user=False,
        is_system=True,
        mes="edited",
        send_date=when,
        swipes=["a", "edited"],
        swipe_id=1,
        base=MESSAGES[2],
    )
    assert line["mes"] == "edited"
    assert line["is_system"] is True
    assert line["swipes"] == ["a", "edited"]
    assert line["swipe_id"] == 1
    assert line["send_date"] == "January 2, 2025 3:04pm"  # date changed -> re-stamped
    assert line["extra"] == MESSAGES[2]["extra"]
    assert line["swipe_info"] == MESSAGES[2]["swipe_info"]


def test_message_line_without_base():
    when = datetime(2024, 10, 18, 20, 52, tzinfo=UTC)
    plain = message_line(
        name="Alex", is_user=True, is_system=False, mes="hi", send_date=when, swipes=[], swipe_id=0
    )
    assert plain == {
        "name": "Alex",
        "is_user": True,
        "is_system": False,
        "send_date": "October 18, 2024 8:52pm",
        "mes": "hi",
        "extra": {},
    }
    swiped = message_line(
        name="C", is_user=False, is_system=False, mes="b", send_date=when, swipes=["a", "b"], swipe_id=1
    )
    assert swiped["swipes"] == ["a", "b"]
    assert swiped["swipe_id"] == 1


def test_write_chat_jsonl_format():
    out = write_chat_jsonl({"user_name": "U"}, [{"name": "C", "mes": "é ☂"}])
    assert out == '{"user_name":"U"}\n{"name":"C","mes":"é ☂"}\n'.encode()
    assert write_chat_jsonl({}, [{"mes": "x"}]) == b'{"mes":"x"}\n'

"""MCP servers' pure rules: names, URLs, what a discovery keeps, tool names, result text, "ago"."""

from datetime import UTC, datetime, timedelta

import pytest

from app.platform.core.errors import UserError
from app.tools.mcp.core.rules import (
    MAX_SCHEMA_CHARS,
    MAX_TOOLS,
    Part,
    ago,
    check_name,
    check_token,
    check_url_form,
    keep_tools,
    result_text,
    tool_function_name,
)

OBJ = {"type": "object", "properties": {}}


@pytest.mark.parametrize("name", ["search", "my-Server-2", "a" * 40])
def test_good_names(name):
    assert check_name(f" {name} ") == name


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("", "needs a name"),
        ("a" * 41, "at most 40"),
        ("has space", "letters"),
        ("under_score", "letters"),
        ("é", "letters"),
    ],
)
def test_bad_names(name, words):
    with pytest.raises(UserError, match=words):
        check_name(name)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("", "needs a URL"),
        ("ftp://x.example/mcp", "https://"),
        ("https:///mcp", "no host"),
        ("https://u:p@x.example/mcp", "Token field"),
        ("https://x.example:99999/mcp", "could not be read"),
        ("https://x.example/" + "a" * 2048, "longer than 2048"),
    ],
)
def test_bad_urls(url, words):
    with pytest.raises(UserError, match=words):
        check_url_form(url)


def test_tokens():
    assert check_token(" sk-1 ") == "sk-1"
    with pytest.raises(UserError, match="longer than 4096"):
        check_token("k" * 4097)
    with pytest.raises(UserError, match="line breaks"):
        check_token("a\nb")


def test_a_discovery_keeps_at_most_100_tools_and_leaves_out_oversized_or_odd_schemas():
    listed = [(f"t{n}", "d", OBJ) for n in range(MAX_TOOLS + 10)]
    listed[3] = ("big", "d", {"type": "object", "description": "x" * MAX_SCHEMA_CHARS})
    listed[4] = ("odd", "d", ["not", "an", "object"])
    listed[5] = ("t0", "repeated", OBJ)
    listed[6] = ("notobj", "d", {"type": "array"})
    listed[7] = ("invalid", "d", {"type": "object", "required": "query"})
    snapshot = keep_tools(listed)
    assert len(snapshot.tools) == MAX_TOOLS  # 110 listed, 5 refused, 105 good: the first 100 kept
    assert snapshot.tools[-1].name == "t104"
    assert snapshot.left_out[-5:] == [f"t{n} (more than {MAX_TOOLS} tools)" for n in range(105, 110)]
    assert [t.name for t in snapshot.tools][:4] == ["t0", "t1", "t2", "t8"]
    assert 'notobj (its argument schema is not of type "object")' in snapshot.left_out
    assert any(
        s.startswith("invalid (its argument schema is not valid JSON Schema") for s in snapshot.left_out
    )
    assert any(s.startswith("big (its argument schema is over 20 kB") for s in snapshot.left_out)
    assert "odd (its argument schema is not a JSON object)" in snapshot.left_out
    assert "t0 (no name or a repeated one)" in snapshot.left_out


def test_a_tool_name_over_128_characters_is_left_out():
    snapshot = keep_tools([("n" * 129, "d", OBJ), ("n" * 128, "d", OBJ)])
    assert [len(t.name) for t in snapshot.tools] == [128]
    assert snapshot.left_out == ["n" * 80 + "… (a name over 128 characters)"]


def test_descriptions_are_cut_and_a_missing_one_is_empty():
    snapshot = keep_tools([("a", "x" * 5000, OBJ), ("b", None, OBJ)])
    assert len(snapshot.tools[0].description) == 2000 and snapshot.tools[1].description == ""


def test_tool_names_are_cleaned_bounded_and_unique():
    taken: set[str] = set()
    assert tool_function_name("web", "search", taken) == "mcp_web__search"
    assert tool_function_name("web", "search.v2 (beta)", taken) == "mcp_web__search_v2_beta_"
    long = tool_function_name("s" * 40, "t" * 40, taken)
    assert len(long) == 64 and long.startswith("mcp_" + "s" * 40 + "__")
    again = tool_function_name("s" * 40, "t" * 40, taken)
    assert len(again) == 64 and again.endswith("_2") and again != long
    assert tool_function_name("web", "search", taken) == "mcp_web__search_2"


def test_result_text_joins_text_names_other_parts_and_is_cut():
    parts = [Part("text", "one"), Part("image"), Part("text", "two")]
    assert result_text(parts, None, limit=100) == "one\n\n[image left out]\n\ntwo"
    assert result_text([], {"answer": 42}, limit=100) == '{"answer": 42}'
    assert result_text([], None, limit=100) == "(the tool returned nothing)"
    cut = result_text([Part("text", "x" * 50)], None, limit=10)
    assert cut.startswith("x" * 10 + "\n[cut: the result was longer than 10 characters]")


def test_ago():
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert ago(now - timedelta(seconds=30), now) == "just now"
    assert ago(now - timedelta(minutes=1), now) == "1 minute ago"
    assert ago(now - timedelta(minutes=2, seconds=59), now) == "2 minutes ago"
    assert ago(now - timedelta(hours=3), now) == "3 hours ago"
    assert ago(now - timedelta(days=5), now) == "5 days ago"
    assert ago(now + timedelta(minutes=5), now) == "just now"  # a clock set back

"""An MCP tool's arguments model: it declares the server's own JSON schema and checks against it."""

import pytest
from pydantic import ValidationError

from app.tools.mcp.tools import args_model

SCHEMA = {
    "type": "object",
    "title": "searchArguments",
    "properties": {
        "query": {"type": "string", "maxLength": 10},
        "when": {"oneOf": [{"type": "integer"}, {"type": "null"}]},
    },
    "required": ["query"],
}


def test_the_declared_schema_is_the_servers_as_it_is():
    model = args_model("mcp_s__search", SCHEMA)
    assert model.model_json_schema() == SCHEMA
    model.model_json_schema()["properties"].clear()  # a caller's change is its own copy's
    assert model.model_json_schema() == SCHEMA


def test_arguments_are_checked_and_sent_on_unchanged():
    model = args_model("mcp_s__search", SCHEMA)
    assert model.model_validate({"query": "tea", "when": None}).model_dump() == {"query": "tea", "when": None}
    assert model.model_validate({"query": "tea", "extra": [1, {"a": 2}]}).model_dump()["extra"] == [
        1,
        {"a": 2},
    ]
    for bad, words in (
        ({}, "'query' is a required property"),
        ({"query": "x" * 11}, "query: 'xxxxxxxxxxx' is too long"),
        ({"query": "tea", "when": "soon"}, "when"),
        (["query"], "must be a JSON object"),
    ):
        with pytest.raises(ValidationError, match=words):
            model.model_validate(bad)


def test_a_schema_that_cannot_be_applied_leaves_the_checking_to_the_server():
    unreadable = args_model("mcp_s__a", {"type": "objekt"})
    assert unreadable.model_validate({"a": 1}).model_dump() == {"a": 1}
    remote = args_model(
        "mcp_s__b", {"type": "object", "properties": {"q": {"$ref": "https://x.example/s.json"}}}
    )
    assert remote.model_validate({"q": 1}).model_dump() == {"q": 1}

"""MCP servers' rules, pure: what a server's name and URL may be, what of a discovery is kept, what the
registry calls each discovered tool, how a call's content becomes the text the model reads, and how
long ago a discovery was, in words.

Decisions:
- A server's name is its namespace in tool names (`mcp_<server>__<tool>`), so it is kept to letters,
  digits and hyphens and compared without case: "Search" and "search" would make the same tool names.
- A discovery keeps at most MAX_TOOLS tools; a tool whose input schema is larger than
  MAX_SCHEMA_CHARS, is not an object schema or is not valid JSON Schema is left out and named, never
  cut or mended (a cut schema would validate the wrong thing). Descriptions are cut: they only inform the model.
- Tool names are what providers accept (`[A-Za-z0-9_-]`, ≤ 64 characters) and unique: a name that
  clashes after cleaning gets `_2`, `_3`… inside the 64.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from jsonschema import exceptions as schema_errors
from jsonschema import validators

from app.platform.core.errors import UserError

MAX_SERVERS = 20
MAX_NAME_CHARS = 40
MAX_URL_CHARS = 2048
MAX_TOKEN_CHARS = 4096
MAX_TOOLS = 100
MAX_SCHEMA_CHARS = 20_000
MAX_DESCRIPTION_CHARS = 2_000
MAX_TOOL_NAME_CHARS = 64
MAX_SERVER_TOOL_NAME_CHARS = 128  # what the MCP specification allows a tool's name
MAX_ERROR_CHARS = 500
SERVER_TYPES = {
    "general": "General purpose",
    "web_search": "Web search",
    "url_fetch": "URL reading",
}
# The registry family a server's tools take: the replacement types take the built-in's family (and
# so its macro and {{if tool_family:…}}).
FAMILY_OF_TYPE = {"general": "mcp", "web_search": "web_search", "url_fetch": "url_fetch"}

_NAME = re.compile(r"[A-Za-z0-9-]+")
_NOT_TOOL_CHAR = re.compile(r"[^A-Za-z0-9_-]+")


def check_name(name: str) -> str:
    """The name as typed (trimmed), or UserError saying what is wrong."""
    name = name.strip()
    if not name:
        raise UserError("An MCP server needs a name.")
    if len(name) > MAX_NAME_CHARS:
        raise UserError(f"An MCP server's name is at most {MAX_NAME_CHARS} characters.")
    if not _NAME.fullmatch(name):
        raise UserError(
            "An MCP server's name may hold only letters (a–z, A–Z), digits and hyphens: it becomes part "
            "of its tools' names."
        )
    return name


def check_url_form(url: str) -> str:
    """The URL (trimmed) when it is written as an http(s) URL with a host; the address itself is
    checked when Sugo connects (app/tools/net/address.py)."""
    url = url.strip()
    if not url:
        raise UserError("An MCP server needs a URL (its Streamable HTTP endpoint, often ending in /mcp).")
    if len(url) > MAX_URL_CHARS:
        raise UserError(f"The URL is longer than {MAX_URL_CHARS} characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (reading it checks it)
    except ValueError as err:
        raise UserError(f"The URL could not be read ({err}).") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise UserError("The URL must start with https:// (or http://).")
    if not parts.hostname:
        raise UserError("The URL has no host name.")
    if parts.username or parts.password:
        raise UserError("Put the token in the Token field, not in the URL.")
    return url


def check_token(token: str) -> str:
    token = token.strip()
    if len(token) > MAX_TOKEN_CHARS:
        raise UserError(f"The token is longer than {MAX_TOKEN_CHARS} characters.")
    if any(ch in token for ch in "\r\n\x00"):
        raise UserError("The token cannot contain line breaks.")
    return token


def check_type(server_type: str) -> str:
    if server_type not in SERVER_TYPES:
        raise UserError("The server type must be General purpose, Web search or URL reading.")
    return server_type


@dataclass(frozen=True)
class DiscoveredTool:
    name: str
    description: str
    input_schema: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass(frozen=True)
class Snapshot:
    tools: list[DiscoveredTool]
    left_out: list[str]  # "name (why)" for each tool not kept


def keep_tools(listed: Iterable[tuple[str, str | None, Any]]) -> Snapshot:
    """What of a server's tool list (name, description, input schema) is saved."""
    tools: list[DiscoveredTool] = []
    left_out: list[str] = []
    seen: set[str] = set()
    for name, description, schema in listed:
        shown = (name or "")[:80]
        if not name or name in seen:
            left_out.append(f"{shown or '(no name)'} (no name or a repeated one)")
            continue
        if len(name) > MAX_SERVER_TOOL_NAME_CHARS:
            left_out.append(f"{shown}… (a name over {MAX_SERVER_TOOL_NAME_CHARS} characters)")
            continue
        if len(tools) >= MAX_TOOLS:
            left_out.append(f"{shown} (more than {MAX_TOOLS} tools)")
            continue
        if not isinstance(schema, dict):
            left_out.append(f"{shown} (its argument schema is not a JSON object)")
            continue
        if len(json.dumps(schema, ensure_ascii=False)) > MAX_SCHEMA_CHARS:
            left_out.append(f"{shown} (its argument schema is over {MAX_SCHEMA_CHARS // 1000} kB)")
            continue
        if why := schema_problem(schema):
            left_out.append(f"{shown} ({why})")
            continue
        seen.add(name)
        tools.append(DiscoveredTool(name, (description or "").strip()[:MAX_DESCRIPTION_CHARS], schema))
    return Snapshot(tools, left_out)


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why a tool's input schema cannot be offered to a model, or None: providers take an object schema,
    and a schema that is not valid JSON Schema could not check the model's arguments."""
    if schema.get("type") != "object":
        return 'its argument schema is not of type "object"'
    try:
        validators.validator_for(schema).check_schema(schema)
    except schema_errors.SchemaError as err:
        return f"its argument schema is not valid JSON Schema: {err.message[:120]}"
    return None


def tool_function_name(server: str, tool: str, taken: set[str]) -> str:
    """`mcp_<server>__<tool>`, cleaned to what providers accept, ≤ 64 characters, not in `taken`
    (which it joins)."""
    base = _NOT_TOOL_CHAR.sub("_", f"mcp_{server}__{tool}")[:MAX_TOOL_NAME_CHARS]
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: MAX_TOOL_NAME_CHARS - len(suffix)] + suffix
    taken.add(name)
    return name


@dataclass(frozen=True)
class Part:
    kind: str  # "text", "image", "audio", "resource", "resource_link", …
    text: str = ""


def result_text(parts: Sequence[Part], structured: Any, *, limit: int) -> str:
    """The text a call's content makes for the model: text parts joined by a blank line, other parts
    named; the structured content as JSON when there is no text; cut at `limit` with a note."""
    pieces = [p.text if p.kind == "text" else f"[{p.kind.replace('_', ' ')} left out]" for p in parts]
    text = "\n\n".join(piece for piece in pieces if piece)
    if not text.strip() and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    if not text.strip():
        text = "(the tool returned nothing)"
    if len(text) > limit:
        text = text[:limit] + f"\n[cut: the result was longer than {limit:,} characters]"
    return text


def short_error(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= MAX_ERROR_CHARS else message[: MAX_ERROR_CHARS - 1] + "…"


def ago(then: datetime, now: datetime) -> str:
    """ "just now", "2 minutes ago", "3 hours ago", "5 days ago" (both aware or both naive)."""
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 60:
        return "just now"
    for size, unit in ((86_400, "day"), (3_600, "hour"), (60, "minute")):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"  # unreachable: seconds >= 60 matched a unit

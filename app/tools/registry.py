"""The one tool registry. Each tool is a small module under `app/tools/builtin/` (or a tool an MCP
server offered, app/tools/mcp/) described by a `Tool`: its function name, what it is for, its argument
schema (a pydantic model: the JSON schema sent to the provider and the validation of what the model
sends back come from one place), the permission it needs, its macro family, and its handler.

The provider declarations, the `{…_tool}` macros, `{{if tool:…}}`, Deliberate Tool Mode and the
Permissions page read this registry and nothing else.

A handler is `run(ctx, args) -> ToolResult | str`, sync (it runs on a worker thread: most tools read
or write the database) or async (fetches, MCP calls). It raises `ToolError` with a calm sentence for
the model when it cannot do what was asked; anything else it raises is logged and reaches the model
as "the tool failed". Either way the reply goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from app.platform.services import Services

# Permission switches (Settings → Permissions), with their defaults: the capability a tool needs.
PERMISSIONS: dict[str, tuple[str, bool]] = {
    "memory": ("Long-term and short-term memory", True),
    "tasks": ("Tasks and reminders", True),
    "documents": ("Read documents attached to messages", True),
    "metadata": ("Message metadata and user info", True),
    "web_search": ("Web search", False),
    "url_fetch": ("Read web pages (URLs)", False),
    "manage_message": ("Edit or delete the character's own recent messages", False),
}

DEFAULT_TIMEOUT_S = 20.0
# What reaches the model from one call, at most; the rest is cut with a note saying so.
MAX_RESULT_CHARS = 20_000


class ToolError(Exception):
    """What the model reads when a tool cannot do what it asked (bad target, limit reached)."""


@dataclass(frozen=True)
class ToolResult:
    text: str  # what the model reads (data, never a template)
    # A quiet line shown to the user under the reply ("Reminder set for Friday 09:00").
    notice: str | None = None


@dataclass(frozen=True)
class ToolContext:
    """What a handler may use: the services (engine, key box, settings) and where the call happens."""

    services: Services
    chat_id: int
    character_id: int | None  # the speaking character
    persona_id: int | None
    message_id: int | None  # the reply being written (None in a dry run)
    now: datetime  # aware, UTC; tests move it
    # Tools the turn must not run even if asked (a reminder's own turn leaves the task tools out).
    excluded: frozenset[str] = frozenset()
    # What this turn can do (for the capabilities tool): the tool names declared, and for each tool
    # left out, why ("Web search is off in Settings → Permissions").
    declared: tuple[str, ...] = ()
    missing: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[ToolContext, Any], "ToolResult | str | Awaitable[ToolResult | str]"]


@dataclass(frozen=True)
class Tool:
    name: str  # the function name the model calls: create_long_term_memory
    description: str  # for the model
    args: type[BaseModel]
    run: Handler
    permission: str | None  # a key of PERMISSIONS; None: always available with tools on
    # The macro that names this tool in prompts, without braces ("memory_tool"), and its family for
    # {{if tool_family:…}} (web_search, url_fetch, memory, task, …).
    macro: str | None = None
    family: str = ""
    label: str = ""  # for people: "Create a memory"
    timeout_s: float = DEFAULT_TIMEOUT_S
    source: str = "built-in"  # or "mcp:<server name>"

    def declaration(self) -> dict[str, Any]:
        """Provider-neutral: {name, description, parameters (JSON schema)}."""
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        return {"name": self.name, "description": self.description, "parameters": schema}


@dataclass
class ToolRegistry:
    """The built-in tools, by name; MCP tools join per turn from the saved discoveries."""

    tools: dict[str, Tool] = field(default_factory=dict)

    def __init__(self, tools: Sequence[Tool] = ()) -> None:
        self.tools = {}
        self.extend(tools)

    def add(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise ValueError(f"Two tools are named {tool.name!r}.")
        self.tools[tool.name] = tool

    def extend(self, tools: Sequence[Tool]) -> None:
        for tool in tools:
            self.add(tool)

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def __iter__(self):
        return iter(list(self.tools.values()))

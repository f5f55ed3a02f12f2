"""A turn's tools and running one call.

`turn_tools` decides what a reply may call: the connection must allow tools (its "Tools" field; in
"auto" a provider that refused them once is not asked again), the purpose must be a reply (Continue,
Impersonate and helper calls never get tools), each tool's permission must be on, and the turn's
exclusions (a reminder's own turn) apply. Deliberate Tool Mode then narrows the list to what the user's
message asks for.

`run_call` runs one call the model made: arguments parsed and validated before anything runs, the
handler on a worker thread (sync) or the loop (async) within its time limit, the result capped before
it reaches the model. Whatever goes wrong becomes an error result for the model and a calm notice for
the user; it never raises.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pydantic import ValidationError
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

from app.connections.core.toolcalls import ToolCall
from app.connections.models import Connection
from app.tools.mcp.tools import mcp_tools
from app.tools.registry import MAX_RESULT_CHARS, PERMISSIONS, Tool, ToolContext, ToolError, ToolResult
from app.tools.settings import ToolSettings

log = logging.getLogger(__name__)

MAX_NOTICE_CHARS = 300
TOOLS_MODES = ("auto", "on", "off")


@dataclass
class TurnTools:
    """What one turn may call, and why the rest is missing."""

    available: list[Tool] = field(default_factory=list)  # before Deliberate Tool Mode
    declared: list[Tool] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)  # tool name -> why it is not offered
    off_reason: str | None = None  # no tools at all this turn, and why
    notes: list[str] = field(default_factory=list)  # for Peek Prompt (Deliberate Tool Mode's triggers)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.declared)


def connection_off_reason(connection: Connection | None) -> str | None:
    if connection is None:
        return "No connection is set up."
    if connection.kind == "text":  # a raw prompt has no place for tool declarations
        return f"The connection {connection.name} sends a raw prompt (text completion): it has no tools."
    mode = connection.tools_mode if connection.tools_mode in TOOLS_MODES else "auto"
    if mode == "off":
        return f"Tools are off for the connection {connection.name}."
    if mode == "auto" and connection.tools_refused:
        return f"The connection {connection.name} refused tools: {connection.tools_refused}"
    return None


def available_tools(
    tools: Sequence[Tool],
    settings: ToolSettings,
    *,
    connection: Connection | None,
    purpose: str,
    excluded: frozenset[str] = frozenset(),
) -> TurnTools:
    """The tools this turn may offer before Deliberate Tool Mode narrows them (pure over its inputs)."""
    out = TurnTools()
    if purpose != "reply":
        out.off_reason = "Tools are offered to replies only (not to Continue or Impersonate)."
    else:
        out.off_reason = connection_off_reason(connection)
    for tool in tools:
        if out.off_reason:
            out.missing[tool.name] = out.off_reason
        elif tool.name in excluded:
            out.missing[tool.name] = "Left out of this turn (a reminder's own turn sets no new reminders)."
        elif not settings.allowed(tool.permission):
            label = PERMISSIONS.get(tool.permission or "", (tool.permission or "",))[0]
            out.missing[tool.name] = f"{label} is off in Tools & Permissions."
        else:
            out.available.append(tool)
    out.declared = list(out.available)
    return out


@dataclass(frozen=True)
class CallOutcome:
    """One call as stored with the reply and shown under it."""

    id: str
    name: str
    arguments: str
    result: str
    error: bool
    ms: int
    notice: str | None = None

    def record(self, *, round_: int, at: int, label: str = "") -> dict:
        record = {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "result": self.result,
            "error": self.error,
            "ms": self.ms,
            "round": round_,
            "at": at,
        }
        if label:
            record["label"] = label
        if self.notice:
            record["notice"] = self.notice
        return record


def _capped(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return text[:MAX_RESULT_CHARS] + f"\n[… cut at {MAX_RESULT_CHARS:,} characters]"


async def run_call(tool: Tool | None, call: ToolCall, ctx: ToolContext) -> CallOutcome:
    started = time.perf_counter()

    def done(result: str, *, error: bool, notice: str | None = None) -> CallOutcome:
        ms = int((time.perf_counter() - started) * 1000)
        notice = notice[:MAX_NOTICE_CHARS] if notice else None
        return CallOutcome(call.id, call.name, call.arguments, _capped(result), error, ms, notice)

    if tool is None or call.name in ctx.excluded:
        return done(f"There is no tool named {call.name!r} on this turn.", error=True)
    try:
        raw = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return done("The arguments are not valid JSON; nothing was done.", error=True)
    if not isinstance(raw, dict):
        return done("The arguments must be a JSON object; nothing was done.", error=True)
    try:
        args = tool.args.model_validate(raw)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in err.errors()[:5]
        )
        return done(f"The arguments were refused ({problems}); nothing was done.", error=True)
    label = tool.label or tool.name
    try:
        if inspect.iscoroutinefunction(tool.run):
            result = await asyncio.wait_for(tool.run(ctx, args), timeout=tool.timeout_s)
        else:
            # A sync handler that overruns keeps its thread until it returns; the reply does not wait.
            result = await asyncio.wait_for(run_in_threadpool(tool.run, ctx, args), timeout=tool.timeout_s)
    except TimeoutError:
        return done(
            f"The tool did not answer within {tool.timeout_s:g} s and was cut off.",
            error=True,
            notice=f"{label} took too long and was cut off after {tool.timeout_s:g} s.",
        )
    except ToolError as err:
        return done(str(err), error=True, notice=f"{label}: {err}")
    except Exception:
        log.exception("the tool %s failed in chat %s", call.name, ctx.chat_id)
        return done(
            "The tool failed with an internal error; nothing more is known.",
            error=True,
            notice=f"{label} failed (the server log has the details).",
        )
    if isinstance(result, ToolResult):
        return done(result.text, error=False, notice=result.notice)
    return done(str(result), error=False)


def declared_runners(session, services, names: Sequence[str]) -> dict[str, Tool]:
    """The tools a prompt declared, by name, to run the model's calls. A name no longer known (an MCP
    server removed meanwhile) is left out: a call to it gets an error result."""
    wanted = set(names)
    known = {t.name: t for t in turn_registry(session, services, None) if t.name in wanted}
    return {name: known[name] for name in names if name in known}


# An MCP server typed as a web search or a URL reader takes the place of the built-in tool of that
# family, and of its macro, so {web_search_tool} names the server's tool.
_REPLACED_MACROS = {"web_search": "web_search_tool", "url_fetch": "url_fetch_tool"}


def turn_registry(session, services, settings: ToolSettings | None) -> list[Tool]:
    """Every tool this app knows for a turn: the built-in ones, then those of the enabled MCP servers
    (from their saved discoveries; no server is asked). A replacement server's tools follow the
    permission of the family they replace (Web search, Read web pages)."""
    builtin = list(services.tools)
    if not _has_enabled_servers(session):
        return builtin
    served = mcp_tools(session, services)
    replaced = {t.family for t in served if t.family in _REPLACED_MACROS}
    served = [
        replace(t, macro=_REPLACED_MACROS[t.family], permission=t.family)
        if t.family in _REPLACED_MACROS
        else t
        for t in served
    ]
    return [t for t in builtin if t.family not in replaced] + served


_ANY_ENABLED_SERVER = text("SELECT 1 FROM mcp_server WHERE enabled = TRUE LIMIT 1")


def _has_enabled_servers(session) -> bool:
    return bool(session.connection().execute(_ANY_ENABLED_SERVER).first())

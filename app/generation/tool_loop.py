"""The tool rounds of one reply.

The model streams; when a round ends with tool calls, they run (app/tools/service.py `run_call`: each
validated, time-limited, its failure an error result), each call and its result are stored with the
reply's version and shown under it, and the model is asked again with the calls and results appended,
as its API expects. Up to the round cap (Settings → Tools & Permissions, 1–20, default 5): a model still
calling tools after it gets no more runs; its reply ends with what it wrote, and says so.

Stop works during a tool round: the round's calls are cut (an async tool is cancelled; a sync one is
left to finish on its thread, its result dropped) and the reply ends with what it has.

A provider that refuses the request because of its tools (HTTP 400 naming them) is asked once more
without them, and a connection in "auto" mode remembers it (Connections shows the reason).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from app.connections.models import Connection
from app.connections.providers import get_provider
from app.connections.providers.base import GenerationParams, ProviderConfig, ProviderError, ToolCall, Usage
from app.platform.services import Services
from app.tools.registry import Tool, ToolContext
from app.tools.service import CallOutcome, run_call

log = logging.getLogger(__name__)

_NAMES_TOOLS = re.compile(r"\btools?\b|tool_choice|function[ _]call", re.IGNORECASE)
CAP_NOTE = "The reply reached the limit of {cap} tool rounds and ended with what it had."


@dataclass
class ToolRounds:
    """What the rounds of one reply did."""

    usage: Usage | None = None
    model: str | None = None
    rounds: int = 0
    cap_hit: bool = False
    refused: str | None = None  # the provider refused tools: its words
    calls: list[dict] = field(default_factory=list)  # stored records, in order


def refuses_tools(err: ProviderError) -> bool:
    """A 400 whose words name tools: the model or server does not take them."""
    return err.kind == "bad_request" and bool(_NAMES_TOOLS.search(err.message))


def without_tools(messages: Sequence[dict]) -> list[dict]:
    """The messages with earlier tool rounds folded away (for a provider asked without tools): the
    text the model wrote stays, the calls and results go."""
    out: list[dict] = []
    for message in messages:
        if message.get("role") == "tool":
            continue
        if message.get("tool_calls"):
            if (message.get("content") or "").strip():
                out.append({"role": "assistant", "content": message["content"]})
            continue
        out.append(message)
    return out


def remember_refusal(services: Services, connection_id: int, reason: str) -> None:
    with Session(services.engine) as session:
        conn = session.get(Connection, connection_id)
        if conn is not None and conn.tools_mode == "auto":
            conn.tools_refused = reason[:300]
            session.add(conn)
            session.commit()


@dataclass
class RoundHooks:
    """What the reply path does with each piece (the loop itself knows nothing of pages or storage)."""

    on_event: Callable[[Any], Awaitable[None]]  # a StreamEvent's text and reasoning
    on_call_started: Callable[[ToolCall, int], Awaitable[None]]
    on_call_done: Callable[[dict], Awaitable[None]]  # the stored record
    text: Callable[[], str]  # the reply's text so far (a round's `at` is its length when the calls came)
    stopped: asyncio.Event


async def stream_with_tools(
    *,
    services: Services,
    config: ProviderConfig,
    kind: str,
    messages: list[dict],
    params: GenerationParams,
    runners: dict[str, Tool],
    cap: int,
    ctx: ToolContext,
    connection_id: int | None,
    hooks: RoundHooks,
) -> ToolRounds:
    out = ToolRounds()
    provider = get_provider(kind)
    messages = list(messages)
    asked_without = False
    gap = False  # the text after a tool round starts a new paragraph when the text before did not end one
    while True:
        round_start = len(hooks.text())
        calls: tuple[ToolCall, ...] = ()
        stream = provider.stream_chat(config, messages, params)
        seen = False
        try:
            async for event in stream:
                if hooks.stopped.is_set():
                    break
                if event.text or event.reasoning:
                    seen = True
                    if gap and event.text:
                        event, gap = replace(event, text="\n\n" + event.text.lstrip()), False
                    await hooks.on_event(event)
                if event.usage:
                    out.usage = event.usage
                if event.model:
                    out.model = event.model
                if event.tool_calls:
                    calls = event.tool_calls
        except ProviderError as err:
            if not params.tools or seen or asked_without or not refuses_tools(err):
                raise
            # Asked again once without tools; an "auto" connection stops offering them.
            asked_without = True
            out.refused = err.message
            if connection_id is not None:
                await run_in_threadpool(remember_refusal, services, connection_id, err.message)
            params = replace(params, tools=())
            messages = without_tools(messages)
            continue
        finally:
            await stream.aclose()
        if hooks.stopped.is_set() or not calls:
            return out
        if out.rounds >= cap:
            out.cap_hit = True
            return out
        out.rounds += 1
        at = len(hooks.text())
        gap = bool(hooks.text()) and not hooks.text()[-1].isspace()
        outcomes = await _run_round(calls, runners, ctx, hooks, services.clock.now)
        if outcomes is None:  # stopped mid-round
            return out
        records = []
        for call, outcome in zip(calls, outcomes, strict=True):
            tool = runners.get(call.name)
            record = outcome.record(round_=out.rounds, at=at, label=tool.label if tool else "")
            records.append(record)
            out.calls.append(record)
            await hooks.on_call_done(record)
        messages.append(
            {
                "role": "assistant",
                "content": hooks.text()[round_start:at],
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments or "{}"} for c in calls],
            }
        )
        for record in records:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": record["id"],
                    "name": record["name"],
                    "content": record["result"],
                    "is_error": record["error"],
                }
            )


async def _run_round(
    calls: Sequence[ToolCall],
    runners: dict[str, Tool],
    ctx: ToolContext,
    hooks: RoundHooks,
    now: Callable[[], datetime],
) -> list[CallOutcome] | None:
    """The round's calls one after another (their order can matter: create, then update); None when
    Stop came first."""
    outcomes: list[CallOutcome] = []
    for call in calls:
        await hooks.on_call_started(call, len(outcomes))
        task = asyncio.ensure_future(run_call(runners.get(call.name), call, replace(ctx, now=now())))
        stop = asyncio.ensure_future(hooks.stopped.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not task.done():
            task.cancel()
            return None
        outcomes.append(task.result())
    return outcomes

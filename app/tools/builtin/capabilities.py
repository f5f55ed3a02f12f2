"""review_capabilities: what this turn can do, in a few plain lines, so the character can answer
"can you look that up?" truthfully. It reads what the turn declared and why the other tools are
missing (ToolContext), plus the chat's model name (one row read)."""

from __future__ import annotations

from pydantic import BaseModel
from sqlmodel import Session

from app.chats.service import chat_connection, get_chat
from app.platform.core.errors import NotFound
from app.tools.registry import Tool, ToolContext, ToolResult

# Enough to name every built-in and a few MCP servers' tools; past it, a count.
MAX_NAMED = 60


class ReviewCapabilitiesArgs(BaseModel):
    pass


def _model_name(ctx: ToolContext) -> str | None:
    with Session(ctx.services.engine) as session:
        try:
            connection = chat_connection(session, get_chat(session, ctx.chat_id))
        except NotFound:
            return None
        return (connection.model or connection.name) if connection is not None else None


def _named(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def review_capabilities(ctx: ToolContext, args: ReviewCapabilitiesArgs) -> ToolResult:
    lines = [
        f"Tools on this turn: {_named(list(ctx.declared))}." if ctx.declared else "No tools on this turn."
    ]
    missing = [f"{name} ({reason})" for name, reason in sorted(ctx.missing.items())]
    if missing:
        lines.append(f"Not available: {_named(missing)}.")
    if model := _model_name(ctx):
        lines.append(f"Model: {model}.")
    return ToolResult(text="\n".join(lines))


TOOLS = [
    Tool(
        name="review_capabilities",
        description="Say which tools you have on this turn, which are missing and why, and the model you run on.",
        args=ReviewCapabilitiesArgs,
        run=review_capabilities,
        permission=None,
        macro="capabilities_tool",
        family="capabilities",
        label="Review capabilities",
    )
]

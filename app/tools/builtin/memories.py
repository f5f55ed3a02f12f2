"""The memory tools: create and update long-term memories (kept by the speaking character, or for
all characters), and change the chat's short-term memory. Arguments are checked by their models
before anything runs; a refusal (a limit, another character's memory, an unknown id) is a ToolError
and nothing is written."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field
from sqlmodel import Session

from app.platform.core.errors import NotFound, UserError
from app.platform.modelbase import MAX_ROW_ID
from app.tools.memories import service
from app.tools.memories.core.rules import (
    MAX_EXPIRY_REPLIES,
    MAX_LONG_TERM_CHARS,
    MAX_SHORT_TERM_CHARS,
    MAX_SHORT_TERM_ITEMS,
    preview,
)
from app.tools.memories.models import LongTermMemory
from app.tools.registry import Tool, ToolContext, ToolError, ToolResult


class CreateMemoryArgs(BaseModel):
    content: str = Field(
        min_length=1,
        max_length=MAX_LONG_TERM_CHARS,
        description="The fact or preference to remember, as one short self-contained sentence.",
    )
    scope: Literal["character", "global"] = Field(
        "character",
        description="character: only you remember it; global: every character remembers it.",
    )


class UpdateMemoryArgs(BaseModel):
    memory_id: int = Field(ge=1, le=MAX_ROW_ID, description="The memory's id, as in [#12].")
    content: str = Field(
        "",
        max_length=MAX_LONG_TERM_CHARS,
        description="The memory's new text; empty deletes the memory.",
    )


class ShortTermItem(BaseModel):
    content: str = Field(min_length=1, max_length=MAX_SHORT_TERM_CHARS, description="A working note.")
    expires_after_replies: int | None = Field(
        None, ge=1, le=MAX_EXPIRY_REPLIES, description="Forget it after this many of your replies."
    )
    expires_at: datetime | None = Field(
        None, description="Forget it at this moment (ISO 8601; UTC when no offset is given)."
    )


class UpdateShortTermArgs(BaseModel):
    add: list[ShortTermItem] = Field(
        default_factory=list, max_length=MAX_SHORT_TERM_ITEMS, description="Notes to add."
    )
    remove: list[int] = Field(
        default_factory=list,
        max_length=MAX_SHORT_TERM_ITEMS,
        description="Ids of notes to remove, as in [#3].",
    )


def _refused(err: UserError | NotFound) -> ToolError:
    return ToolError(str(err.args[0] if err.args else err))


def create_long_term_memory(ctx: ToolContext, args: CreateMemoryArgs) -> ToolResult:
    if args.scope == "character" and ctx.character_id is None:
        raise ToolError("There is no speaking character to keep this memory; use scope global.")
    owner = None if args.scope == "global" else ctx.character_id
    with Session(ctx.services.engine) as session:
        try:
            memory = service.add_long_term(
                session, content=args.content, character_id=owner, chat_id=ctx.chat_id
            )
        except (UserError, NotFound) as err:
            raise _refused(err) from None
        session.commit()
        memory_id, content = memory.id, memory.content
    whose = "for all characters" if owner is None else "for you"
    return ToolResult(
        text=f"Saved memory #{memory_id} ({whose}): {content}",
        notice=f"Remembered: {preview(content)}",
    )


def update_long_term_memory(ctx: ToolContext, args: UpdateMemoryArgs) -> ToolResult:
    with Session(ctx.services.engine) as session:
        memory = session.get(LongTermMemory, args.memory_id)
        if memory is None:
            raise ToolError(f"There is no memory #{args.memory_id}.")
        if memory.character_id is not None and memory.character_id != ctx.character_id:
            raise ToolError(
                f"Memory #{args.memory_id} belongs to another character; you can change only your own "
                "memories and the ones for all characters."
            )
        old = memory.content
        try:
            if not args.content.strip():
                service.delete_long_term(session, args.memory_id)
                session.commit()
                return ToolResult(text=f"Deleted memory #{args.memory_id}.", notice=f"Forgot: {preview(old)}")
            memory = service.update_long_term(session, args.memory_id, args.content)
        except (UserError, NotFound) as err:
            raise _refused(err) from None
        session.commit()
        content = memory.content
    return ToolResult(
        text=f"Updated memory #{args.memory_id}: {content}",
        notice=f"Memory updated: {preview(content)}",
    )


def update_short_term_memory(ctx: ToolContext, args: UpdateShortTermArgs) -> ToolResult:
    if not args.add and not args.remove:
        raise ToolError("Give notes to add or ids to remove.")
    items = [service.ShortTermIn(i.content, i.expires_after_replies, i.expires_at) for i in args.add]
    with Session(ctx.services.engine) as session:
        try:
            added, removed = service.change_short_term(
                session,
                ctx.chat_id,
                add=items,
                remove=args.remove,
                now=ctx.now,
                during_reply=ctx.message_id is not None,
            )
        except (UserError, NotFound) as err:
            raise _refused(err) from None
        session.commit()
        lines = [f"Added #{row.id}: {row.content}" for row in added]
    lines += [f"Removed #{i}." for i in removed]
    parts = []
    if added:
        parts.append(f"{len(added)} added")
    if removed:
        parts.append(f"{len(removed)} removed")
    return ToolResult(text="\n".join(lines), notice=f"Short-term memory: {', '.join(parts)}")


TOOLS = [
    Tool(
        name="create_long_term_memory",
        description=(
            "Remember a stable fact about the user or one of their preferences for future chats. "
            "Use it when the user asks you to remember something or shares a lasting fact. "
            "Memories already kept are listed with their ids; update those rather than adding a duplicate."
        ),
        args=CreateMemoryArgs,
        run=create_long_term_memory,
        permission="memory",
        macro="memory_tool",
        family="memory",
        label="Create a memory",
    ),
    Tool(
        name="update_long_term_memory",
        description=(
            "Change or delete a long-term memory by its id ([#12]); empty content deletes it. "
            "Only your own memories and the ones for all characters can be changed."
        ),
        args=UpdateMemoryArgs,
        run=update_long_term_memory,
        permission="memory",
        macro="memory_update_tool",
        family="memory",
        label="Update a memory",
    ),
    Tool(
        name="update_short_term_memory",
        description=(
            "Keep working notes for the current arc of this chat (at most "
            f"{MAX_SHORT_TERM_ITEMS}), each forgotten after a number of your replies or at a date; "
            "remove notes by id ([#3]) when they no longer hold."
        ),
        args=UpdateShortTermArgs,
        run=update_short_term_memory,
        permission="memory",
        macro="short_term_memory_tool",
        family="short_term_memory",
        label="Update short-term memory",
    ),
]

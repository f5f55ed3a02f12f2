"""message_metadata and manage_message: the character sees the ids and times of the chat's recent turns,
and may edit or delete one of its own recent messages.

message_metadata gives ids, speakers, roles and times, with an 80-character preview: never a message's
whole text (the model has the text in its window already; this is for finding a turn and its time).
Times are in the user's time zone (the persona's, once the tasks feature adds the column), else in the
server's zone, and the result says which.

manage_message only reaches the speaking character's own messages among the 20 most recent, never the
user's, never the reply being written; it goes through the user's own edit and delete (app/chats/service.py)
and then `messages_changed` (app/chats/changes.py), so memory built from the messages stays in step.
"""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field, field_validator, model_validator
from sqlmodel import Session, col, select

from app.chats import service as chats
from app.chats.changes import messages_changed
from app.chats.core.limits import MAX_MESSAGE_BYTES, message_too_long
from app.chats.models import Message
from app.connections.core.answers import without_reasoning
from app.personas.service import persona_time_zone
from app.platform.core.errors import NotFound, UserError
from app.platform.modelbase import RowId
from app.platform.timeutil import as_utc
from app.tools.registry import Tool, ToolContext, ToolError, ToolResult
from app.tools.user_info.service import context_persona

MAX_LISTED = 30
PREVIEW_CHARS = 80
# How far back manage_message reaches: a character tidies what it just said, not the chat's history.
MANAGEABLE_RECENT = 20


class MessageMetadataArgs(BaseModel):
    count: int = Field(10, ge=1, le=MAX_LISTED, description="How many of the newest turns to list.")


class ManageMessageArgs(BaseModel):
    message_id: RowId = Field(description="The id of one of your own recent messages (see message_metadata).")
    action: Literal["edit", "delete"]
    content: str | None = Field(
        None, max_length=MAX_MESSAGE_BYTES, description="The message's new text (for edit)."
    )

    @field_validator("content")
    @classmethod
    def _within_limit(cls, content: str | None) -> str | None:
        if content is not None and (problem := message_too_long(content)):
            raise ValueError(problem)
        return content

    @model_validator(mode="after")
    def _content_for_edit(self) -> ManageMessageArgs:
        if self.action == "edit" and not (self.content or "").strip():
            raise ValueError("An edit needs the new content, and it cannot be empty.")
        return self


def _recent(session: Session, ctx: ToolContext, limit: int) -> list[Message]:
    """The chat's newest messages (no refresh marks, not the reply being written), newest first."""
    stmt = select(Message).where(Message.chat_id == ctx.chat_id, Message.kind == "message")
    if ctx.message_id is not None:
        stmt = stmt.where(Message.id != ctx.message_id)
    return list(session.exec(stmt.order_by(col(Message.id).desc()).limit(limit)))


def _zone(session: Session, ctx: ToolContext) -> tuple[tzinfo, str]:
    # The persona's time zone; when the user set none, the server's, and the result says so.
    name = persona_time_zone(context_persona(session, ctx.chat_id, ctx.persona_id))
    if name:
        try:
            return ZoneInfo(name), f"{name}, the user's time zone"
        except (KeyError, ValueError):
            pass
    local = ctx.now.astimezone()
    offset = local.isoformat()[-6:]
    return local.tzinfo or ZoneInfo("UTC"), f"the server's time zone (UTC{offset}); the user has set none"


def _preview(msg: Message) -> str:
    text = without_reasoning(msg.content) if msg.role == "assistant" else msg.content
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _line(msg: Message, ctx: ToolContext, zone: tzinfo) -> str:
    def at(moment: datetime) -> str:
        return f"{as_utc(moment).astimezone(zone):%Y-%m-%d %H:%M}"

    who = f"{msg.name or '(no name)'} ({msg.role}"
    if msg.role == "assistant" and msg.character_id is not None and msg.character_id == ctx.character_id:
        who += ", yours"
    parts = [f"#{msg.id}", who + ")", f"written {at(msg.created_at)}"]
    edited = (msg.swipes[msg.active_swipe] if 0 <= msg.active_swipe < len(msg.swipes) else {}).get(
        "edited_at"
    )
    if edited:
        parts.append(f"edited {at(datetime.fromisoformat(edited))}")
    if len(msg.swipes) > 1:
        parts.append(f"version {msg.active_swipe + 1} of {len(msg.swipes)}")
    if msg.hidden:
        parts.append("hidden from the AI")
    if msg.status != "ok":
        parts.append(msg.status)
    return " · ".join(parts) + f" · “{_preview(msg)}”"


def message_metadata(ctx: ToolContext, args: MessageMetadataArgs) -> ToolResult:
    with Session(ctx.services.engine) as session:
        zone, zone_text = _zone(session, ctx)
        messages = list(reversed(_recent(session, ctx, args.count)))
        if not messages:
            return ToolResult(text="This chat has no earlier messages.")
        lines = [_line(msg, ctx, zone) for msg in messages]
    head = f"The chat's {len(lines)} newest messages, oldest first; times in {zone_text}:"
    return ToolResult(text="\n".join([head, *lines]))


def manage_message(ctx: ToolContext, args: ManageMessageArgs) -> ToolResult:
    if args.message_id == ctx.message_id:
        raise ToolError(
            "That is the reply being written now; it cannot be edited or deleted from inside itself."
        )
    with Session(ctx.services.engine) as session:
        try:
            msg = chats.get_message(session, ctx.chat_id, args.message_id)
        except NotFound as err:
            raise ToolError(f"There is no message #{args.message_id} in this chat.") from err
        if msg.role != "assistant" or msg.character_id is None or msg.character_id != ctx.character_id:
            whose = "the user's" if msg.role == "user" else f"{msg.name or 'someone else'}'s"
            raise ToolError(f"Message #{msg.id} is {whose}; you may only change your own messages.")
        if msg.id not in {m.id for m in _recent(session, ctx, MANAGEABLE_RECENT)}:
            raise ToolError(
                f"Message #{msg.id} is older than the {MANAGEABLE_RECENT} most recent messages; "
                "only recent ones can be changed."
            )
        speaker = msg.name or "The character"
        if msg.status == "streaming":
            raise ToolError(f"Message #{msg.id} is still being written.")
        try:
            if args.action == "edit":
                chats.edit_message(session, ctx.chat_id, msg.id, args.content or "")
            else:
                chats.delete_message(session, ctx.chat_id, msg.id)
        except UserError as err:
            raise ToolError(str(err)) from err
        # Commits, then lets each prompt source re-sync what it built from the messages.
        messages_changed(session, ctx.services, ctx.chat_id)
    done = "edited" if args.action == "edit" else "deleted"
    return ToolResult(
        text=f"Message #{args.message_id} {done}.", notice=f"{speaker} {done} message #{args.message_id}."
    )


TOOLS = [
    Tool(
        name="message_metadata",
        description=(
            "List the chat's newest turns: ids, speaker, role, when each was written or edited, and a "
            "short preview. Use it to find a message's id or time."
        ),
        args=MessageMetadataArgs,
        run=message_metadata,
        permission="metadata",
        macro="message_metadata_tool",
        family="metadata",
        label="Read message metadata",
    ),
    Tool(
        name="manage_message",
        description=(
            f"Edit or delete one of your own messages among the {MANAGEABLE_RECENT} most recent (never "
            "the user's, never the reply you are writing). Find ids with message_metadata."
        ),
        args=ManageMessageArgs,
        run=manage_message,
        permission="manage_message",
        macro="manage_message_tool",
        family="manage_message",
        label="Edit or delete an own message",
    ),
]

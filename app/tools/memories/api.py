"""JSON twins of the Memories page and of Chat Settings' short-term memory (the same service calls)."""

from __future__ import annotations

from fastapi import APIRouter

from app.chats import service as chats
from app.tools.memories import service
from app.tools.memories.models import LongTermMemory
from app.tools.memories.schemas import MemoryIn, MemoryList, MemoryRead, MemoryUpdate, ShortTermRead
from app.tools.memories.source import short_term_context
from app.web.deps import SessionDep

router = APIRouter(prefix="/api", tags=["memories"])


def _read(memory: LongTermMemory, names: dict[int, str]) -> MemoryRead:
    return MemoryRead(
        **memory.model_dump(),
        character_name=names.get(memory.character_id) if memory.character_id is not None else None,
    )


@router.get("/memories", response_model=MemoryList)
def list_memories(session: SessionDep, show: str = "all", offset: int = 0, limit: int = 50) -> MemoryList:
    """Long-term memories, newest first: show=all, global, or a character's id; paged."""
    page = service.list_long_term(session, scope=show, offset=offset, limit=max(1, min(limit, 200)))
    names = service.character_names(session)
    return MemoryList(
        total=page.total,
        offset=page.offset,
        limit=page.limit,
        memories=[_read(m, names) for m in page.memories],
    )


@router.post("/memories", response_model=MemoryRead, status_code=201)
def create_memory(data: MemoryIn, session: SessionDep) -> MemoryRead:
    """Add a memory for one character (character_id) or for all (null)."""
    memory = service.add_long_term(session, content=data.content, character_id=data.character_id)
    return _read(memory, service.character_names(session))


@router.put("/memories/{memory_id}", response_model=MemoryRead)
def update_memory(memory_id: int, data: MemoryUpdate, session: SessionDep) -> MemoryRead:
    """Change a memory's text."""
    return _read(service.update_long_term(session, memory_id, data.content), service.character_names(session))


@router.delete("/memories/{memory_id}", status_code=204)
def delete_memory(memory_id: int, session: SessionDep) -> None:
    """Delete a memory."""
    service.delete_long_term(session, memory_id)


@router.get("/chats/{chat_id}/short-term-memory", response_model=list[ShortTermRead])
def list_short_term(chat_id: int, session: SessionDep) -> list[ShortTermRead]:
    """The chat's live short-term memory, oldest first."""
    chats.get_chat(session, chat_id)
    return [ShortTermRead(**item.model_dump()) for item in short_term_context(session, chat_id)["short_term"]]


@router.delete("/chats/{chat_id}/short-term-memory/{item_id}", status_code=204)
def delete_short_term(chat_id: int, item_id: int, session: SessionDep) -> None:
    """Forget one short-term item."""
    service.delete_short_term(session, chat_id, item_id)


@router.delete("/chats/{chat_id}/short-term-memory")
def clear_short_term(chat_id: int, session: SessionDep) -> dict:
    """Forget the chat's whole short-term memory."""
    chats.get_chat(session, chat_id)
    return {"removed": service.clear_short_term(session, chat_id)}

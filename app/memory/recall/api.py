from fastapi import APIRouter, Query

from app.chats.service import get_chat
from app.deps import SessionDep
from app.memory.recall import service
from app.memory.recall.jobs import default_embedder

router = APIRouter(prefix="/api/chats", tags=["memory"])


@router.get("/{chat_id}/memories/search")
def search_memories(chat_id: int, session: SessionDep, q: str = Query(min_length=1),
                    k: int = Query(default=8, ge=1, le=50)) -> dict:  # fmt: skip
    """Memory Recall's ranking for a query: chunks with their scores and the ids of their source messages."""
    get_chat(session, chat_id)
    hits, note = service.search(session, chat_id, q, default_embedder(), k=k)
    return {
        "note": note,
        "results": [
            {"chunk_id": h.chunk.id, "score": round(h.score, 4),
             "similarity": None if h.similarity is None else round(h.similarity, 4), "lexical": round(h.lexical, 4),
             "message_ids": h.chunk.message_ids, "content": h.chunk.content, "status": h.chunk.status,
             "first_message_at": h.chunk.first_message_at, "last_message_at": h.chunk.last_message_at}
            for h in hits
        ],
    }  # fmt: skip

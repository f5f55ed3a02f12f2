from fastapi import APIRouter, File, Query, UploadFile
from fastapi.responses import Response

from app.chats.service import get_chat
from app.memory.recall import service
from app.memory.recall.embedding import build_embedder, embedder_for_chat, embedding_choice
from app.memory.recall.jobs import building, schedule_embed_chat
from app.platform.core.downloads import content_disposition
from app.web.deps import ServicesDep, SessionDep

router = APIRouter(prefix="/api/chats", tags=["memory"])


@router.get("/{chat_id}/memories/search")
def search_memories(
    chat_id: int,
    session: SessionDep,
    services: ServicesDep,
    q: str = Query(min_length=1),
    k: int = Query(default=8, ge=1, le=50),
) -> dict:
    """Memory Recall's ranking for a query: chunks with their scores and the ids of their source messages."""
    get_chat(session, chat_id)
    embedder = embedder_for_chat(session, chat_id, services.keybox, sizes=services.recall.sizes)
    hits, note = service.search(
        session, chat_id, q, embedder, bits=services.recall.index, threads=services.recall.queries, k=k
    )
    return {
        "note": note,
        "results": [
            {
                "chunk_id": h.chunk.id,
                "score": round(h.score, 4),
                "similarity": None if h.similarity is None else round(h.similarity, 4),
                "lexical": round(h.lexical, 4),
                "message_ids": h.chunk.message_ids,
                "content": h.chunk.content,
                "status": h.chunk.status,
                "first_message_at": h.chunk.first_message_at,
                "last_message_at": h.chunk.last_message_at,
            }
            for h in hits
        ],
    }


def _chunk_json(chunk) -> dict:
    return {
        "id": chunk.id,
        "content": chunk.content,
        "message_ids": chunk.message_ids,
        "message_count": chunk.message_count,
        "first_message_at": chunk.first_message_at,
        "last_message_at": chunk.last_message_at,
        "created_at": chunk.created_at,
        "status": chunk.status,
        "embedding_space_id": chunk.embedding_space_id,
        "error": chunk.error,
        "imported": bool(chunk.source_chat_id),
    }


@router.get("/{chat_id}/memories")
def list_memories(chat_id: int, session: SessionDep) -> list[dict]:
    """The chat's memories (chunks), oldest first, with their embedding status."""
    get_chat(session, chat_id)
    return [_chunk_json(c) for c in service.list_chunks(session, chat_id)]


@router.delete("/{chat_id}/memories/{chunk_id}", status_code=204)
def forget_memory(chat_id: int, chunk_id: int, session: SessionDep) -> None:
    """Forget one memory."""
    service.forget_chunk(session, chat_id, chunk_id)


@router.delete("/{chat_id}/memories", status_code=200)
def clear_memories(chat_id: int, session: SessionDep) -> dict:
    """Remove every memory of the chat; its messages stay."""
    get_chat(session, chat_id)
    return {"removed": service.clear_chunks(session, chat_id)}


@router.get("/{chat_id}/memories/status")
def memory_status(chat_id: int, session: SessionDep, services: ServicesDep) -> dict:
    """Counts by status, the embedding source in use (and where that choice comes from), how many
    memories were embedded in another space, the progress of memories being built (`building`, None
    once every memory has its vectors) and of a running rebuild."""
    chat = get_chat(session, chat_id)
    choice = embedding_choice(session, chat)
    space = build_embedder(choice, sizes=services.recall.sizes).space
    chunks = service.list_chunks(session, chat_id)
    rebuild = services.recall.rebuilds.get(chat_id, session)
    waiting = sum(1 for c in chunks if c.status == "waiting")
    making = building(services, chat_id) or (rebuild is not None and rebuild.running and rebuild.making)
    return {
        "count": len(chunks),
        "building": {"done": len(chunks) - waiting, "total": len(chunks)} if making or waiting else None,
        "statuses": {
            s: sum(1 for c in chunks if c.status == s) for s in ("vectorized", "waiting", "unavailable")
        },
        "source": {"kind": choice.kind, "model": choice.model, "origin": choice.origin, "space": space.id},
        "other_space": sum(
            1 for c in chunks if c.status == "vectorized" and not space.matches(c.embedding_space_id)
        ),
        "rebuild": None
        if rebuild is None
        else {
            "status": rebuild.status,  # running, done, stopped or failed
            "total": rebuild.total,
            "done": rebuild.done,
            "running": rebuild.running,
            "stopped": rebuild.stopped,
            "error": rebuild.error,
            "making": rebuild.making,
        },
    }


@router.post("/{chat_id}/memories/rebuild", status_code=202)
def rebuild_memories(chat_id: int, services: ServicesDep) -> dict:
    """Embed every memory again with the chat's current model, in the background; each keeps its
    old vectors until its turn, so stopping loses nothing. A chat without memories gets them made
    from its messages (`making`). Follow it with GET .../memories/status."""
    rebuild = services.recall.rebuilds.start(services, chat_id)
    return {
        "total": rebuild.total,
        "done": rebuild.done,
        "running": rebuild.running,
        "making": rebuild.making,
    }


@router.post("/{chat_id}/memories/rebuild/stop")
def stop_rebuilding(chat_id: int, services: ServicesDep) -> dict:
    """Stop a running rebuild after the batch in hand."""
    rebuild = services.recall.rebuilds.stop(services, chat_id)
    return {"stopping": bool(rebuild and rebuild.running)}


@router.get("/{chat_id}/memories/export")
def export_memories(chat_id: int, session: SessionDep) -> Response:
    """Download the memories as a `.marinara.json` file (Marinara Engine's format)."""
    name, body = service.export_file(session, chat_id)
    return Response(
        body,
        media_type="application/json",
        headers={"Content-Disposition": content_disposition(name, fallback="memories")},
    )


@router.post("/{chat_id}/memories/import")
def import_memories(
    chat_id: int, session: SessionDep, services: ServicesDep, file: UploadFile = File(...)
) -> dict:
    """Merge a `.marinara.json` / `.json` / `.marinara` memory file; reports how many were imported, skipped as
    already here, queued for embedding, and linked to this chat's own messages (a file exported from it)."""
    get_chat(session, chat_id)
    space = embedder_for_chat(session, chat_id, services.keybox, sizes=services.recall.sizes).space
    result = service.import_file(session, chat_id, file.file.read(), space=space)
    session.commit()
    if result["queued"]:
        schedule_embed_chat(services, chat_id)
    return result

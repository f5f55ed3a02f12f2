"""The memory viewer (Chat Settings → Memory Recall → "Access memories for this chat")."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app import forms
from app.chats.service import chat_settings, get_chat
from app.deps import SessionDep
from app.errors import UserError
from app.memory.recall import jobs, service
from app.memory.recall.embedding import build_embedder, embedder_for_chat, embedding_choice
from app.memory.recall.jobs import schedule_embed_chat
from app.prompt.tokens import count_tokens
from app.web import render

router = APIRouter(include_in_schema=False)


def _view(request: Request, session, chat_id: int, message: str | None = None) -> HTMLResponse:
    chat = get_chat(session, chat_id)
    chunks = service.list_chunks(session, chat_id)
    choice = embedding_choice(session, chat)
    space = build_embedder(choice).space
    counts = {s: sum(1 for c in chunks if c.status == s) for s in ("vectorized", "waiting", "unavailable")}
    other = {c.id for c in chunks if c.status == "vectorized" and not space.matches(c.embedding_space_id)}
    return render(request, "chats/memories.html", {
        "chat": chat, "chunks": chunks, "counts": counts, "space": space.id, "choice": choice, "other": other,
        "rebuild": jobs.rebuild_state(request.app.state.engine, chat_id),
        "tokens": sum(count_tokens(c.content) for c in chunks), "message": message,
        "recall_on": chat_settings(chat).recall_enabled(chat.mode),
    })  # fmt: skip


def _schedule(request: Request, chat_id: int) -> None:
    state = request.app.state
    schedule_embed_chat(getattr(state, "scheduler", None), state.engine, chat_id)


@router.get("/chats/{chat_id}/memories")
def memories_page(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Every memory of the chat, with status, search, forget, clear, rebuild, export and import."""
    return _view(request, session, chat_id)


@router.get("/chats/{chat_id}/memories/search")
def search_memories_fragment(chat_id: int, request: Request, session: SessionDep, q: str = "") -> HTMLResponse:
    """Ranked memories for the search box."""
    get_chat(session, chat_id)
    hits, note = service.search(session, chat_id, q, embedder_for_chat(session, chat_id), k=8) if q.strip() else ([], None)
    return render(request, "chats/_memory_results.html", {"hits": hits, "note": note, "q": q})


@router.post("/chats/{chat_id}/memories/{chunk_id}/forget")
def forget_memory_page(chat_id: int, chunk_id: int, session: SessionDep) -> HTMLResponse:
    """Forget one memory."""
    service.forget_chunk(session, chat_id, chunk_id)
    return HTMLResponse("")


@router.post("/chats/{chat_id}/memories/clear")
def clear_memories_page(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Remove all memories (messages stay)."""
    removed = service.clear_chunks(session, chat_id)
    return _view(request, session, chat_id, f"Removed {removed} memories. The messages are untouched.")


@router.post("/chats/{chat_id}/memories/rebuild")
def rebuild_memories_page(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Embed every memory again with the current model, in the background, with progress."""
    get_chat(session, chat_id)
    state = request.app.state
    jobs.start_rebuild(getattr(state, "scheduler", None), state.engine, chat_id)
    return _view(request, session, chat_id)


@router.post("/chats/{chat_id}/memories/rebuild/stop")
def stop_rebuild_page(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Stop the rebuild after the batch in hand; memories not reached keep their old vectors."""
    jobs.stop_rebuild(request.app.state.engine, chat_id)
    return _view(request, session, chat_id)


@router.post("/chats/{chat_id}/memories/import")
async def import_memories_page(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Merge a memory file."""
    form = await request.form()
    raw = await forms.upload(form, "file")
    if not raw:
        raise UserError("Choose a memory file to import.")
    result = service.import_file(session, chat_id, raw, space=embedder_for_chat(session, chat_id).space)
    session.commit()
    if result["queued"]:
        _schedule(request, chat_id)
    return _view(request, session, chat_id, f"Imported {result['imported']}, skipped {result['skipped']} already here"
                 + (f", {result['queued']} waiting for vectors." if result["queued"] else "."))  # fmt: skip

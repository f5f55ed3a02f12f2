"""The memory viewer (Chat Settings → Memory Recall → "Access memories for this chat")."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from app.chats.service import chat_settings, get_chat
from app.memory.recall import service
from app.memory.recall.embedding import build_embedder, embedder_for_chat, embedding_choice
from app.memory.recall.jobs import building, schedule_embed_chat
from app.platform import forms
from app.platform.core.errors import UserError
from app.prompt.core.tokens import count_tokens
from app.web.deps import FormDep, ServicesDep, SessionDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)
MEMORIES = "chats/memories.html"


def _view(
    request: Request,
    session,
    chat_id: int,
    message: str | None = None,
    *,
    hx: bool = False,
    blocks: tuple[str, ...] = (),
    oob: tuple[str, ...] = (),
) -> HTMLResponse:
    """The whole viewer; for HTMX, `blocks` of it and `oob` for what else changed."""
    ctx = _context(request, session, chat_id, message)
    if not hx:
        return render(request, MEMORIES, ctx)
    return render_blocks(request, MEMORIES, ctx, blocks, oob=oob)


def _context(request: Request, session, chat_id: int, message: str | None = None) -> dict:
    chat = get_chat(session, chat_id)
    # The rebuild as its row says now (whichever server works it), read once: the route decides what to
    # send by it and the template renders it, and the rebuild may end between the two.
    services = request.app.state.services
    rebuild = services.recall.rebuilds.get(chat_id, session)
    chunks = service.list_chunks(session, chat_id)
    choice = embedding_choice(session, chat)
    space = build_embedder(choice, sizes=services.recall.sizes).space
    counts = {s: sum(1 for c in chunks if c.status == s) for s in ("vectorized", "waiting", "unavailable")}
    other = {c.id for c in chunks if c.status == "vectorized" and not space.matches(c.embedding_space_id)}
    # Why the newest memory without vectors has none (a server down, vectors of a new size...).
    unavailable = max((c for c in chunks if c.status == "unavailable"), key=lambda c: c.id, default=None)
    return {
        "chat": chat,
        "chunks": chunks,
        "counts": counts,
        "space": space.id,
        "choice": choice,
        "other": other,
        "unavailable_reason": unavailable.error if unavailable is not None else None,
        "rebuild": rebuild,
        "building": building(services, chat_id),
        "tokens": sum(count_tokens(c.content) for c in chunks),
        "message": message,
        "recall_on": chat_settings(chat).recall_enabled(chat.mode),
        "chunking_paused": chat_settings(chat).memory_chunking_paused,
    }


@router.get("/chats/{chat_id}/memories")
def memories_page(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Every memory of the chat, with status, search, forget, clear, rebuild, export and import."""
    return _view(request, session, chat_id)


def _status_view(request: Request, session, chat_id: int, hx: bool) -> HTMLResponse:
    """The status block, which polls while a rebuild or the embedding runs. An answer that finds
    nothing running any more brings the memory list (new badges) along out of band, whichever
    request it answers: the poll, or Stop or Rebuild when the work ended before their answer was
    written (Stop landing as the batch in hand finished); the page polls no more after it."""
    ctx = _context(request, session, chat_id)
    if not hx:
        return render(request, MEMORIES, ctx)
    busy = (
        (ctx["rebuild"] is not None and ctx["rebuild"].running) or ctx["counts"]["waiting"] or ctx["building"]
    )
    return render_blocks(request, MEMORIES, ctx, ["memory_status"], oob=[] if busy else ["memory_list"])


@router.get("/chats/{chat_id}/memories/status")
def memory_status_fragment(
    chat_id: int, request: Request, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """The progress poll: the status block, and the memory list once nothing runs."""
    return _status_view(request, session, chat_id, hx)


@router.get("/chats/{chat_id}/memories/search")
def search_memories_fragment(
    chat_id: int, request: Request, session: SessionDep, services: ServicesDep, q: str = ""
) -> HTMLResponse:
    """Ranked memories for the search box."""
    get_chat(session, chat_id)
    found, note = [], None
    if q.strip():
        embedder = embedder_for_chat(session, chat_id, services.keybox, sizes=services.recall.sizes)
        found, note = service.search_for_viewer(
            session, chat_id, q, embedder, bits=services.recall.index, threads=services.recall.queries
        )
    return render(request, "chats/_memory_results.html", {"found": found, "note": note, "q": q})


@router.post("/chats/{chat_id}/memories/{chunk_id}/forget")
def forget_memory_page(
    chat_id: int, chunk_id: int, request: Request, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Forget one memory: its card goes (an empty answer), the counts change."""
    service.forget_chunk(session, chat_id, chunk_id)
    return _view(request, session, chat_id, hx=hx, oob=("memory_status",))


@router.post("/chats/{chat_id}/memories/clear")
def clear_memories_page(chat_id: int, request: Request, session: SessionDep, hx: HxRequest) -> HTMLResponse:
    """Remove all memories (messages stay; unless making memories is paused, they make them again)."""
    removed = service.clear_chunks(session, chat_id)
    again = (
        ""
        if chat_settings(get_chat(session, chat_id)).memory_chunking_paused
        else (
            " Memories will be made from them again after the next reply: pause making memories to keep them cleared."
        )
    )
    return _view(
        request,
        session,
        chat_id,
        f"Removed {removed} memories. The messages are untouched.{again}",
        hx=hx,
        blocks=("memory_list",),
        oob=("memory_status", "memory_message"),
    )


@router.post("/chats/{chat_id}/memories/chunking")
def memory_chunking_page(
    chat_id: int, request: Request, form: FormDep, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Pause or resume making memories from the chat's messages (also in Chat Settings)."""
    service.set_chunking_paused(session, chat_id, forms.text(form, "paused") == "true")
    return _view(request, session, chat_id, hx=hx, blocks=("memory_status",))


@router.post("/chats/{chat_id}/memories/rebuild")
def rebuild_memories_page(
    chat_id: int, request: Request, session: SessionDep, services: ServicesDep, hx: HxRequest
) -> HTMLResponse:
    """Embed every memory again with the current model, in the background, with progress."""
    services.recall.rebuilds.start(services, chat_id)  # before `session` is used: see Rebuilds.start
    return _status_view(request, session, chat_id, hx)


@router.post("/chats/{chat_id}/memories/rebuild/stop")
def stop_rebuild_page(
    chat_id: int, request: Request, session: SessionDep, services: ServicesDep, hx: HxRequest
) -> HTMLResponse:
    """Stop the rebuild after the batch in hand; memories not reached keep their old vectors."""
    services.recall.rebuilds.stop(services, chat_id)  # before `session` is used: see Rebuilds.stop
    return _status_view(request, session, chat_id, hx)


@router.post("/chats/{chat_id}/memories/import")
async def import_memories_page(
    chat_id: int, request: Request, session: SessionDep, services: ServicesDep, hx: HxRequest
) -> HTMLResponse:
    """Merge a memory file."""
    form = await request.form()
    raw = await forms.upload(form, "file")
    if not raw:
        raise UserError("Choose a memory file to import.")
    # Thousands of memories are parsed and written on a thread, so other requests go on meanwhile.
    return await run_in_threadpool(_imported_view, request, session, services, chat_id, raw, hx)


def _imported_view(request: Request, session, services, chat_id: int, raw: bytes, hx: bool) -> HTMLResponse:
    result = service.import_file(
        session,
        chat_id,
        raw,
        space=embedder_for_chat(session, chat_id, services.keybox, sizes=services.recall.sizes).space,
    )
    session.commit()
    if result["queued"]:
        schedule_embed_chat(services, chat_id)
    linked = f" ({result['linked']} matching this chat's messages)" if result["linked"] else ""
    return _view(
        request,
        session,
        chat_id,
        f"Imported {result['imported']}{linked}, skipped {result['skipped']} "
        "already here" + (f", {result['queued']} waiting for vectors." if result["queued"] else "."),
        hx=hx,
        blocks=("memory_list",),
        oob=("memory_status", "memory_message"),
    )

"""Access memories for this chat (Advanced Memory, issue 14), the page: the chat's numbered scenes with
search, Edit Summary text, Inspect source messages, Disable/Enable, Delete summary, Delete all memories,
Export and Import. The same service calls as app/memory/scenes/web/api.py.

Decisions:
- A scene card is its own fragment (scenes/_scene.html): every action on one scene answers that card.
- A refused edit, import or Delete all memories is answered in place (the form or the page's notice with
  its sentence, status 200 so htmx swaps it) rather than as a toast that fades: the user still has the
  text or the file in hand to fix, and reads why nothing was deleted where they clicked.
- Reindex embeds the chat's memories again (Memory Recall's rebuild): scenes are ranked by those, not
  by embeddings of their own.
"""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.datastructures import UploadFile

from app.chats.service import chat_settings, get_chat
from app.memory.scenes import decision, recollections, service
from app.memory.scenes.core.transfer import MAX_IMPORT_BYTES, MAX_QUERY_CHARS, MAX_SUMMARY_CHARS
from app.platform import forms
from app.platform.core.errors import UserError
from app.platform.modelbase import RowId
from app.web.deps import FormDep, ServicesDep, SessionDep
from app.web.templates import HxRequest, render

router = APIRouter(include_in_schema=False)
ACCESS = "scenes/access.html"
CARD = "scenes/_scene.html"


def _context(session, chat_id: int, *, q: str = "", message: str = "", error: str = "") -> dict:
    chat = get_chat(session, chat_id)
    if len(q) > MAX_QUERY_CHARS:
        raise UserError(f"A search can have at most {MAX_QUERY_CHARS} characters.")
    return {
        "chat": chat,
        "views": service.scene_views(session, chat_id, q.strip() or None),
        "q": q.strip(),
        "total": service.count_scenes(session, chat_id),
        "on": chat_settings(chat).advanced_memory,
        "message": message,
        "error": error,
        "max_summary": MAX_SUMMARY_CHARS,
        "max_query": MAX_QUERY_CHARS,
    }


def _card(
    request: Request,
    session,
    chat_id: int,
    scene_id: int,
    *,
    editing: bool = False,
    error: str = "",
    draft: str | None = None,
    recollection: int | None = None,
) -> HTMLResponse:
    view = service.scene_view(session, chat_id, scene_id)
    return render(
        request,
        CARD,
        {
            "chat": get_chat(session, chat_id),
            "v": view,
            "editing": editing,
            "error": error,
            "draft": draft,
            "max_summary": MAX_SUMMARY_CHARS,
            "editing_recollection": recollection,
            "max_recollection": recollections.MAX_TEXT_CHARS,
        },
    )


@router.get("/chats/{chat_id}/scenes")
def scenes_page(
    chat_id: int, request: Request, session: SessionDep, hx: HxRequest, q: str = ""
) -> HTMLResponse:
    """The chat's scenes; for the search box (HTMX), only the list."""
    ctx = _context(session, chat_id, q=q)
    return render(request, ACCESS, ctx, block="scene_list" if hx else None)


@router.get("/chats/{chat_id}/scenes/{scene_id}/card")
def scene_card(
    chat_id: int,
    scene_id: RowId,
    request: Request,
    session: SessionDep,
    edit: bool = False,
    recollection: RowId | None = None,
) -> HTMLResponse:
    """One scene's card, or its Summary text form with `edit`, or a character recollection's form."""
    return _card(request, session, chat_id, scene_id, editing=edit, recollection=recollection)


@router.post("/chats/{chat_id}/scenes/{scene_id}/recollections/{character_id}")
def save_recollection(
    chat_id: int, scene_id: RowId, character_id: RowId, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Save a character's recollection by hand: Manually edited, never replaced."""
    service.get_scene(session, chat_id, scene_id)
    text = forms.text(form, "text")
    try:
        recollections.save_by_hand(session, scene_id, character_id, text)
    except UserError as err:
        return _card(
            request, session, chat_id, scene_id, error=str(err), draft=text, recollection=character_id
        )
    return _card(request, session, chat_id, scene_id)


@router.post("/chats/{chat_id}/scenes/{scene_id}/recollections/{character_id}/delete")
def delete_recollection(
    chat_id: int, scene_id: RowId, character_id: RowId, request: Request, session: SessionDep
) -> HTMLResponse:
    """Delete a recollection: out of the prompts for good (a new one may be typed)."""
    service.get_scene(session, chat_id, scene_id)
    recollections.delete(session, scene_id, character_id)
    return _card(request, session, chat_id, scene_id)


@router.post("/chats/{chat_id}/scenes/{scene_id}/summary")
def save_scene_summary(
    chat_id: int, scene_id: RowId, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Save the Summary text: the scene becomes a manual recap, never rewritten. A refusal keeps the form."""
    text = forms.text(form, "summary")
    try:
        service.edit_scene(session, chat_id, scene_id, summary=text)
    except UserError as err:
        return _card(request, session, chat_id, scene_id, editing=True, error=str(err), draft=text)
    return _card(request, session, chat_id, scene_id)


@router.post("/chats/{chat_id}/scenes/{scene_id}/enabled")
def toggle_scene(
    chat_id: int, scene_id: RowId, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Disable or enable a scene's record: a disabled scene is kept but never recalled."""
    service.edit_scene(session, chat_id, scene_id, enabled=forms.checkbox(form, "enabled"))
    return _card(request, session, chat_id, scene_id)


@router.post("/chats/{chat_id}/scenes/{scene_id}/delete-summary")
def delete_scene_summary_page(
    chat_id: int, scene_id: RowId, request: Request, session: SessionDep
) -> HTMLResponse:
    """Delete summary: the recap goes, the scene keeps its bounds and routine preparation leaves it so."""
    service.delete_summary(session, chat_id, scene_id)
    return _card(request, session, chat_id, scene_id)


@router.get("/chats/{chat_id}/memory-activity")
def memory_activity(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Peek Prompt → Advanced Memory activity: the decision model's kept results, newest first."""
    chat = get_chat(session, chat_id)
    return render(
        request,
        "scenes/_activity.html",
        {"chat": chat, "rows": decision.activity(session, chat_id), "on": chat_settings(chat).adv_decision},
    )


@router.get("/chats/{chat_id}/scenes/{scene_id}/messages")
def scene_messages(chat_id: int, scene_id: RowId, request: Request, session: SessionDep) -> HTMLResponse:
    """Inspect source messages: the scene's messages still in the chat, hidden ones marked."""
    messages = service.source_messages(session, chat_id, scene_id)
    return render(request, "scenes/_messages.html", {"messages": messages})


@router.post("/chats/{chat_id}/scenes/delete-all")
def delete_all_scenes_page(
    chat_id: int, request: Request, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Delete all memories: every scene of the chat; the chat, its messages and its settings stay. Refused
    (in place, with the sentence) while Prepare existing history runs."""
    try:
        deleted = service.delete_all(session, chat_id)
    except UserError as err:
        return render(
            request, ACCESS, _context(session, chat_id, error=str(err)), block="scene_view" if hx else None
        )
    ctx = _context(
        session,
        chat_id,
        message=f"Deleted {deleted} scene{'s' if deleted != 1 else ''}. "
        "The chat, its messages and its settings are untouched.",
    )
    return render(request, ACCESS, ctx, block="scene_view" if hx else None)


@router.post("/chats/{chat_id}/scenes/reindex")
def reindex_scenes_page(
    chat_id: int, request: Request, session: SessionDep, services: ServicesDep, hx: HxRequest
) -> HTMLResponse:
    """Reindex: scenes are ranked by the chat's memories (Memory Recall's chunks of its messages), so this
    embeds every memory again with the current model, in the background (POST
    /api/chats/{id}/memories/rebuild is its JSON twin)."""
    services.recall.rebuilds.start(services, chat_id)  # before `session` is used: see Rebuilds.start
    ctx = _context(
        session,
        chat_id,
        message="Reindexing: the chat's memories, which rank its scenes for recall, are "
        "being embedded again in the background; Open memories (Memory Recall) in Chat Settings shows the progress.",
    )
    return render(request, ACCESS, ctx, block="scene_view" if hx else None)


@router.post("/chats/{chat_id}/scenes/import")
def import_scenes_page(
    chat_id: int, request: Request, form: FormDep, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Import a scenes file; a bad file changes nothing and the page says why."""
    try:
        result = service.import_file(session, chat_id, _upload(form), replace=forms.checkbox(form, "replace"))
    except UserError as err:
        session.rollback()
        return render(
            request, ACCESS, _context(session, chat_id, error=str(err)), block="scene_view" if hx else None
        )
    n, replaced = result["imported"], result["replaced"]
    message = f"Imported {n} scene{'s' if n != 1 else ''}" + (
        f", in place of {replaced}." if replaced else "."
    )
    if left := result.get("recollections_left_out"):
        many = left != 1
        message += (
            f" {left} character recollection{'s' if many else ''} named no single character of this chat:"
            f" {'they were' if many else 'it was'} left out."
        )
    return render(
        request, ACCESS, _context(session, chat_id, message=message), block="scene_view" if hx else None
    )


def _upload(form) -> bytes:
    file = form.get("file")
    if not isinstance(file, UploadFile) or not file.filename:
        raise UserError("Choose a scenes file (.sugo.json) to import.")
    raw = file.file.read(MAX_IMPORT_BYTES + 1)  # the service refuses a file past the limit, by its size
    if not raw:
        raise UserError(f"The file “{file.filename}” is empty (0 bytes). Choose another file.")
    return raw


@router.post("/chats/{chat_id}/scenes/new-start/undo")
def undo_new_start_page(chat_id: int, session: SessionDep) -> HTMLResponse:
    """Undo the "new start" mark from the chat view; the mark goes from the page."""
    service.undo_new_start(session, chat_id)
    return HTMLResponse("")

"""Backgrounds from Chat Settings: upload one (chosen for the chat at once) and delete one. Each
answers with the Background section again and, out of band, the chat's backdrop."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.datastructures import UploadFile

from app.backgrounds import service
from app.chats import backdrop
from app.chats import service as chats
from app.platform import forms
from app.platform.core.errors import UserError
from app.web.deps import FormDep, SessionDep
from app.web.templates import render_blocks

router = APIRouter(include_in_schema=False)


def _section(request: Request, ctx: dict, status_code: int = 200) -> HTMLResponse:
    """Chat Settings' Background block, and the chat's backdrop out of band."""
    return render_blocks(
        request,
        "chats/settings.html",
        ctx,
        ["background_section"],
        oob=["chat_backdrop"],
        status_code=status_code,
    )


@router.post("/chats/{chat_id}/backgrounds")
async def upload_background_page(
    chat_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Upload a background and choose it for the chat; a refusal is said beside the upload, and
    nothing is stored."""
    chat = chats.get_chat(session, chat_id)
    upload = form.get("background_file")
    try:
        raw = await forms.upload(form, "background_file")
        if raw is None:
            raise UserError("Choose a picture to upload.")
        added = service.upload_background(
            session, raw, upload.filename if isinstance(upload, UploadFile) else None
        )
    except UserError as err:
        ctx = backdrop.background_ctx(session, chat, background_error=str(err))
        return _section(request, ctx, status_code=err.status_code)
    chat = backdrop.choose(session, chat, f"image:{added.id}")
    return _section(request, backdrop.background_ctx(session, chat, background_added=added.name))


@router.post("/chats/{chat_id}/backgrounds/{background_id}/delete")
def delete_background_page(
    chat_id: int, background_id: int, request: Request, session: SessionDep
) -> HTMLResponse:
    """Delete an uploaded background (every chat and character using it shows none)."""
    chat = chats.get_chat(session, chat_id)
    service.delete_background(session, background_id)
    return _section(request, backdrop.background_ctx(session, chat))

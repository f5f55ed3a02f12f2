"""Backgrounds over JSON: the same service calls as Chat Settings' section (a chat chooses one through
its settings' `background`, a character through the character page)."""

from datetime import datetime

from fastapi import APIRouter, File, UploadFile
from pydantic import BaseModel

from app.backgrounds import service
from app.backgrounds.core.builtin import BUILTINS
from app.backgrounds.models import Background
from app.platform.core.errors import UserError
from app.web.deps import SessionDep

router = APIRouter(prefix="/api/backgrounds", tags=["backgrounds"])


class BackgroundRead(BaseModel):
    choice: str  # what a chat's settings or a character store to choose it
    name: str
    url: str
    shipped: bool
    created_at: datetime | None = None


def _read(b: Background) -> BackgroundRead:
    return BackgroundRead(
        choice=f"image:{b.id}",
        name=b.name,
        url=f"/images/{b.image_id}",
        shipped=False,
        created_at=b.created_at,
    )


@router.get("", response_model=list[BackgroundRead])
def list_backgrounds(session: SessionDep) -> list[BackgroundRead]:
    """The shipped backgrounds, then the uploaded ones (newest first)."""
    shipped = [
        BackgroundRead(choice=f"builtin:{b.name}", name=b.label, url=b.url, shipped=True) for b in BUILTINS
    ]
    return shipped + [_read(b) for b in service.list_backgrounds(session)]


@router.post("", response_model=BackgroundRead, status_code=201)
def upload_background(session: SessionDep, file: UploadFile = File(...)) -> BackgroundRead:
    """Upload a picture (PNG, JPEG, WebP or GIF; up to 12 MB and 40 megapixels) as a background."""
    raw = file.file.read()
    if not raw:
        raise UserError("The picture is empty.")
    return _read(service.upload_background(session, raw, file.filename))


@router.delete("/{background_id}", status_code=204)
def delete_background(background_id: int, session: SessionDep) -> None:
    """Delete an uploaded background (chats and characters using it show none)."""
    service.delete_background(session, background_id)

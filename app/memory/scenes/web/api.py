"""Access memories for this chat over JSON (Advanced Memory, issue 14): the chat's numbered scenes with
search, Inspect source messages, edit Summary text, disable a record, Delete summary, Delete all
memories, export and import. Reindex is not here yet: scene embeddings are built in a later step.
The decisions are in app/memory/scenes/service.py and transfer.py."""

from datetime import datetime
from typing import Literal

from fastapi import APIRouter, File, Query, UploadFile
from fastapi.responses import Response
from pydantic import BaseModel, Field

from app.chats.service import get_chat
from app.memory.scenes import fix, rescans, service
from app.memory.scenes.checks import skip_unreadable
from app.memory.scenes.core.transfer import MAX_IMPORT_BYTES, MAX_QUERY_CHARS, MAX_SUMMARY_CHARS
from app.memory.scenes.jobs import schedule_processing
from app.memory.scenes.service import ChatMessage, SceneView
from app.platform.core.downloads import content_disposition
from app.platform.modelbase import RowId
from app.web.deps import ServicesDep, SessionDep

router = APIRouter(prefix="/api/chats", tags=["scenes"])


class SceneRead(BaseModel):
    id: int
    number: int  # 1 = the chat's oldest scene
    first_message_id: int
    last_message_id: int
    first_number: int | None  # message numbers as the chat view shows them (None: all deleted)
    last_number: int | None
    first_at: datetime | None  # the dates of those messages
    last_at: datetime | None
    state: str  # waiting, writing, written, failed, deleted (Delete summary)
    summary: str
    participants: list[str]
    timeframe: str
    enabled: bool
    manual: bool
    check_who: bool
    reason: str
    updated_at: datetime


class SourceMessage(BaseModel):
    id: int
    number: int
    role: str
    name: str
    content: str
    hidden: bool
    status: str
    created_at: datetime


class SceneDetail(SceneRead):
    messages: list[SourceMessage]


class ScenePatch(BaseModel):
    """Summary text (the scene becomes a manual recap, never rewritten) and/or whether it is recalled."""

    summary: str | None = Field(default=None, max_length=MAX_SUMMARY_CHARS)
    enabled: bool | None = None


def _read(view: SceneView) -> SceneRead:
    s, first, last = view.scene, view.first, view.last
    return SceneRead(
        id=s.id,
        number=view.number,
        first_message_id=s.first_message_id,
        last_message_id=s.last_message_id,
        first_number=first.number if first else None,
        last_number=last.number if last else None,
        first_at=first.created_at if first else None,
        last_at=last.created_at if last else None,
        state=s.state,
        summary=s.summary,
        participants=[str(p) for p in s.participants or ()],
        timeframe=s.timeframe,
        enabled=s.enabled,
        manual=s.manual,
        check_who=s.check_who,
        reason=s.reason,
        updated_at=s.updated_at,
    )


def _message(m: ChatMessage) -> SourceMessage:
    return SourceMessage(
        id=m.id,
        number=m.number,
        role=m.role,
        name=m.name,
        content=m.content,
        hidden=m.hidden,
        status=m.status,
        created_at=m.created_at,
    )


@router.get("/{chat_id}/scenes", response_model=list[SceneRead])
def list_scenes(
    chat_id: int,
    session: SessionDep,
    q: str | None = Query(default=None, min_length=1, max_length=MAX_QUERY_CHARS),
) -> list[SceneRead]:
    """The chat's scenes oldest first, numbered; with `q`, those whose summary holds it (case and
    accents aside)."""
    return [_read(v) for v in service.scene_views(session, chat_id, q)]


@router.get("/{chat_id}/scenes/export")
def export_scenes(chat_id: int, session: SessionDep) -> Response:
    """Download the chat's scenes as a JSON file (messages named by number)."""
    name, body = service.export_file(session, chat_id)
    return Response(
        body,
        media_type="application/json",
        headers={"Content-Disposition": content_disposition(name, fallback="scenes")},
    )


@router.post("/{chat_id}/scenes/import")
def import_scenes(
    chat_id: int, session: SessionDep, file: UploadFile = File(...), replace: bool = Query(default=False)
) -> dict:
    """Import a scenes file: each scene is matched to this chat's messages by number; any problem refuses
    the whole file and changes nothing. A chat with scenes needs `replace=true` (its scenes then go)."""
    raw = file.file.read(MAX_IMPORT_BYTES + 1)
    return service.import_file(session, chat_id, raw, replace=replace)


@router.delete("/{chat_id}/scenes")
def delete_all_scenes(chat_id: int, session: SessionDep) -> dict:
    """Delete all memories: every scene, saved part and the scene-check state; the chat and its settings stay.
    409 with the reason while Prepare existing history runs."""
    return {"deleted": service.delete_all(session, chat_id)}


@router.delete("/{chat_id}/scenes/new-start")
def undo_new_start(chat_id: int, session: SessionDep) -> dict:
    """Undo the "new start" Advanced Memory set when the prompt reached the ceiling: the whole history is
    the window again (until the ceiling is reached again)."""
    return {"undone": service.undo_new_start(session, chat_id)}


class RescanRange(BaseModel):
    """Message numbers as the chat shows them (1 = the first); either left out: the open scene's."""

    first: int | None = Field(default=None, ge=1, le=10_000_000)
    last: int | None = Field(default=None, ge=1, le=10_000_000)


class RescanRead(BaseModel):
    """The chat's last re-scan (`status` "none": none yet); one a restart cut short is "stopped" with the reason."""

    status: Literal["none", "running", "done", "stopped", "failed"]
    first: int | None = None  # the range read (widened to whole scenes at its edges)
    last: int | None = None
    stage: Literal["detecting", "recapping"] | None = None
    total: int = 0
    done: int = 0
    current: str = ""
    message: str = ""
    changed: list[int] = []  # the new scenes' numbers
    default_first: int | None = None  # the open scene, the form's default
    default_last: int | None = None


def _rescan_read(session, services, chat_id: int) -> RescanRead:
    get_chat(session, chat_id)
    run = rescans.rescan_status(services, chat_id, session)
    default = rescans.default_range(session, chat_id) or (None, None)
    base = (
        RescanRead(status="none")
        if run is None
        else RescanRead(
            status=run.status,
            first=run.first,
            last=run.last,
            stage=run.stage,
            total=run.total,
            done=run.done,
            current=run.current,
            message=run.message,
            changed=list(run.changed),
        )
    )
    base.default_first, base.default_last = default
    return base


@router.get("/{chat_id}/scenes/rescan", response_model=RescanRead)
def rescan_status(chat_id: int, session: SessionDep, services: ServicesDep) -> RescanRead:
    """Re-scan scenes: the last re-scan's progress or outcome, and the default range (the open scene)."""
    return _rescan_read(session, services, chat_id)


@router.post("/{chat_id}/scenes/rescan", response_model=RescanRead, status_code=202)
def start_rescan(chat_id: int, data: RescanRange, session: SessionDep, services: ServicesDep) -> RescanRead:
    """Re-scan scenes in messages `first`–`last` (at most 2,000) in the background: the helper finds the scene
    ends again, the changed scenes are replaced in one step and recapped. A hand-edited summary that would
    change stops it with nothing changed (the status names the scene). 409 while one runs."""
    rescans.start_rescan(services, chat_id, data.first or None, data.last or None)  # before `session` is used
    return _rescan_read(session, services, chat_id)


@router.get("/{chat_id}/scenes/{scene_id}", response_model=SceneDetail)
def show_scene(chat_id: int, scene_id: RowId, session: SessionDep) -> SceneDetail:
    """One scene with its source messages (Inspect source messages)."""
    view = service.scene_view(session, chat_id, scene_id)
    messages = [_message(m) for m in service.source_messages(session, chat_id, scene_id)]
    return SceneDetail(**_read(view).model_dump(), messages=messages)


@router.patch("/{chat_id}/scenes/{scene_id}", response_model=SceneRead)
def edit_scene(chat_id: int, scene_id: RowId, data: ScenePatch, session: SessionDep) -> SceneRead:
    """Edit the Summary text (never rewritten afterwards; empty text refused) and/or turn the scene on or off."""
    service.edit_scene(session, chat_id, scene_id, summary=data.summary, enabled=data.enabled)
    return _read(service.scene_view(session, chat_id, scene_id))


@router.delete("/{chat_id}/scenes/{scene_id}/summary", response_model=SceneRead)
def delete_scene_summary(chat_id: int, scene_id: RowId, session: SessionDep) -> SceneRead:
    """Delete summary: the recap goes, the scene keeps its bounds and is not recapped again by routine work."""
    service.delete_summary(session, chat_id, scene_id)
    return _read(service.scene_view(session, chat_id, scene_id))


# Problems, Fix, Pause / Resume processing (app/memory/scenes/fix.py) ---------------------------------
# Their own router, included before `router` (app/main.py): GET /scenes/problems would otherwise be read
# as /scenes/{scene_id}.


fix_router = APIRouter(prefix="/api/chats", tags=["scenes"])


class ProblemRead(BaseModel):
    scene_id: int | None  # None: the chat's failed scene check
    number: int | None  # the scene's number (Access memories numbers them alike)
    kind: str  # changed, changed_manual, failed, unsummarised, check_who, check_who_undecided, no_messages, check_failed
    sentence: str
    review: bool  # Fix leaves it to you ("need your review")
    # The failed scene check's answer could not be read even when asked again: POST .../scenes/check/skip
    # treats its batch as having no scene end.
    can_skip_batch: bool = False


class FixRunRead(BaseModel):
    id: int
    status: str  # running, stopped (Pause processing, or a restart), failed, done
    total: int
    done: int
    current: str  # the step in hand; when done, "Advanced Memory fixed N scenes…"
    reason: str
    working: bool


class ProblemsRead(BaseModel):
    count: int
    key: str  # the same set of problems gives the same key ("" when none): announce a set once
    problems: list[ProblemRead]
    paused: bool
    run: FixRunRead | None


def _problems_read(session, services, chat_id: int, run=None) -> ProblemsRead:
    st = fix.fix_status(session, services, chat_id)
    run = run or st.run
    items = [
        ProblemRead(
            scene_id=p.scene_id or None,
            number=p.number or None,
            kind=p.kind,
            sentence=p.sentence,
            review=p.review,
            can_skip_batch=p.can_skip_batch,
        )
        for p in st.problems.items
    ]
    return ProblemsRead(
        count=st.problems.count,
        key=st.problems.key,
        problems=items,
        paused=st.paused,
        run=None
        if run is None
        else FixRunRead(
            id=run.id,
            status=run.status,
            total=run.total,
            done=run.done,
            current=run.current,
            reason=run.reason,
            working=st.working,
        ),
    )


@fix_router.get("/{chat_id}/scenes/problems", response_model=ProblemsRead)
def scene_problems(chat_id: int, session: SessionDep, services: ServicesDep) -> ProblemsRead:
    """The chat's memory problems (changed, failed or unsummarised scenes, Check who was there, a failed
    scene check), the set's key, whether processing is paused, and the newest Fix run."""
    return _problems_read(session, services, chat_id)


@fix_router.post("/{chat_id}/scenes/fix", response_model=ProblemsRead, status_code=202)
def fix_scenes(chat_id: int, session: SessionDep, services: ServicesDep) -> ProblemsRead:
    """Fix every flagged scene in the background with the helper model (409 while Fix or Prepare runs);
    hand-edited summaries are never rewritten."""
    run = fix.start_fix(services, chat_id)
    return _problems_read(session, services, chat_id, run)


@fix_router.post("/{chat_id}/scenes/check/skip", response_model=ProblemsRead)
def skip_check_batch(chat_id: int, session: SessionDep, services: ServicesDep) -> ProblemsRead:
    """Treat the batch the failed scene check could not read as having no scene end: the check's mark
    moves past it and its failure clears (400 when the failure was not an unreadable answer)."""
    skip_unreadable(services, chat_id)
    schedule_processing(services, chat_id)
    return _problems_read(session, services, chat_id)


@fix_router.post("/{chat_id}/scenes/pause", response_model=ProblemsRead)
def pause_processing(chat_id: int, session: SessionDep, services: ServicesDep) -> ProblemsRead:
    """Pause processing: no scene check, recap, Prepare or Fix step runs in this chat until Resume."""
    fix.pause(services, chat_id)
    return _problems_read(session, services, chat_id)


@fix_router.post("/{chat_id}/scenes/resume", response_model=ProblemsRead)
def resume_processing(chat_id: int, session: SessionDep, services: ServicesDep) -> ProblemsRead:
    """Resume processing: what the pause stopped (Fix, Prepare, the checks and recaps) goes on."""
    fix.resume(services, chat_id)
    return _problems_read(session, services, chat_id)

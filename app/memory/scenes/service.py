"""Access memories for this chat (issue 14): the chat's scenes as the user reads and corrects them. The
I/O behind app/memory/scenes/web/api.py; the search and the file format are transfer.py's.

Decisions:
- Scenes are numbered 1, 2, … oldest first (by their first message); a search keeps those numbers. Their
  bounds are shown as message numbers as the chat view numbers them (every message, hidden ones
  included), with the dates of the first and last message still there; a scene whose messages were all
  deleted shows none.
- Editing the Summary text makes the scene "written" and `manual`: the writer claims and stores only
  scenes that are not manual (two conditional UPDATEs in writer.py), so the text is never rewritten,
  even by a writer busy with the scene at that moment. Empty text is refused (Delete summary is the way
  to remove a recap); at most transfer.MAX_SUMMARY_CHARS characters.
- Delete summary: the scene keeps its bounds (so the scene check does not close it again) and goes to
  state "deleted", without text, participants, timeframe or saved parts. The writer claims only
  "waiting"/"failed" scenes and the sweep looks only for those, so routine preparation never writes it
  again; writing the Summary text by hand brings it back as a manual recap.
- Delete all memories: every scene of the chat, their saved parts and the chat's scene-check state go
  (Prepare existing history's runs too, so a Prepare cancelled before starts again from the first message
  rather than resuming past scenes that no longer exist); the chat, its messages and its settings stay,
  and the next check starts from the first message. Refused while Prepare runs (PREPARING), as Fix and
  Re-scan are: Prepare would go on closing scenes after a mark whose scenes are gone. Import is refused
  then too (it replaces the scenes the same way).
- Import replaces: a chat that already has scenes is refused unless `replace` is asked for (its scenes
  and parts then go first, in the same transaction). Everything is checked before the first write.
  The scene check's mark moves to the last imported scene's end, so it does not read those messages again.
- Reindex (the scenes' embeddings) is left for later: the embeddings of scenes are not built yet.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlmodel import Session, col, delete, select

from app.chats.history import message_numbers, private_messages
from app.chats.models import Message
from app.chats.service import chat_characters, chat_settings, get_chat
from app.memory.scenes import prompt, recollections
from app.memory.scenes.checks import prepare_running
from app.memory.scenes.core import access, transfer
from app.memory.scenes.models import PREPARE_STAGES, Scene, SceneRecapPart, SceneRun, SceneState
from app.platform.core.downloads import safe_stem
from app.platform.core.errors import Conflict, NotFound, UserError
from app.platform.timeutil import utcnow


@dataclass(frozen=True)
class ChatMessage:
    id: int
    number: int  # as the chat view numbers it
    role: str
    name: str
    content: str
    hidden: bool
    status: str
    created_at: datetime


@dataclass(frozen=True)
class SceneView:
    scene: Scene
    number: int  # the scene's number in the chat, oldest first
    first: ChatMessage | None  # the scene's first and last messages still in the chat
    last: ChatMessage | None
    # Its character recollections, when the chat has them on (or the scene has any saved).
    recollections: tuple[recollections.Shown, ...] = ()


def chat_messages(session: Session, chat_id: int) -> list[ChatMessage]:
    """The chat's messages oldest first, numbered as the chat view numbers them."""
    rows = session.exec(
        select(
            Message.id,
            Message.role,
            Message.name,
            Message.content,
            Message.hidden,
            Message.status,
            Message.created_at,
        )
        .where(Message.chat_id == chat_id, Message.kind == "message")
        .order_by(col(Message.id))
    ).all()
    return [
        ChatMessage(mid, n, role, name or role, content or "", hidden, status, created)
        for n, (mid, role, name, content, hidden, status, created) in enumerate(rows, 1)
    ]


def _within(messages: list[ChatMessage], ids: list[int], scene: Scene) -> list[ChatMessage]:
    lo, hi = bisect_left(ids, scene.first_message_id), bisect_right(ids, scene.last_message_id)
    return messages[lo:hi]


def _scenes(session: Session, chat_id: int) -> list[Scene]:
    return list(
        session.exec(select(Scene).where(Scene.chat_id == chat_id).order_by(col(Scene.first_message_id)))
    )


# Each scene's first and last message still in the chat: two index seeks per scene, not the chat read.
_ENDS_SQL = text(
    "SELECT s.id, (SELECT min(m.id) FROM message m WHERE m.chat_id = s.chat_id AND m.kind = 'message'"
    " AND m.id BETWEEN s.first_message_id AND s.last_message_id),"
    " (SELECT max(m.id) FROM message m WHERE m.chat_id = s.chat_id AND m.kind = 'message'"
    " AND m.id BETWEEN s.first_message_id AND s.last_message_id) FROM scene s WHERE s.chat_id = :chat_id"
)


def _numbered(session: Session, chat_id: int, where) -> list[ChatMessage]:
    """The chat's messages `where` selects, oldest first, numbered as the chat view numbers them (from
    indexed counts, so a page of them costs what it shows)."""
    rows = session.exec(
        select(
            Message.id,
            Message.role,
            Message.name,
            Message.content,
            Message.hidden,
            Message.status,
            Message.created_at,
        )
        .where(Message.chat_id == chat_id, Message.kind == "message", where)
        .order_by(col(Message.id))
    ).all()
    numbers = message_numbers(session, chat_id, [row[0] for row in rows])
    return [
        ChatMessage(mid, numbers[mid], role, name or role, content or "", hidden, status, created)
        for mid, role, name, content, hidden, status, created in rows
    ]


def scene_views(session: Session, chat_id: int, q: str | None = None) -> list[SceneView]:
    """The chat's scenes oldest first, numbered; only those whose summary holds `q` when it is given.
    Reads the scenes and their end messages, never the chat's every message."""
    get_chat(session, chat_id)
    ends = {sid: (lo, hi) for sid, lo, hi in session.connection().execute(_ENDS_SQL, {"chat_id": chat_id})}
    scenes = [
        (number, scene)
        for number, scene in enumerate(_scenes(session, chat_id), 1)
        if not q or transfer.matches(scene.summary, q)
    ]
    wanted = {i for _, scene in scenes for i in ends.get(scene.id, (None, None)) if i is not None}
    shown = {m.id: m for m in _numbered(session, chat_id, col(Message.id).in_(wanted))} if wanted else {}
    chat = get_chat(session, chat_id)
    remembering = chat_settings(chat).adv_recollections
    views = []
    for number, scene in scenes:
        lo, hi = ends.get(scene.id, (None, None))
        recs = (
            tuple(recollections.for_scene(session, scene)) if remembering and scene.state == "written" else ()
        )
        views.append(SceneView(scene, number, shown.get(lo or 0), shown.get(hi or 0), recs))
    return views


def count_scenes(session: Session, chat_id: int) -> int:
    """How many scenes the chat has (a search's "no match" and the empty page tell them apart)."""
    return len(session.exec(select(Scene.id).where(Scene.chat_id == chat_id)).all())


def get_scene(session: Session, chat_id: int, scene_id: int) -> Scene:
    get_chat(session, chat_id)
    scene = session.get(Scene, scene_id)
    if scene is None or scene.chat_id != chat_id:
        raise NotFound(f"Chat {chat_id} has no scene {scene_id}.")
    return scene


def scene_view(session: Session, chat_id: int, scene_id: int) -> SceneView:
    get_scene(session, chat_id, scene_id)
    return next(v for v in scene_views(session, chat_id) if v.scene.id == scene_id)


def source_messages(session: Session, chat_id: int, scene_id: int) -> list[ChatMessage]:
    """Inspect source messages: the scene's messages still in the chat, hidden ones included."""
    scene = get_scene(session, chat_id, scene_id)
    return _numbered(session, chat_id, col(Message.id).between(scene.first_message_id, scene.last_message_id))


def edit_scene(
    session: Session, chat_id: int, scene_id: int, *, summary: str | None = None, enabled: bool | None = None
) -> Scene:
    """Change the Summary text (the scene becomes a written, manual recap) and/or whether it is recalled."""
    scene = get_scene(session, chat_id, scene_id)
    if summary is not None:
        text = summary.strip()
        if not text:
            raise UserError("The summary text cannot be empty. To remove the recap, use Delete summary.")
        if len(text) > transfer.MAX_SUMMARY_CHARS:
            raise UserError(f"The summary text can have at most {transfer.MAX_SUMMARY_CHARS:,} characters.")
        scene.summary, scene.manual, scene.state = text, True, "written"
        # Saved by the user, who read it knowing who saw what (the manual: "revisar e salvar as
        # condições privadas"): partial readers recall it under today's audiences.
        privates = private_messages(session, chat_id)
        scene.private_key = access.private_key(
            access.inside(scene.first_message_id, scene.last_message_id, privates)
        )
        scene.reason, scene.attempts, scene.next_attempt_at = "", 0, None
    if enabled is not None:
        scene.enabled = enabled
    scene.updated_at = utcnow()
    session.add(scene)
    session.flush()
    return scene


def _drop_parts(session: Session, scene_ids: list[int]) -> None:
    if scene_ids:
        session.exec(delete(SceneRecapPart).where(col(SceneRecapPart.scene_id).in_(scene_ids)))  # type: ignore[call-overload]


def delete_summary(session: Session, chat_id: int, scene_id: int) -> Scene:
    """Delete summary: the recap goes, the scene's bounds stay, and routine preparation leaves it so."""
    scene = get_scene(session, chat_id, scene_id)
    scene.state, scene.summary, scene.participants, scene.timeframe = "deleted", "", [], ""
    scene.manual, scene.check_who, scene.fingerprint, scene.reason = False, False, "", ""
    scene.private_key = ""
    scene.attempts, scene.next_attempt_at, scene.updated_at = 0, None, utcnow()
    session.add(scene)
    _drop_parts(session, [scene_id])
    session.flush()
    return scene


PREPARING = (
    "Prepare existing history is running in this chat: wait for it to finish or Cancel it "
    "(Chat Settings → Advanced Memory Recall), then {what}."
)


def _refuse_while_preparing(session: Session, chat_id: int, what: str) -> None:
    if prepare_running(session, chat_id):
        raise Conflict(PREPARING.format(what=what))


def delete_all(session: Session, chat_id: int) -> int:
    """Delete all memories: the chat's scenes, their parts, its scene-check state and Prepare's runs; how
    many scenes. Refused while Prepare runs."""
    get_chat(session, chat_id)
    _refuse_while_preparing(session, chat_id, "delete all memories")
    return _delete_all(session, chat_id)


def _delete_all(session: Session, chat_id: int) -> int:
    ids = [s.id for s in _scenes(session, chat_id) if s.id is not None]
    _drop_parts(session, ids)
    if ids:
        session.exec(delete(Scene).where(col(Scene.id).in_(ids)))  # type: ignore[call-overload]
    session.exec(delete(SceneState).where(col(SceneState.chat_id) == chat_id))  # type: ignore[call-overload]
    session.exec(
        delete(SceneRun).where(col(SceneRun.chat_id) == chat_id, col(SceneRun.stage).in_(PREPARE_STAGES))
    )  # type: ignore[call-overload]
    session.flush()
    return len(ids)


def export_file(session: Session, chat_id: int) -> tuple[str, bytes]:
    """The chat's scenes as a JSON file (those whose messages were all deleted are left out)."""
    chat = get_chat(session, chat_id)
    messages = chat_messages(session, chat_id)
    ids = [m.id for m in messages]
    out = []
    for scene in _scenes(session, chat_id):
        inside = _within(messages, ids, scene)
        if not inside:
            continue
        out.append(
            transfer.FileScene(
                first=inside[0].number,
                last=inside[-1].number,
                state=scene.state,
                summary=scene.summary,
                participants=tuple(str(p) for p in scene.participants or ()),
                timeframe=scene.timeframe,
                enabled=scene.enabled,
                manual=scene.manual,
                check_who=scene.check_who,
                messages_hash=transfer.messages_hash(
                    [(m.name, m.content) for m in messages[inside[0].number - 1 : inside[-1].number]]
                ),
                recollections=tuple(
                    transfer.FileRecollection(*item)
                    for item in recollections.for_file(session, scene.id or 0)
                ),
            )
        )
    body = transfer.write_file(chat_name=chat.name, scenes=out, now=utcnow())
    return f"{safe_stem(chat.name, 'chat')}-scenes.sugo.json", body


def import_file(session: Session, chat_id: int, raw: bytes, *, replace: bool = False) -> dict:
    """Import a scenes file into the chat, matched to its messages by number; everything is checked
    first, and any problem refuses the whole file with a sentence."""
    get_chat(session, chat_id)
    _refuse_while_preparing(session, chat_id, "import")
    messages = chat_messages(session, chat_id)
    try:
        scenes = transfer.read_file(raw)
        transfer.check_against(scenes, [(m.name, m.content) for m in messages])
    except transfer.SceneFileError as err:
        raise UserError(str(err)) from None
    existing = _scenes(session, chat_id)
    if existing and not replace:
        raise Conflict(
            f"This chat already has {len(existing)} scene{'s' if len(existing) != 1 else ''}: "
            "import with replace to put the file's in their place, or delete all memories first."
        )
    replaced = _delete_all(session, chat_id) if existing else 0
    now = utcnow()
    members = {c.id: c.name for c in chat_characters(session, chat_id) if c.id is not None}
    unmatched = 0
    for s in scenes:
        scene = Scene(
            chat_id=chat_id,
            first_message_id=messages[s.first - 1].id,
            last_message_id=messages[s.last - 1].id,
            state=s.state,
            summary=s.summary,
            participants=list(s.participants),
            timeframe=s.timeframe,
            enabled=s.enabled,
            manual=s.manual,
            check_who=s.check_who,
            created_at=now,
            updated_at=now,
        )
        session.add(scene)
        if s.recollections:
            session.flush()
            items = [(r.character, r.text, r.manual, r.deleted) for r in s.recollections]
            unmatched += recollections.from_file(session, scene, items, members)
    if scenes:
        end = messages[scenes[-1].last - 1].id
        state = session.get(SceneState, chat_id) or SceneState(chat_id=chat_id)
        state.checked_through_id = max(end, state.checked_through_id or 0)
        state.updated_at = now
        session.add(state)
    session.flush()
    return {"imported": len(scenes), "replaced": replaced, "recollections_left_out": unmatched}


def undo_new_start(session: Session, chat_id: int) -> bool:
    """Clear the current window's "new start" (the prompt sends the whole history again, and restarts at
    the newest scene when it reaches the ceiling again); whether there was one."""
    get_chat(session, chat_id)
    had = prompt.window_start(session, chat_id) is not None
    if had:
        prompt.store_window_start(session, chat_id, None)
        session.commit()
    return had


_LINE_IDS_SQL = text("SELECT id FROM message WHERE chat_id = :chat_id ORDER BY id")


def copy_to_branch(session: Session, source_id: int, branch_id: int) -> None:
    """A branch keeps Advanced Memory: the scenes that end at or before the branch point are copied with
    their recaps (a scene waiting or being written is copied waiting, written anew for the branch); a
    scene the branch point falls inside is not, so it is open again in the branch and recapped when it
    ends there (the manual's "reabre essa cena"). The scene check's mark and the new start follow when
    they lie within the branch."""
    conn = session.connection()
    old = list(conn.execute(_LINE_IDS_SQL, {"chat_id": source_id}).scalars())
    new = list(conn.execute(_LINE_IDS_SQL, {"chat_id": branch_id}).scalars())
    if not new:
        return
    mapped = dict(zip(old[: len(new)], new, strict=True))
    last_copied = old[len(new) - 1]
    kept = old[: len(new)]

    def inside(first: int, last: int) -> tuple[int, int] | None:
        lo, hi = bisect_left(kept, first), bisect_right(kept, last) - 1
        return (mapped[kept[lo]], mapped[kept[hi]]) if lo <= hi else None

    copies: list[tuple[int, Scene]] = []
    for scene in _scenes(session, source_id):
        if (
            scene.last_message_id > last_copied
            or (span := inside(scene.first_message_id, scene.last_message_id)) is None
        ):
            continue
        data = scene.model_dump(
            exclude={
                "id",
                "chat_id",
                "first_message_id",
                "last_message_id",
                "created_at",
                "updated_at",
                "next_attempt_at",
            }
        )
        if data["state"] == "writing":
            data["state"] = "waiting"
        data["private_key"] = access.remap_key(data.get("private_key", ""), mapped)
        copy = Scene(**data, chat_id=branch_id, first_message_id=span[0], last_message_id=span[1])
        session.add(copy)
        copies.append((scene.id or 0, copy))
    if copies:  # their character recollections go along
        session.flush()
        recollections.copy_to_branch(session, {old: new.id or 0 for old, new in copies}, mapped)
    state = session.get(SceneState, source_id)
    if state is not None:

        def at_or_before(message_id: int | None) -> int | None:
            if message_id is None:
                return None
            i = bisect_right(kept, message_id) - 1
            return mapped[kept[i]] if i >= 0 else None

        start = state.window_start_id
        session.add(
            SceneState(
                chat_id=branch_id,
                paused=state.paused,
                checked_through_id=at_or_before(min(state.checked_through_id or 0, last_copied) or None),
                window_start_id=mapped.get(start) if start is not None and start <= last_copied else None,
            )
        )
    session.flush()

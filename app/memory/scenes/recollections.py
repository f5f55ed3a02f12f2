"""Character recollections (issue 27): writing them in the background, the valid ones a turn may show,
and the edits of Access memories. The rules are in core/recollection.py.

- Written by Advanced Memory's processing after each reply (up to MAX_PER_RUN scenes, newest first),
  by the periodic sweep, and right after Chat Settings turns the option on; a run that wrote some and
  left more defers the next, so a prepared chat gets them scene by scene ("Writing character
  recollections", counted in Chat Settings). A helper that fails stops the run; the next one retries.
- Nothing is written while the option or Advanced Memory is off, the chat is paused or its Prepare is
  unfinished; turning the option off keeps what was written, out of the prompts.
- An unusable answer (empty, unreadable, too long, or copying four words of what the character could
  not see) stores an empty recollection with the reason: it is written again only when the recap or
  what its character can read changes, and the user may write one in Access memories."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlmodel import Session, col, select

from app.characters.models import Character
from app.chats.core.audience import Viewer, sees
from app.chats.history import private_messages
from app.chats.models import Chat
from app.chats.service import chat_characters
from app.chats.settings import read_settings
from app.connections.providers import complete_chat_blocking
from app.connections.providers.base import GenerationParams, ProviderError
from app.memory.scenes.checks import preparing
from app.memory.scenes.core import access
from app.memory.scenes.core import recollection as rules
from app.memory.scenes.messages import helper_config, readable_messages
from app.memory.scenes.models import Scene, SceneRecollection, SceneState
from app.memory.summaries.core.answers import Failure
from app.memory.summaries.core.prompts import visible_to
from app.platform.core.errors import NotFound, UserError
from app.platform.services import Services
from app.platform.timeutil import utcnow
from app.prompt.core.tokens import count_tokens

log = logging.getLogger(__name__)

MAX_PER_RUN = 3  # scenes a run writes ("up to three scenes after each reply, newest first")
CARD_SHARE_TOKENS = 6_000  # half of the helper's room for a scene (writer.INPUT_BUDGET_TOKENS)
MAX_TEXT_CHARS = 4_000  # a recollection typed in Access memories
LEAKED = "It repeated words from messages {name} did not see, so it was left out."
CARD_TOO_BIG = "{name}'s card takes over half of the helper's room: no recollection."


def on(chat: Chat | None) -> bool:
    if chat is None or chat.mode != "roleplay":
        return False
    s = read_settings(chat.settings)
    return s.advanced_memory and s.adv_recollections


@dataclass(frozen=True)
class Task:
    scene_id: int
    character_id: int


def _scenes(session: Session, chat_id: int) -> list[Scene]:
    return list(
        session.exec(
            select(Scene)
            .where(Scene.chat_id == chat_id, Scene.state == "written", Scene.enabled == True)  # noqa: E712
            .order_by(col(Scene.first_message_id).desc())
        )
    )


def _rows(session: Session, scene_ids: list[int]) -> dict[tuple[int, int], SceneRecollection]:
    if not scene_ids:
        return {}
    rows = session.exec(select(SceneRecollection).where(col(SceneRecollection.scene_id).in_(scene_ids)))
    return {(r.scene_id, r.character_id): r for r in rows}


def progress(session: Session, chat_id: int) -> tuple[int, int]:
    """(scenes whose recollections are all written and current, written scenes)."""
    scenes = _scenes(session, chat_id)
    waiting = {t.scene_id for t in tasks(session, chat_id)}
    return len(scenes) - len(waiting), len(scenes)


def tasks(session: Session, chat_id: int) -> list[Task]:
    """The recollections to write, newest scene first: missing, or generated ones gone out of date."""
    chat = session.get(Chat, chat_id)
    if chat is None:
        return []
    members = {c.id: c.name for c in chat_characters(session, chat_id) if c.id is not None}
    narrator = read_settings(chat.settings).narrator_id
    privates = private_messages(session, chat_id)
    scenes = _scenes(session, chat_id)
    rows = _rows(session, [s.id for s in scenes if s.id is not None])
    out = []
    for scene in scenes:
        assert scene.id is not None
        key = rules.summary_key(scene.summary)
        private = access.private_key(access.inside(scene.first_message_id, scene.last_message_id, privates))
        for cid in rules.present(scene.participants or [], scene.check_who, members, narrator):
            row = rows.get((scene.id, cid))
            if row is not None and (row.deleted or row.manual):
                continue
            if row is not None and row.summary_key == key and row.private_key == private:
                continue
            out.append(Task(scene.id, cid))
    return out


def write_recollections(services: Services, chat_id: int, *, limit: int = MAX_PER_RUN) -> int:
    """Write up to `limit` scenes' recollections; how many recollections were stored (`more_due` tells
    whether some are left)."""
    with Session(services.engine) as session:
        chat = session.get(Chat, chat_id)
        if not on(chat) or preparing(session, chat_id):
            return 0
        state = session.get(SceneState, chat_id)
        if state is not None and state.paused:
            return 0
        todo = tasks(session, chat_id)
    scene_ids = list(dict.fromkeys(t.scene_id for t in todo))[:limit]
    stored = 0
    for task in (t for t in todo if t.scene_id in scene_ids):
        try:
            if not write_one(services, task.scene_id, task.character_id):
                break
        except Exception:  # background work: the next run tries again
            log.exception("writing a recollection of scene %s failed", task.scene_id)
            break
        stored += 1
    return stored


def more_due(services: Services, chat_id: int) -> bool:
    with Session(services.engine) as session:
        return on(session.get(Chat, chat_id)) and bool(tasks(session, chat_id))


def write_one(services: Services, scene_id: int, character_id: int) -> bool:
    """Ask the helper for one recollection and store it (or an empty one with the reason); False when
    the helper could not be asked or failed (nothing stored: the next run tries again)."""
    with Session(services.engine) as session:
        scene = session.get(Scene, scene_id)
        character = session.get(Character, character_id)
        chat = session.get(Chat, scene.chat_id) if scene is not None else None
        if scene is None or character is None or chat is None:
            return True
        narrator = read_settings(chat.settings).narrator_id
        privates = access.inside(
            scene.first_message_id, scene.last_message_id, private_messages(session, chat.id)
        )
        me = Viewer(character_id, narrator)
        unseen_ids = {i for i, a in privates if not sees(me, a)}
        inside = [
            m
            for m in readable_messages(session, chat.id)
            if scene.first_message_id <= m.id <= scene.last_message_id
        ]
        seen = [rules.SeenLine(m.number, m.name, m.text) for m in inside if m.id not in unseen_ids]
        unseen = [m.text for m in inside if m.id in unseen_ids]
        card = "\n".join(p for p in (character.description, character.personality) if p.strip())
        keys = (rules.summary_key(scene.summary), access.private_key(privates))
        if count_tokens(card) > CARD_SHARE_TOKENS:
            _store(session, scene_id, character_id, "", keys, CARD_TOO_BIG.format(name=character.name))
            return True
        try:
            config = helper_config(session, services, chat)
        except UserError as err:
            log.warning("recollections of chat %s: %s", chat.id, err)
            return False
        request = rules.recollection_request(
            character.name, card, visible_to(scene.summary, character.name), seen
        )
    try:
        done = complete_chat_blocking(config, request, GenerationParams(max_tokens=rules.ANSWER_TOKENS))
    except ProviderError as err:
        log.warning("recollection of scene %s for %s failed: %s", scene_id, character.name, err.message)
        return False
    got = rules.read_recollection(done.text or "", done.finish_reason, done.reasoning)
    text, reason = ("", got.reason) if isinstance(got, Failure) else (got, "")
    if text and rules.leaks(text, unseen, [m.text for m in seen]):
        text, reason = "", LEAKED.format(name=character.name)
    with Session(services.engine) as session:
        _store(session, scene_id, character_id, text, keys, reason)
    return True


def _store(
    session: Session, scene_id: int, character_id: int, text: str, keys: tuple[str, str], reason: str
) -> None:
    row = session.exec(
        select(SceneRecollection).where(
            SceneRecollection.scene_id == scene_id, SceneRecollection.character_id == character_id
        )
    ).first()
    if row is not None and (row.manual or row.deleted):  # edited or deleted meanwhile: the user's wins
        return
    row = row or SceneRecollection(scene_id=scene_id, character_id=character_id)
    row.text, row.reason = text, reason
    row.summary_key, row.private_key = keys
    row.updated_at = utcnow()
    session.add(row)
    session.commit()


# What a turn shows ---------------------------------------------------------------------------------


def valid_for_prompt(session: Session, scenes: dict[int, tuple[str, str]]) -> dict[int, dict[int, str]]:
    """scene id → character id → text, for the given scenes ({id: (summary, current private_key)}):
    recollections with text, not deleted, written (or saved by hand) from the scene's current recap and
    audiences."""
    out: dict[int, dict[int, str]] = {}
    for row in _rows(session, list(scenes)).values():
        summary, private = scenes[row.scene_id]
        if row.deleted or not row.text.strip():
            continue
        if row.summary_key != rules.summary_key(summary) or row.private_key != private:
            continue  # out of date: a generated one waits to be written again, an edited one for review
        out.setdefault(row.scene_id, {})[row.character_id] = row.text
    return out


# Access memories -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    character_id: int
    name: str
    text: str
    manual: bool
    deleted: bool
    current: bool  # written from the scene's current recap and audiences
    reason: str


def for_scene(session: Session, scene: Scene) -> list[Shown]:
    """The scene's recollections for Access memories: each present character's (an empty one when none
    was written yet), then any of a character no longer present."""
    assert scene.id is not None
    chat = session.get(Chat, scene.chat_id)
    members = {c.id: c.name for c in chat_characters(session, scene.chat_id) if c.id is not None}
    narrator = read_settings(chat.settings).narrator_id if chat else None
    rows = _rows(session, [scene.id])
    private = access.private_key(
        access.inside(scene.first_message_id, scene.last_message_id, private_messages(session, scene.chat_id))
    )
    key = rules.summary_key(scene.summary)
    ids = rules.present(scene.participants or [], scene.check_who, members, narrator)
    ids += [cid for (_, cid) in rows if cid not in ids and cid in members]
    out = []
    for cid in ids:
        row = rows.get((scene.id, cid))
        current = row is not None and row.summary_key == key and row.private_key == private
        out.append(
            Shown(
                cid,
                members.get(cid, "?"),
                row.text if row else "",
                bool(row and row.manual),
                bool(row and row.deleted),
                current,
                row.reason if row else "",
            )
        )
    return out


def save_by_hand(session: Session, scene_id: int, character_id: int, text: str) -> SceneRecollection:
    """The user's recollection (typed or edited): marked Manually edited, never replaced, valid for the
    scene as it is now. An empty text is refused (Delete removes one)."""
    scene = session.get(Scene, scene_id)
    if scene is None:
        raise NotFound("No such scene.")
    clean = " ".join(text.split())
    if not clean:
        raise UserError("A recollection cannot be empty. To remove it, use Delete.")
    if len(clean) > MAX_TEXT_CHARS:
        raise UserError(f"A recollection is at most {MAX_TEXT_CHARS:,} characters.")
    if session.get(Character, character_id) is None:
        raise NotFound("No such character.")
    row = _rows(session, [scene_id]).get((scene_id, character_id)) or SceneRecollection(
        scene_id=scene_id, character_id=character_id
    )
    privates = private_messages(session, scene.chat_id)
    row.text, row.manual, row.deleted, row.reason = clean, True, False, ""
    row.summary_key = rules.summary_key(scene.summary)
    row.private_key = access.private_key(
        access.inside(scene.first_message_id, scene.last_message_id, privates)
    )
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    return row


def delete(session: Session, scene_id: int, character_id: int) -> None:
    """Delete: out of the prompts for good, never written again (the user may type a new one)."""
    row = _rows(session, [scene_id]).get((scene_id, character_id)) or SceneRecollection(
        scene_id=scene_id, character_id=character_id
    )
    row.text, row.deleted, row.manual, row.reason = "", True, False, ""
    row.updated_at = utcnow()
    session.add(row)
    session.flush()


def for_file(session: Session, scene_id: int) -> list[tuple[str, str, bool, bool]]:
    """The scene's recollections for its export: (character name, text, manual, deleted)."""
    out = []
    for row in _rows(session, [scene_id]).values():
        character = session.get(Character, row.character_id)
        if character is not None:
            out.append((character.name, row.text, row.manual, row.deleted))
    return out


def from_file(
    session: Session, scene: Scene, items: list[tuple[str, str, bool, bool]], members: dict[int, str]
) -> int:
    """Store an imported scene's recollections, each matched to the one member of that name; valid for
    the scene as imported. How many named no single member (left out)."""
    assert scene.id is not None
    by_name: dict[str, list[int]] = {}
    for cid, name in members.items():
        by_name.setdefault(" ".join(name.split()).casefold(), []).append(cid)
    private = access.private_key(
        access.inside(scene.first_message_id, scene.last_message_id, private_messages(session, scene.chat_id))
    )
    missing = 0
    for name, text, manual, deleted in items:
        found = by_name.get(" ".join(name.split()).casefold(), [])
        if len(found) != 1:
            missing += 1
            continue
        session.add(
            SceneRecollection(
                scene_id=scene.id,
                character_id=found[0],
                text="" if deleted else text,
                manual=manual and bool(text) and not deleted,
                deleted=deleted,
                summary_key=rules.summary_key(scene.summary),
                private_key=private,
            )
        )
    return missing


def copy_to_branch(session: Session, scene_ids: dict[int, int], remap: dict[int, int]) -> None:
    """A branch's copied scenes keep their recollections (scene ids mapped; private keys remapped)."""
    for row in _rows(session, list(scene_ids)).values():
        session.add(
            SceneRecollection(
                scene_id=scene_ids[row.scene_id],
                character_id=row.character_id,
                text=row.text,
                manual=row.manual,
                deleted=row.deleted,
                summary_key=row.summary_key,
                private_key=access.remap_key(row.private_key, remap),
                reason=row.reason,
            )
        )

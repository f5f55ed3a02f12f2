"""The two variants bench/prompt_build.py measures besides its main path, each set up on its own copy of
the prepared base data folder (the 5,000-message chat, its memories, books and notes), in the bench's own
process before a Sugo process opens that copy. Both switch the chat to Roleplay, the mode Chat Summary and
Advanced Memory are for, through the service Chat Settings saves with (`update_chat_options`), keeping
its other settings (the context note), its books, its character's note and its memories.

- summaries: Memory Recall kept on (`memory_recall: true`), Chat Summary with SUMMARY_ENTRIES active
  entries of ~25 words written as the user writes them (`write_entry`, titled "Part N"), covering every
  message in order (one per 12 or 13 messages), "Hide summarised messages" on and a recent tail of 10
  (bench/summaries.py's settings).
- adv: Advanced Memory on over the chat "prepared". The rows are written straight into the database as
  Prepare existing history leaves them (app/memory/scenes/prepare.py), which through the real Prepare and
  a helper model would take many minutes: the scenes closed with the app's own `checks.close_ends` (the
  function Prepare's windows and the check after a reply close scenes with), a scene every SCENE_EVERY
  messages and the newest SCENE_EVERY messages left as the open scene, the chat's "last checked" mark on
  its last message (SceneState.checked_through_id); each scene's recap stored as writer.py's `_store`
  stores a helper's answer (state "written", a ~60-word summary, the character as participant, the
  timeframe from the messages' time marks, the fingerprint of its messages as the writer computes it, no
  reason, no attempts); and the run "done" (SceneRun, stage "recapping", its mark on the last message).
  No scene is big enough for a recap in parts (SceneRecapPart). Then what the chat holds once it has
  been used a little after Prepare, so that no helper call is due during the timed replies: the "new
  start" the first reply stores (a prompt built for a reply, as the reply path builds it; the recalled
  scenes it kept for that reply's swipes are dropped, as the next turn answers another message), and
  the continuity entries the after-reply work writes for the archived messages before that start
  (continuity.py), already combined once: one "Continuity" entry over the older ones and
  CONTINUITY_BATCH-message entries over the rest, under 70% of the budget together (no combine due).
  The scene check interval is ADV_CHECK_INTERVAL, so no check is due in the replies the bench sends
  (bench/advanced_memory.py does the same); the other Advanced Memory settings keep their defaults.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from sqlalchemy import delete
from sqlmodel import Session

from app.chats.service import chat_settings, get_chat, update_chat_options
from app.chats.settings import ChatSettings
from app.main import build_services
from app.memory.scenes.checks import close_ends
from app.memory.scenes.core import recap as rc
from app.memory.scenes.core.continuity import COMBINED_TITLE
from app.memory.scenes.messages import readable_messages
from app.memory.scenes.models import SceneRun, SceneSnapshot
from app.memory.scenes.prompt import window_start
from app.memory.scenes.writer import fingerprint
from app.memory.summaries.generate import first_words
from app.memory.summaries.service import message_ids, write_entry
from app.platform.settings import Settings
from app.platform.timeutil import utcnow
from app.prompt.service import build_chat_prompt
from bench.recall import Text

SUMMARY_ENTRIES = 400
SUMMARY_TAIL = 10
SCENE_EVERY = 50
ADV_CHECK_INTERVAL = 100
CONTINUITY_BATCH = 50  # continuity.py writes entries of up to 50 archived messages
CONTINUITY_RECENT = 9  # entries written since the last combine


def to_roleplay(session: Session, chat_id: int, **changes: object) -> None:
    """The chat in Roleplay mode with `changes` on top of its settings, saved as Chat Settings saves them."""
    chat = get_chat(session, chat_id)
    settings = ChatSettings.model_validate({**chat_settings(chat).model_dump(exclude_none=True), **changes})
    update_chat_options(
        session,
        chat_id,
        settings=settings,
        connection_id=chat.connection_id,
        persona_id=chat.persona_id,
        mode="roleplay",
    )


def set_up_summaries(data_dir: Path, chat_id: int) -> dict[str, int]:
    """Chat Summary on with SUMMARY_ENTRIES entries covering the whole chat; what was written."""
    text = Text(random.Random(23))
    services = build_services(Settings(data_dir=data_dir, start_scheduler=False))
    try:
        with Session(services.engine) as s:
            to_roleplay(
                s,
                chat_id,
                memory_recall=True,
                summary_hide_messages=True,
                summary_recent_tail=SUMMARY_TAIL,
            )
            total = len(message_ids(s, chat_id))
            for i in range(SUMMARY_ENTRIES):
                write_entry(
                    s,
                    chat_id,
                    content=f"{text.sentence(12)} {text.sentence(13)}",
                    title=f"Part {i + 1}",
                    scope="range",
                    start=i * total // SUMMARY_ENTRIES + 1,
                    end=(i + 1) * total // SUMMARY_ENTRIES,
                )
            s.commit()
        _checkpoint(services)
    finally:
        services.close()
    return {"summary_entries": SUMMARY_ENTRIES, "summary_messages_covered": total}


def set_up_adv(data_dir: Path, chat_id: int, character: str) -> dict[str, int]:
    """Advanced Memory on over the chat as Prepare leaves it, plus the first reply's "new start" and the
    continuity entries before it (the module docstring says what is written and why); what was written."""
    text = Text(random.Random(29))
    services = build_services(Settings(data_dir=data_dir, start_scheduler=False))
    try:
        with Session(services.engine) as s:
            to_roleplay(s, chat_id, advanced_memory=True, adv_check_interval=ADV_CHECK_INTERVAL)
            messages = readable_messages(s, chat_id)
            # Scene ends at messages 50, 100, …: the newest SCENE_EVERY messages stay the open scene.
            ends = [m.id for m in messages[SCENE_EVERY - 1 : -SCENE_EVERY : SCENE_EVERY]]
            scenes = close_ends(s, chat_id, messages, ends, checked_through=messages[-1].id)
            s.flush()
            for scene in scenes:
                read = [
                    rc.SceneMessage(m.number, m.name, m.text)
                    for m in messages
                    if scene.first_message_id <= m.id <= scene.last_message_id
                ]
                anchors = rc.timeline_anchors(read)
                scene.state = "written"
                scene.summary = " ".join(
                    [f"{character} and Rowan talked about what they saw."]
                    + [text.sentence(text.rng.randint(10, 16)) for _ in range(4)]
                )
                scene.participants = [character]
                scene.timeframe = (
                    ""
                    if not anchors
                    else anchors[0].text
                    if anchors[0].text == anchors[-1].text
                    else f"{anchors[0].text} – {anchors[-1].text}"
                )
                scene.fingerprint = fingerprint(read)
                scene.updated_at = utcnow()
                s.add(scene)
            s.add(
                SceneRun(
                    chat_id=chat_id,
                    status="done",
                    stage="recapping",
                    checked_through_id=messages[-1].id,
                    total=len(scenes),
                    done=len(scenes),
                )
            )
            s.commit()
        with Session(services.engine) as s:
            # The first reply's prompt stores the window's new start (the open scene's first message).
            build_chat_prompt(s, get_chat(s, chat_id), services=services, for_reply=True)
            s.exec(delete(SceneSnapshot).where(SceneSnapshot.chat_id == chat_id))  # type: ignore[call-overload]
            s.commit()
            start = window_start(s, chat_id)
            if start is None:
                raise RuntimeError(
                    "the first reply's prompt stored no new start: the chat is not past the ceiling"
                )
            archived = sum(1 for m in messages if m.id < start)
            entries = _continuity(s, chat_id, archived, text)
            s.commit()
        _checkpoint(services)
    finally:
        services.close()
    return {"adv_scenes": len(scenes), "adv_archived_messages": archived, "adv_continuity_entries": entries}


def _continuity(session: Session, chat_id: int, archived: int, text: Text) -> int:
    """The continuity entries over the `archived` oldest messages: one combined entry, then the newest
    CONTINUITY_RECENT batches' own entries; how many."""
    recent_from = max(1, archived - CONTINUITY_RECENT * CONTINUITY_BATCH + 1)
    combined = " ".join(text.sentence(text.rng.randint(10, 18)) for _ in range(60))
    write_entry(
        session,
        chat_id,
        content=combined,
        title=COMBINED_TITLE,
        scope="range",
        start=1,
        end=recent_from - 1,
        origin="model",
    )
    count = 1
    for start in range(recent_from, archived + 1, CONTINUITY_BATCH):
        content = " ".join(text.sentence(text.rng.randint(10, 16)) for _ in range(4))
        write_entry(
            session,
            chat_id,
            content=content,
            title=first_words(content),  # as continuity.py titles the helper's entries
            scope="range",
            start=start,
            end=min(archived, start + CONTINUITY_BATCH - 1),
            origin="model",
        )
        count += 1
    return count


def _checkpoint(services) -> None:
    with services.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def check_adv_quiet(data_dir: Path, chat_id: int, setup: dict[str, int]) -> None:
    """After the timed replies: no scene check, recap or continuity call asked the helper (a test model's
    answer would have left a failure, a new scene or entry, or a reason behind); refuse the figures if
    one did, as they would include the helper's work."""
    with sqlite3.connect(data_dir / "sugo.db") as db:
        failures, reason, continuity_reason = db.execute(
            "SELECT failures, reason, continuity_reason FROM scene_state WHERE chat_id = ?", (chat_id,)
        ).fetchone()
        scenes = db.execute(
            "SELECT count(*) FROM scene WHERE chat_id = ? AND state = 'written'", (chat_id,)
        ).fetchone()[0]
        entries = db.execute("SELECT count(*) FROM summary_entry WHERE chat_id = ?", (chat_id,)).fetchone()[0]
    if (failures, reason, continuity_reason, scenes, entries) != (
        0,
        "",
        "",
        setup["adv_scenes"],
        setup["adv_continuity_entries"],
    ):
        raise RuntimeError(
            "the helper was asked during the timed replies: "
            f"{failures=} {reason=} {continuity_reason=} {scenes=} {entries=} (set up: {setup})"
        )

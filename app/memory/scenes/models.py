"""Advanced Memory Recall's storage: the closed scenes of a chat, the saved parts of a big scene's
recap, and each chat's scene-check state.

A scene row is a closed scene: the chat's messages from `first_message_id` to `last_message_id`. The
open scene, the newest one, is not stored: it is every message after the last closed scene. One chat
never holds two scenes starting at the same message (a unique index): two scene checks at once, or one
repeated after a restart, cannot make a scene twice. A recap is written once per scene: a writer
claims it by moving `state` from "waiting" (or "failed") to "writing" in one UPDATE, so a second
writer finds nothing to claim. A recap the user edited (`manual`) is never rewritten; Fix lists it
for review instead."""

from datetime import datetime

from sqlalchemy import JSON, Column, Index, UniqueConstraint, false
from sqlmodel import Field, SQLModel

from app.platform.timeutil import utcnow

# waiting: its recap is not written yet; writing: a writer holds it; written: the recap is stored;
# failed: the helper's answer could not be used (the reason is kept; tried again at next_attempt_at);
# deleted: the user deleted the recap (Delete summary): the scene keeps its bounds, and neither the writer
# nor the sweep writes it again (they take only waiting and failed scenes).
SCENE_STATES = ("waiting", "writing", "written", "failed", "deleted")


class Scene(SQLModel, table=True):
    __tablename__ = "scene"
    __table_args__ = (
        UniqueConstraint("chat_id", "first_message_id", name="uq_scene_chat_first"),
        Index("ix_scene_state", "state"),
    )

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    first_message_id: int
    last_message_id: int
    state: str = "waiting"
    summary: str = ""
    participants: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    timeframe: str = ""
    manual: bool = False  # the user edited the recap: never rewritten
    # The helper did not say who took part, or left out someone who spoke: the scene goes to every
    # character and is flagged "Check who was there" until Fix or the user settles it.
    check_who: bool = False
    enabled: bool = True  # a disabled scene is kept but never recalled
    fingerprint: str = ""  # of the source messages the recap was written from
    # In a group: the audiences of the scene's private messages when the recap was written
    # (core/access.private_key). A reader who cannot see some of them recalls the scene only while
    # they are the same: otherwise the recap may tell it what it never saw.
    private_key: str = Field(default="", sa_column_kwargs={"server_default": ""})
    # The participants were settled by the writer's check (issue 27: card names matched, unknown ones
    # flagged check_who). False only for scenes stored before that check: in a group, Fix asks again.
    participants_checked: bool = Field(default=True, sa_column_kwargs={"server_default": false()})
    reason: str = ""  # why the last recap attempt failed, a sentence for the panel
    attempts: int = 0
    next_attempt_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class SceneRecapPart(SQLModel, table=True):
    """One saved batch of a scene too big for one recap request: a restart resumes after the last part
    saved, and the parts are combined into the scene's recap."""

    __tablename__ = "scene_recap_part"
    __table_args__ = (UniqueConstraint("scene_id", "part", name="uq_scene_recap_part"),)

    id: int | None = Field(default=None, primary_key=True)
    scene_id: int = Field(foreign_key="scene.id", ondelete="CASCADE")
    part: int
    first_message_id: int
    last_message_id: int
    summary: str
    # Who the part's recap named (None: the helper did not say) and when it happened: the combined
    # recap keeps every participant a part named, and the parts' timeframe when it gives none.
    participants: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    timeframe: str = ""
    fingerprint: str = ""  # of this part's messages: a changed part is written again
    created_at: datetime = Field(default_factory=utcnow)


class SceneState(SQLModel, table=True):
    """Where the chat's scene checks stand."""

    __tablename__ = "scene_state"

    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE", primary_key=True)
    checked_through_id: int | None = None  # the message the last scene check ended at
    # The current window's "new start": the prompt sends messages from here on (None: from the chat's
    # start). Stored when the prompt reached the ceiling; clearing it (undo) sends the whole history again.
    window_start_id: int | None = None
    # Updating continuity: why the last attempt failed (a sentence), and the set of entries it was (not
    # sent again until one of them, the helper or the Combine prompt changes: continuity.continuity_key).
    continuity_reason: str = ""
    continuity_key: str = ""
    paused: bool = False  # Pause processing: no check and no recap runs until Resume
    # The last check's failure (the helper's answer could not be read, or it did not answer): the mark
    # stays, and the next check waits until next_check_at so a broken helper is not asked every reply.
    reason: str = ""
    failures: int = 0
    next_check_at: datetime | None = None
    # The last message of the batch whose answer could not be read even when asked again (None: the last
    # failure was not the answer's, or none): the user may treat that batch as having no scene end.
    unreadable_through_id: int | None = None
    # Decide who sees new messages: the last message decided (None: never yet; visibility.py starts
    # after the newest character reply then).
    visibility_through_id: int | None = None
    updated_at: datetime = Field(default_factory=utcnow)


# running: a thread of this process works it (a restart's leftovers are resumed or closed at start:
# app/platform/jobs.py); stopped: Cancel, Pause processing or a restart; failed: a model call failed (the reason is
# kept; Resume retries); done: every window checked, every recap written.
SCENE_RUN_STATUSES = ("running", "stopped", "failed", "done")
# fixing: a Fix run (fix.py); rescanning: a Re-scan (rescans.py); never Prepare's.
SCENE_RUN_STAGES = ("detecting", "recapping", "fixing", "rescanning")
PREPARE_STAGES = ("detecting", "recapping")


class SceneRun(SQLModel, table=True):
    """A Prepare existing history run, kept so Resume (or the next start, after a restart) continues it;
    also Fix's and Re-scan's runs (their stages), kept so a restart closes them with a sentence.

    Detecting: the history is read in windows, oldest first; `checked_through_id` is the last message of
    the last window whose answer was stored. Recapping: the closed scenes still without a recap are
    written one by one. `done` of `total` counts the stage's steps; `current` is the step in hand."""

    __tablename__ = "scene_run"
    __table_args__ = (Index("ix_scene_run_chat", "chat_id", "id"), Index("ix_scene_run_status", "status"))

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    status: str = "running"
    stage: str = "detecting"
    checked_through_id: int | None = None  # detecting: the last message read by a stored answer
    total: int = 0
    done: int = 0
    current: str = ""  # "Finding scenes: messages 41–50 of 600", "Writing recap 3 of 12"
    stop_requested: bool = False
    reason: str = ""  # why it failed, a sentence for the panel
    # Failed on a window whose answer could not be read even when asked again: that window's last message.
    # "Treat this batch as having no scene end" moves the run's mark there and goes on (prepare.py).
    unreadable_through_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class SceneSnapshot(SQLModel, table=True):
    """The scenes and excerpts one reply recalled, so its swipes recall the same (the manual's "Os swipes
    reutilizam a primeira memória compatível salva daquela resposta"). Keyed by the message the reply
    answers (the newest one before it): a swipe of that reply reads the history up to the same message.
    `scenes`: [{"id": scene id, "excerpt": [message ids]}] in rank order. At most MAX_SNAPSHOTS per chat."""

    __tablename__ = "scene_snapshot"

    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE", primary_key=True)
    anchor_id: int = Field(primary_key=True)
    scenes: list[dict] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class SceneRecollection(SQLModel, table=True):
    """Character recollections (issue 27): one character's short first-person memory of a closed scene,
    written from what it could know (app/memory/scenes/recollections.py). Valid while the scene's recap
    and what the character could read are those it was written from (`summary_key`, `private_key`); a
    generated one is written again when they change, a hand-edited one (`manual`) is kept out of the
    prompts until the user saves it again. `deleted`: Delete keeps it out for good (never rewritten);
    an empty `text` means the helper wrote nothing usable."""

    __tablename__ = "scene_recollection"
    __table_args__ = (UniqueConstraint("scene_id", "character_id", name="uq_scene_recollection"),)

    id: int | None = Field(default=None, primary_key=True)
    scene_id: int = Field(foreign_key="scene.id", ondelete="CASCADE")
    character_id: int = Field(foreign_key="character.id", ondelete="CASCADE")
    text: str = ""
    manual: bool = False
    deleted: bool = False
    summary_key: str = ""  # recollection.summary_key(scene.summary) when written
    private_key: str = ""  # the scene's private audiences when written (core/access.private_key)
    reason: str = ""  # why the last attempt wrote nothing usable, a sentence for Access memories
    updated_at: datetime = Field(default_factory=utcnow)


class MemoryActivity(SQLModel, table=True):
    """Peek Prompt → Advanced Memory activity: the decision model's saved results (a recall's pick and
    centring), newest kept, at most decision.MAX_ACTIVITY per chat. Past activity, never a prediction:
    opening the view runs nothing. `data` holds what the view shows (selections, scores, fallbacks)."""

    __tablename__ = "memory_activity"
    __table_args__ = (Index("ix_memory_activity_chat", "chat_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    kind: str = "recall"
    model: str = ""
    seconds: float = 0.0
    questions: int = 0
    ok: bool = True  # answered in time and read (the time per question is measured from these)
    data: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)

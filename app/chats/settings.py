"""Per-chat settings kept in Chat.settings: what the Chat Settings panel edits. A missing or None
value means "use the connection's value"."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field, field_validator

from app.backgrounds.core.choice import check_chat_choice
from app.chats.core.window import DEFAULT_RECENT_LIMIT, MAX_RECENT_LIMIT, MIN_RECENT_LIMIT
from app.chats.models import SCENE_MODES


class ChatSettings(BaseModel):
    temperature: float | None = Field(default=None, ge=0, le=5)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    context_size: int | None = Field(default=None, ge=256, le=10_000_000)
    stop: list[str] | None = None
    recent_message_limit: int = Field(default=DEFAULT_RECENT_LIMIT, ge=MIN_RECENT_LIMIT, le=MAX_RECENT_LIMIT)
    # Who answers in a group chat, SillyTavern's activation strategies (app/chats/core/turns.py):
    # "natural" (names in the message, then each member's talkativeness), "list" (every member, in
    # order), "pooled" (one who has not spoken since the user's last message), "manual" (the user's
    # message is posted and nobody answers until asked), and Sugo's "smart" (the helper model picks one
    # member; app/generation/smart_order.py). Natural is SillyTavern's default and ours; a chat saved
    # with the old "turns" (one member after the other, one reply per message) reads as pooled, its
    # nearest.
    reply_order: str = Field(default="natural", pattern="^(natural|list|pooled|manual|smart)$")
    # Natural order leaves out the character who spoke last when no message of the user started the
    # turn (an empty send), unless this is on.
    allow_self_responses: bool = False
    # The group's narrator: a member who sees every message, whispers and messages hidden from others
    # included (app/chats/core/audience.py). None, or a character no longer in the chat: no narrator.
    narrator_id: int | None = Field(default=None, ge=1)
    # A Game chat's secrets (the story arc, the twists to come): in its Game Master's prompt alone
    # (app/game/source.py). The Game Master is the narrator, or the first member (`narrator_in`).
    game_secrets: str = Field(default="", max_length=20_000)
    # Which members' cards a group's prompt holds (SillyTavern's "Swap" / "Join" character cards):
    # "join" every member's, "join_unmuted" the unmuted ones' (and the speaker's), "swap" the speaker's
    # alone. A join wraps each field of each card in the prefix and suffix ("<FIELDNAME>" becomes
    # Description or Personality, {{char}} that card's name).
    group_cards: str = Field(default="join", pattern="^(join|join_unmuted|swap)$")
    group_join_prefix: str = Field(default="", max_length=2000)
    group_join_suffix: str = Field(default="", max_length=2000)
    # The group's own scenario: when set, it replaces the members' card scenarios.
    group_scenario: str = Field(default="", max_length=20_000)
    # Merged (Marinara's): one reply speaks for the whole group, each character's part marked
    # <speaker="Name"> and shown as its coloured name; turn-taking is not asked.
    group_merged: bool = False
    # Auto mode (SillyTavern's): while the chat is open and idle, the group takes a turn every this many
    # seconds (an empty send: turn-taking picks who goes on). 0 is off; Stop pauses it for the page.
    auto_mode_seconds: int = Field(default=0, ge=0, le=3600)

    @field_validator("auto_mode_seconds")
    @classmethod
    def _auto_mode_floor(cls, value: int) -> int:
        if 0 < value < 5:
            raise ValueError("Auto mode waits at least 5 seconds between turns (0 turns it off).")
        return value

    # The roleplay view (issue 29). The chat's background: "" its first character's default, "none", a
    # shipped one ("builtin:<name>"), an uploaded one ("image:<background id>"), or a SillyTavern file
    # name not uploaded yet ("st:<file name>", from an imported chat's custom_background).
    background: str = Field(default="", max_length=300)

    @field_validator("background")
    @classmethod
    def _background_form(cls, value: str) -> str:
        return check_chat_choice(value)

    # Expression images: the prompt asks for an [expression: name] tag, the speaker's art follows it.
    expressions: bool = False

    # A short note among the recent messages (SillyTavern's Author's Note). Kept close to the newest
    # message it is acted on more reliably and leaves the cached prefix alone.
    context_note: str = Field(default="", max_length=4000)
    context_note_depth: int = Field(default=4, ge=0, le=100)
    context_note_role: str = Field(default="system", pattern="^(system|user|assistant)$")
    # Tell the model the current date and time (just above the newest turns).
    time_awareness: bool = False
    # Memory Recall: None follows the mode (on for Conversation, off for Roleplay). Turning it off
    # keeps the stored memories; they are still built and embedded.
    memory_recall: bool | None = None
    # Memory Recall makes no new memories from the messages (those it has stay, and are still
    # recalled): what "Clear all" removed then stays removed.
    memory_chunking_paused: bool = False
    # Lorebook Token Budget: all the chat's lorebooks together, on top of each book's own budget.
    lore_token_budget: int = Field(default=8192, ge=0, le=1_000_000)
    # A built-in embedding model picked for this chat (e.g. the multilingual one for a chat in
    # another language); None follows the connection and Connections → Defaults.
    builtin_embedding: str | None = Field(default=None, pattern="^(all-MiniLM-L6-v2|multilingual-e5-small)$")
    # Memory Recall's ranking: how much meaning (vector similarity) counts against shared words,
    # and the share of each neighbouring memory's score a memory gets. None: the defaults measured
    # on the long-chat dev set (memory/recall/lexical.py).
    recall_dense_weight: float | None = Field(default=None, ge=0, le=1)
    recall_neighbour_share: float | None = Field(default=None, ge=0, le=1)
    # Chat Summary (Roleplay): with hide on, messages older than the recent tail that an active
    # entry covers leave the prompt; uncovered ones are always sent. The automatic summaries' values
    # are kept here for when the model writes entries.
    summary_hide_messages: bool = False
    # Collapse hidden messages: the chat view folds each run of summarised messages into one line;
    # off, they stay in the transcript, dimmed and marked "summarised · not sent".
    summary_collapse_hidden: bool = True
    summary_recent_tail: int = Field(default=10, ge=0, le=10_000)
    summary_auto: bool = False
    summary_every: int = Field(default=5, ge=1, le=200)
    summary_review: bool = False
    summary_max_tokens: int = Field(default=4096, ge=1, le=32768)
    # The connection that writes summaries (None, or one since deleted: the chat's own). The Summary
    # Prompt is not here: one choice serves every Roleplay chat (memory/summaries/templates.py).
    summary_connection_id: int | None = Field(default=None, ge=1)
    # Conversation chats: a message before this hour (12 AM to 11 AM) belongs to the day before.
    summary_rollover_hour: int = Field(default=4, ge=0, le=11)
    # Advanced Memory Recall (Roleplay; app/memory/scenes): scenes found by a helper model every
    # `adv_check_interval` new messages and recapped when they close; Chat Settings → Advanced Memory
    # Recall. The budget's default is 10% of the ceiling's and stays when the ceiling changes. The
    # helper: this connection, else the chat's own.
    advanced_memory: bool = False
    adv_max_context: int = Field(default=65_000, ge=1024, le=10_000_000)
    adv_budget: int = Field(default=6_500, ge=64, le=131_072)
    adv_helper_connection_id: int | None = Field(default=None, ge=1)
    adv_max_scenes: int = Field(default=3, ge=0, le=50)
    adv_excerpt_min: int = Field(default=3, ge=0, le=50)
    adv_excerpt_max: int = Field(default=5, ge=0, le=50)
    adv_check_interval: int = Field(default=5, ge=1, le=100)
    # Turn-by-turn Roleplay groups only: the helper hides each new message from the characters who are
    # not in the scene (app/memory/scenes/visibility.py).
    adv_decide_visibility: bool = False
    # Character recollections: each character present in a closed scene gets its own short memory of
    # it, shown under the recalled scene (app/memory/scenes/recollections.py).
    adv_recollections: bool = False
    # The decision model: recall in two steps (pick the scenes, centre their excerpts) by a model of its
    # own connection (app/memory/scenes/decision.py); without one, normal recall.
    adv_decision: bool = False
    adv_decision_connection_id: int | None = Field(default=None, ge=1)

    # The memory of this chat (app/memory/chat_notes): the user's notes go above the conversation; the
    # rule-made summary is for the user and other chats, and stays out of the chat's own prompt unless
    # asked for.
    chat_notes_in_prompt: bool = True
    chat_memory_in_prompt: bool = False

    # The preset arranging this chat's prompt (app/presets): None is Sugo's default layout, and so is a
    # preset since deleted. The chat's picks of its choices, by variable: the option ids picked (no pick:
    # the first option).
    preset_id: int | None = Field(default=None, ge=1)
    preset_picks: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("preset_picks")
    @classmethod
    def _picks_within_limits(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        if len(value) > 100 or any(len(ids) > 100 for ids in value.values()):
            raise ValueError("A chat picks at most 100 options of 100 choices.")
        if any(len(key) > 64 or any(len(i) > 200 for i in ids) for key, ids in value.items()):
            raise ValueError("A choice's name or option id is too long.")
        return value

    @field_validator("reply_order", mode="before")
    @classmethod
    def _old_reply_order(cls, value: object) -> object:
        return "pooled" if value == "turns" else value

    def recall_enabled(self, mode: str) -> bool:
        """Standard Memory Recall sends memories; never while Advanced Memory takes over recall."""
        if self.advanced_memory_on(mode):
            return False
        return self.memory_recall if self.memory_recall is not None else mode == "conversation"

    def narrator_in(self, mode: str, member_ids: Sequence[int | None]) -> int | None:
        """The member who sees every message: the chosen narrator while it is a member; in a Game
        chat the Game Master, who is that narrator, else the first member (a Game chat always has
        one: it runs the game and reads all its memories)."""
        if self.narrator_id is not None and self.narrator_id in member_ids:
            return self.narrator_id
        return member_ids[0] if mode == "game" and member_ids else None

    def advanced_memory_on(self, mode: str) -> bool:
        """Advanced Memory Recall runs this chat (Roleplay and Game chats)."""
        return self.advanced_memory and mode in SCENE_MODES


def read_settings(raw: dict | None) -> ChatSettings:
    try:
        return ChatSettings.model_validate(raw or {})
    except ValueError:
        # A value stored by an older version that no longer validates falls back to defaults
        # field by field rather than breaking the chat.
        good = {}
        for key, value in (raw or {}).items():
            try:
                ChatSettings.model_validate({key: value})
                good[key] = value
            except ValueError:
                continue
        return ChatSettings.model_validate(good)

"""Per-chat settings kept in Chat.settings: what the Chat Settings panel edits. A missing or None
value means "use the connection's value"."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.chats.core.window import DEFAULT_RECENT_LIMIT, MAX_RECENT_LIMIT, MIN_RECENT_LIMIT


class ChatSettings(BaseModel):
    temperature: float | None = Field(default=None, ge=0, le=5)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    context_size: int | None = Field(default=None, ge=256, le=10_000_000)
    stop: list[str] | None = None
    recent_message_limit: int = Field(default=DEFAULT_RECENT_LIMIT, ge=MIN_RECENT_LIMIT, le=MAX_RECENT_LIMIT)
    # "turns": group members answer in turn; "manual": the user picks who speaks each time.
    reply_order: str = Field(default="turns", pattern="^(turns|manual)$")
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

    # The memory of this chat (app/memory/chat_notes): the user's notes go above the conversation; the
    # rule-made summary is for the user and other chats, and stays out of the chat's own prompt unless
    # asked for.
    chat_notes_in_prompt: bool = True
    chat_memory_in_prompt: bool = False

    def recall_enabled(self, mode: str) -> bool:
        """Standard Memory Recall sends memories; never while Advanced Memory takes over recall."""
        if self.advanced_memory_on(mode):
            return False
        return self.memory_recall if self.memory_recall is not None else mode == "conversation"

    def advanced_memory_on(self, mode: str) -> bool:
        """Advanced Memory Recall runs this chat (Roleplay chats; Game chats later)."""
        return self.advanced_memory and mode == "roleplay"


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

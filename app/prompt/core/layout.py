"""Where every kind of prompt block goes: one ordered table.

Stable groups come first so the prompt prefix stays the same from turn to turn and providers'
prompt caches hit; what changes every turn sits near the newest messages. Kinds that no feature
produces yet are slots that later features fill (memories, lorebooks, tools); the order and the
group are decided here, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# "tools" holds no block: it is the tool declarations sent beside the messages (Prompt.tool_tokens).
GROUPS: tuple[str, ...] = (
    "tools",
    "system",
    "above_conversation",
    "examples",
    "conversation",
    "dynamic",
    "at_depth",
    "after_history",
)
GROUP_LABELS = {
    "tools": "Tool declarations",
    "system": "System",
    "above_conversation": "Above the conversation",
    "examples": "Example dialogue",
    "conversation": "Conversation",
    "dynamic": "Just above the newest turns",
    "at_depth": "Among the recent messages",
    "after_history": "After the history",
}
# Dynamic blocks go just above this many of the newest speaker turns.
DYNAMIC_TURNS = 4


@dataclass(frozen=True)
class Slot:
    kind: str
    group: str
    label: str


LAYOUT: tuple[Slot, ...] = (
    # system part
    Slot("main_prompt", "system", "System, chat and character prompts"),
    Slot("lore_before_char", "system", "Constant lorebook entries placed before the character"),
    Slot("character", "system", "Character attributes"),
    Slot("scenario", "system", "Scenario"),
    Slot("game_secrets", "system", "Game Master's secrets"),
    Slot("tool_guidance", "system", "Tool guidance"),
    Slot("constraints", "system", "Constraints"),
    Slot("long_term_memory", "system", "Long-term memories"),
    Slot("constant_lore", "system", "Constant lorebook entries"),
    # above the conversation
    Slot("persona", "above_conversation", "Participant profiles"),
    Slot("participant_info", "above_conversation", "Participant names and details"),
    Slot("personal_memories", "above_conversation", "Personal memories"),
    Slot("reminders", "above_conversation", "Reminders and tasks"),
    Slot("older_short_term_memory", "above_conversation", "Older short-term memory"),
    # the memory of this chat: its rule-made summary (off by default), the user's notes
    Slot("chat_memory", "above_conversation", "This chat's memory"),
    Slot("chat_notes", "above_conversation", "Notes on this chat"),
    # a Game chat's earlier sessions, for its Game Master (app/game/source.py): the same all session long
    Slot("earlier_sessions", "above_conversation", "Earlier sessions (Game)"),
    # Advanced Memory's parts, once before the history (the manual's preset markers)
    Slot("chat_summary", "above_conversation", "Chat Summary (Advanced Memory constants)"),
    Slot("current_scene_summary", "above_conversation", "Current scene: source excerpts"),
    Slot("recalled_scenes", "above_conversation", "Recalled Scenes"),
    # examples and conversation
    Slot("lore_before_examples", "examples", "Constant lorebook entries placed before the examples"),
    Slot("examples", "examples", "Example dialogue"),
    Slot("lore_after_examples", "examples", "Constant lorebook entries placed after the examples"),
    Slot("message", "conversation", "Recent messages"),
    # just above the four most recent speaker turns
    Slot("recent_short_term_memory", "dynamic", "Recent short-term memory"),
    Slot("keyword_lore", "dynamic", "Keyword- or chance-activated lorebook entries"),
    Slot("recalled_memories", "dynamic", "Recalled memories"),
    Slot("retrieved_documents", "dynamic", "Retrieved documents"),
    Slot("participants_present", "dynamic", "Participants present"),
    Slot("current_time", "dynamic", "Current time"),
    # among the recent messages
    Slot("context_note", "at_depth", "Context note"),
    Slot("lore_at_depth", "at_depth", "Lorebook entries at a depth"),
    Slot("tool_reminders", "at_depth", "Tool reminders"),
    Slot("time_awareness", "at_depth", "Time awareness"),
    Slot("group_nudge", "at_depth", "Group nudge"),
    Slot("expression_request", "at_depth", "Expression tag request"),
    Slot("game_master_turn", "at_depth", "Game Master's turn instructions"),
    Slot("post_history", "at_depth", "Post-history instructions"),
    # last of all, only when asked for: Continue's nudge, or Impersonate's instruction
    Slot("continue_nudge", "at_depth", "Continue nudge"),
    Slot("impersonation", "at_depth", "Impersonation prompt"),
    # the start of the reply, which the model goes on from (a preset's prefill, the composer's "start with")
    Slot("prefill", "after_history", "Start of the reply (prefill)"),
)
GROUP_OF = {slot.kind: slot.group for slot in LAYOUT}
# The groups merged into the one leading system message that forms the cacheable prefix.
STABLE_GROUPS = ("system", "above_conversation", "examples")
# A Game chat keeps its prefix the same from turn to turn for a provider's prompt cache (the manual's
# "No Game Mode"): Advanced Memory's recaps and recalled scenes, and every block of the dynamic group,
# go after the history, just before the Game Master's turn instructions, in the group "after_history".
GAME_AFTER_HISTORY = ("chat_summary", "current_scene_summary", "recalled_scenes")
ORDER_OF = {slot.kind: i for i, slot in enumerate(LAYOUT)}


def dynamic_insert_index(speakers: Sequence[str], turns: int = DYNAMIC_TURNS) -> int:
    """Index in the history (a list of speaker names, oldest first) where the dynamic group goes:
    before the `turns` newest speaker turns, a turn being consecutive messages of one speaker. A
    history with fewer turns puts it first, right after the example dialogue."""
    seen = 0
    index = len(speakers)
    previous = None
    for i in range(len(speakers) - 1, -1, -1):
        if speakers[i] != previous:
            seen += 1
            previous = speakers[i]
            if seen > turns:
                return index
        index = i
    return 0


def depth_index(history_length: int, depth: int) -> int:
    """Where a note at `depth` goes: 0 after the newest message, d before the d-th newest."""
    return max(0, history_length - max(0, depth))

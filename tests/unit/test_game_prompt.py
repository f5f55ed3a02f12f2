"""A Game chat's prompt (issue 27, the manual's "No Game Mode"): the Game Master's own main prompt and
turn instructions, and everything that changes from turn to turn after the history, so the part
before it is byte-identical between two turns of the same scene."""

from app.chats.core.window import HistoryMessage
from app.prompt.core.builder import (
    GAME_MASTER_TURN,
    GROUP_NUDGE,
    CardSnapshot,
    DepthNote,
    DynamicBlock,
    PromptContext,
    build,
)

GM = CardSnapshot(
    1, "Keeper", description="{{char}} runs the Sunken Keep.", post_history_instructions="Be fair."
)
BRAM = CardSnapshot(2, "Bram", description="A sellsword.")


def msg(i: int, role: str = "user") -> HistoryMessage:
    name = "Rowan" if role == "user" else ("Keeper" if i % 4 else "Bram")
    return HistoryMessage(i, role, name, f"Turn {i}: the party goes deeper.", False)


def turn(count: int, recap: str, *, speaker: CardSnapshot = GM, **kw) -> PromptContext:
    base = dict(
        mode="game",
        characters=(GM, BRAM),
        speaker=speaker,
        user_name="Rowan",
        persona_description="A cartographer.",
        messages=tuple(msg(i, "user" if i % 2 else "assistant") for i in range(1, count + 1)),
        context_size=16384,
        reply_reserve=512,
        fixed=(
            DynamicBlock("recalled_scenes", "Recalled Scenes", recap),
            DynamicBlock("game_secrets", "Game Master's secrets", "The keeper is the lich."),
        ),
        dynamic=(DynamicBlock("recalled_memories", "Recalled memories", f"Memory for turn {count}"),),
        depth_notes=(DepthNote("Keep it tense.", 4), DepthNote("Reminder: the torch burns out.", 0)),
        current_time=f"Day {count}",
        game_master=speaker is GM,
    )
    base.update(kw)
    return PromptContext(**base)


def _before_the_recaps(prompt) -> list[dict]:
    """The provider messages above the first block placed after the history."""
    first_after = next(i for i, b in enumerate(prompt.blocks) if b.group == "after_history")
    stable = sum(1 for b in prompt.blocks if b.group in ("system", "above_conversation", "examples"))
    return list(prompt.messages[: 1 + first_after - stable])


def test_the_prefix_above_the_recaps_is_byte_identical_between_two_turns_of_a_scene():
    first = build(turn(6, "Scene 1: they crossed the moat."))
    second = build(turn(8, "Scene 1: they crossed the moat. Scene 2: the well."))
    head = _before_the_recaps(first)
    assert [m["role"] for m in head] == ["system"] + [
        "user",
        "assistant",
    ] * 3  # system part, then the history
    assert list(second.messages[: len(head)]) == head
    # Recaps, recalled memories, notes and the time all changed, and all sit after the history.
    kinds = [b.kind for b in second.blocks if b.group == "after_history"]
    assert kinds == ["context_note", "context_note", "recalled_scenes", "recalled_memories", "current_time"]
    assert [b.kind for b in second.blocks[-2:]] == ["game_master_turn", "post_history"]
    assert second.blocks[-2].text == GAME_MASTER_TURN.replace("{{user}}", "Rowan")


def test_in_a_roleplay_chat_the_same_blocks_sit_inside_the_history():
    """What the Game layout changes: a Roleplay chat keeps recaps above the conversation and notes at
    their depth, so two turns' prompts differ before the newest messages."""
    first = build(turn(6, "Scene 1.", mode="roleplay", game_master=False))
    second = build(turn(8, "Scene 1. Scene 2.", mode="roleplay", game_master=False))
    assert not any(b.group == "after_history" for b in first.blocks)
    assert first.messages[0] != second.messages[0]  # the recap is in the system part
    nudge = next(b for b in first.blocks if b.kind == "group_nudge")
    assert nudge.text == GROUP_NUDGE.replace("{{char}}", "Keeper")
    assert [b.name for b in first.blocks if b.group == "at_depth"][0].startswith("context_note")


def test_the_game_master_has_its_own_main_prompt_and_a_party_member_the_roleplay_one():
    gm = build(turn(4, "Recap."))
    assert gm.blocks[0].text.startswith("You are Keeper, the Game Master of a text adventure Rowan plays.")
    assert not any(b.kind == "group_nudge" for b in gm.blocks)
    bram = build(turn(4, "Recap.", speaker=BRAM))
    assert bram.blocks[0].text.startswith("Write Bram's next reply")
    assert [b.kind for b in bram.blocks][-1] == "group_nudge" and not any(
        b.kind == "game_master_turn" for b in bram.blocks
    )
    # A party member's prompt is a Game chat's too: what changes goes after the history.
    assert any(b.group == "after_history" for b in bram.blocks)


def test_impersonating_in_a_game_sends_no_turn_instructions():
    p = build(turn(4, "Recap.", purpose="impersonate"))
    assert not any(b.kind in ("game_master_turn", "post_history") for b in p.blocks)
    assert p.blocks[-1].kind == "impersonation"

"""The pure prompt builder: literal inputs, literal expectations."""

from app.chats.core.window import HistoryMessage
from app.prompt.core.builder import CardSnapshot, GroupCards, PromptContext, build
from app.prompt.core.macros import expand_macros
from app.prompt.core.tokens import count_tokens

ARIA = CardSnapshot(
    1,
    "Aria",
    description="{{char}} is a bard who teases {{user}}.",
    personality="warm",
    scenario="A tavern.",
    mes_example="<START>\n{{user}}: hi\n{{char}}: hey",
)


def ctx(messages, **kw) -> PromptContext:
    base = dict(
        mode="roleplay",
        characters=(ARIA,),
        speaker=ARIA,
        user_name="Rowan",
        persona_description="",
        messages=tuple(messages),
        context_size=8192,
        reply_reserve=512,
        recent_limit=80,
    )
    base.update(kw)
    return PromptContext(**base)


def msg(i, role="user", text=None, hidden=False):
    return HistoryMessage(i, role, "Rowan" if role == "user" else "Aria", text or f"message {i}", hidden)


def test_blocks_in_group_order_with_macros_expanded():
    p = build(ctx([msg(1), msg(2, "assistant")], persona_description="A knight."))
    assert [b.name for b in p.blocks] == [
        "main_prompt",
        "character_1",
        "scenario",
        "persona",
        "examples",
        "message_1",
        "message_2",
    ]
    assert [b.group for b in p.blocks][:5] == ["system", "system", "system", "above_conversation", "examples"]
    assert p.blocks[1].text == "Aria is a bard who teases Rowan.\nAria's personality: warm"
    assert "[Example Chat]\nRowan: hi\nAria: hey" == p.blocks[4].text


def test_provider_messages_one_system_prefix_marked_for_cache_then_history():
    p = build(ctx([msg(1), msg(2, "assistant")]))
    assert p.messages[0]["role"] == "system" and p.messages[0]["cache"] is True
    assert p.messages[1:] == (
        {"role": "user", "content": "message 1"},
        {"role": "assistant", "content": "message 2"},
    )


def test_empty_optional_blocks_take_no_tokens():
    bare = CardSnapshot(2, "Bare")
    p = build(ctx([msg(1)], characters=(bare,), speaker=bare))
    assert [b.name for b in p.blocks] == ["main_prompt", "message_1"]
    assert all(b.tokens > 0 for b in p.blocks)


def test_hidden_messages_are_skipped_and_counted():
    p = build(ctx([msg(1), msg(2, hidden=True), msg(3)]))
    assert p.included_message_ids == [1, 3]
    assert p.hidden_skipped == 1


def test_messages_a_source_took_out_are_not_sent_and_the_first_is_not_pinned_then():
    p = build(ctx([msg(1), msg(2), msg(3), msg(4)], left_out=frozenset({1, 3})))
    assert p.included_message_ids == [2, 4]
    assert [m["content"] for m in p.messages[1:]] == ["message 2", "message 4"]


def test_history_is_cut_to_fit_context_in_whole_batches_first_message_kept():
    long = [msg(i, text="word " * 100) for i in range(1, 41)]  # ~129 tokens each with overhead
    p = build(ctx(long, context_size=2048, reply_reserve=512, recent_limit=20))
    ids = p.included_message_ids
    # limit 20 over 40 messages: the window is the first message plus the newest 15 (batches of 6);
    # ~2,060 tokens do not fit 1,536 minus the fixed blocks, so one more batch of 6 goes.
    assert ids[0] == 1 and ids[1:] == list(range(41 - len(ids) + 1, 41))
    assert p.history_available == 16 and len(ids) == 10
    assert p.total_tokens <= 2048 - 512
    assert any("did not fit" in n for n in p.warnings)


def test_recent_message_limit_caps_history_with_batch_drops():
    p = build(ctx([msg(i) for i in range(1, 101)], recent_limit=20))
    # 100 messages, limit 20, batch 6: 84 dropped after the pinned first message, 16 remain.
    assert p.included_message_ids == [1, *range(86, 101)]
    assert p.window_dropped == 84


def test_newest_message_always_included_even_over_budget():
    p = build(ctx([msg(1, text="x " * 5000)], context_size=600, reply_reserve=500))
    assert p.included_message_ids == [1]


def test_card_system_prompt_replaces_main_with_original():
    card = CardSnapshot(
        3, "Vex", system_prompt="{{original}} Be terse.", post_history_instructions="Stay dark."
    )
    p = build(ctx([msg(1)], characters=(card,), speaker=card))
    assert p.blocks[0].text.startswith("Write Vex's next reply") and p.blocks[0].text.endswith("Be terse.")
    assert p.blocks[-1].name == "post_history" and p.messages[-1] == {
        "role": "system",
        "content": "Stay dark.",
    }


def test_group_chat_names_speakers_and_nudges():
    bram = CardSnapshot(4, "Bram", description="A smith.")
    p = build(
        ctx([msg(1), HistoryMessage(2, "assistant", "Aria", "hi")], characters=(ARIA, bram), speaker=bram)
    )
    assert p.messages[1]["content"] == "Rowan: message 1" and p.messages[2]["content"] == "Aria: hi"
    assert p.messages[-1]["content"] == "[Write the next reply only as Bram.]"
    assert "## Bram\nA smith." in p.messages[0]["content"]


def test_a_group_expands_each_members_card_with_that_members_name():
    # SillyTavern joins the members' cards with {{char}} = the member whose field it is, not the speaker.
    bram = CardSnapshot(
        4,
        "Bram",
        description="{{char}} forges for {{user}}.",
        personality="{{char}} is gruff",
        scenario="{{char}}'s smithy.",
        mes_example="<START>\n{{char}}: Hm.",
    )
    p = build(ctx([msg(1)], characters=(ARIA, bram), speaker=ARIA))
    system = p.messages[0]["content"]
    assert "## Bram\nBram forges for Rowan.\nBram's personality: Bram is gruff" in system
    assert "## Aria\nAria is a bard who teases Rowan." in system
    assert "Scenario: A tavern.\nScenario: Bram's smithy." in system
    assert "[Example Chat]\nRowan: hi\nAria: hey\n\n[Example Chat]\nBram: Hm." in system
    assert p.messages[-1]["content"] == "[Write the next reply only as Aria.]"


def test_conversation_mode_uses_its_own_main_prompt():
    p = build(ctx([msg(1)], mode="conversation"))
    assert "private conversation" in p.blocks[0].text


def test_macros_case_insensitive_and_v1_spellings():
    assert expand_macros("{{Char}} <BOT> {{ user }} <USER>", char="A", user="B") == "A A B B"
    assert expand_macros("no macros", char="A", user="B") == "no macros"


def test_token_estimator():
    assert count_tokens("") == 0
    assert count_tokens("abcd" * 10) == 10
    assert count_tokens("日本語のテキスト") == 8
    assert 5 <= count_tokens("Привет, как дела?") <= 9


def _conv(n):
    # alternate user / assistant, one message per speaker turn
    return [msg(i, "user" if i % 2 else "assistant") for i in range(1, n + 1)]


def test_every_block_lands_in_its_group_in_layout_order():
    from app.prompt.core.builder import DepthNote, DynamicBlock
    from app.prompt.core.layout import GROUP_OF, GROUPS

    bram = CardSnapshot(5, "Bram", description="A smith.", post_history_instructions="Stay in scene.")
    p = build(
        ctx(
            _conv(10),
            characters=(ARIA, bram),
            speaker=bram,
            persona_description="A knight.",
            current_time="Monday 14:05",
            depth_notes=(DepthNote("Mind the storm.", depth=2),),
            dynamic=(DynamicBlock("keyword_lore", "Lore: lighthouse", "The lighthouse is old."),),
        )
    )
    for block in p.blocks:
        assert block.group == GROUP_OF[block.kind], block
    # Outside the conversation the groups appear in layout order.
    stable = [
        GROUPS.index(b.group) for b in p.blocks if b.group in ("system", "above_conversation", "examples")
    ]
    assert stable == sorted(stable)
    kinds = [b.kind for b in p.blocks]
    assert kinds[-2:] == ["group_nudge", "post_history"]


def test_dynamic_group_sits_above_the_four_newest_turns_and_notes_at_their_depth():
    from app.prompt.core.builder import DepthNote

    p = build(
        ctx(_conv(10), current_time="Monday 14:05", depth_notes=(DepthNote("Mind the storm.", depth=2),))
    )
    conv = [b for b in p.blocks if b.group not in ("system", "above_conversation", "examples")]
    names = [b.name for b in conv]
    assert names.index("current_time") == names.index("message_7") - 1  # above the 4 newest turns (7..10)
    assert names[names.index("context_note_0") + 1] == "message_9"  # depth 2: before the 2nd newest
    assert names[-1] == "message_10"
    # The cached system prefix holds no per-turn block.
    assert "Monday" not in p.messages[0]["content"]


def test_a_note_at_depth_zero_follows_the_newest_message():
    from app.prompt.core.builder import DepthNote

    p = build(ctx(_conv(3), depth_notes=(DepthNote("After everything.", depth=0),)))
    assert p.messages[-1] == {"role": "system", "content": "After everything."}


def test_empty_dynamic_blocks_and_notes_add_zero_tokens():
    from app.prompt.core.builder import DepthNote, DynamicBlock

    base = build(ctx(_conv(6)))
    with_empty = build(
        ctx(
            _conv(6),
            depth_notes=(DepthNote("   ", depth=2),),
            dynamic=(DynamicBlock("recalled_memories", "Recalled", ""),),
        )
    )
    assert with_empty.total_tokens == base.total_tokens
    assert with_empty.messages == base.messages


def test_group_totals_add_up_to_the_prompt_total_and_breakdown_is_sorted():
    from app.prompt.core.builder import DepthNote
    from app.prompt.core.inspect import group_totals, size_breakdown

    p = build(
        ctx(
            _conv(8),
            persona_description="A knight.",
            current_time="now",
            depth_notes=(DepthNote("note", depth=1),),
        )
    )
    assert sum(group_totals(p).values()) == p.total_tokens
    sizes = size_breakdown(p)
    assert [r.tokens for r in sizes] == sorted((r.tokens for r in sizes), reverse=True)
    assert any(r.label == "Recent messages (8)" for r in sizes)
    # One count per block: the breakdown's row for a block is the block's own count (Peek Prompt's),
    # and the role markers are their own row, so the rows add up to the total.
    by_label = {r.label: r.tokens for r in sizes}
    for block in p.blocks:
        if block.message_id is None and sum(b.label == block.label for b in p.blocks) == 1:
            assert by_label[block.label] == block.tokens
    assert sum(r.tokens for r in sizes) == p.total_tokens


def test_continue_ends_on_the_reply_then_the_nudge_and_moves_depth_zero_notes_above_the_reply():
    from app.prompt.core.builder import CONTINUE_NUDGE, DepthNote

    p = build(
        ctx(
            [msg(1), msg(2, "assistant", "He waits")],
            purpose="continue",
            depth_notes=(DepthNote("Mind the storm.", depth=0),),
        )
    )
    assert p.messages[-3:] == (
        {"role": "system", "content": "Mind the storm."},
        {"role": "assistant", "content": "He waits"},
        {"role": "system", "content": CONTINUE_NUDGE},
    )
    assert p.blocks[-1].kind == "continue_nudge" and p.blocks[-3].depth == 1


def test_impersonation_prompt_last_without_the_speakers_own_instructions():
    bram = CardSnapshot(5, "Bram", description="A smith.", post_history_instructions="Stay in scene.")
    p = build(
        ctx([msg(1), msg(2, "assistant")], characters=(ARIA, bram), speaker=bram, purpose="impersonate")
    )
    kinds = [b.kind for b in p.blocks]
    assert kinds[-1] == "impersonation" and "group_nudge" not in kinds and "post_history" not in kinds
    assert p.messages[-1]["content"].startswith("[Write your next reply from the point of view of Rowan,")
    assert "Don't write as Bram or system. Don't describe actions of Bram.]" in p.messages[-1]["content"]


def test_each_message_is_counted_once_and_the_parts_add_up():
    from app.prompt.core.inspect import message_counts

    messages = [msg(i, text="word " * 100) for i in range(1, 61)]
    messages[2] = msg(3, hidden=True)  # in the part the window drops
    messages[50] = msg(51, hidden=True)
    messages[55] = msg(56, text="  ")  # empty
    p = build(
        ctx(messages, context_size=2048, reply_reserve=512, recent_limit=20, left_out=frozenset({56, 57, 58}))
    )
    assert p.history_total == 60
    counts = dict(message_counts(p))
    assert sum(counts.values()) == 60
    assert (
        counts["hidden"] == 2 and counts["left out for summaries"] == 3 and "empty" not in counts
    )  # 56: left out first
    assert counts["dropped by the window"] == p.window_dropped > 0 and counts["did not fit the context"] > 0
    assert counts["sent"] == len(p.included_message_ids)
    assert message_counts(build(ctx([msg(1)]))) == [("sent", 1)]  # nothing else to say


def test_a_merged_groups_main_prompt_asks_for_the_whole_groups_reply():
    bram = CardSnapshot(2, "Bram", description="A sellsword.")
    cleo = CardSnapshot(3, "Cleo", description="A spy.")
    p = build(
        ctx(
            [msg(1)],
            characters=(ARIA, bram, cleo),
            group=GroupCards(merged_names=("Aria", "Bram", "Cleo")),
        )
    )
    assert p.blocks[0].text.startswith("Write the next reply of Aria, Bram and Cleo in a fictional chat")
    assert "Rowan" in p.blocks[0].text and "Write Aria's next reply" not in p.blocks[0].text

"""Prompt builder v1: a plain snapshot in, blocks and provider messages out. No I/O here."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from app.chats.core.window import HistoryMessage, WindowPlan, batch_size, fit_window, plan_window
from app.presets.core.model import Preset, Section, fill_choices
from app.prompt.core.arrangement import (
    CHANGING_GROUPS,
    DEFAULT_PRESET,
    Arrangement,
    arrange,
    default_sort_key,
    wrap_text,
)
from app.prompt.core.blocks import Prompt, PromptBlock
from app.prompt.core.layout import (
    GAME_AFTER_HISTORY,
    GROUP_OF,
    STABLE_GROUPS,
    depth_index,
    dynamic_insert_index,
)
from app.prompt.core.macros import MacroContext, expand_macros
from app.prompt.core.text_prompt import StoryCards, TextTemplates, render_raw
from app.prompt.core.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens

# SillyTavern's default main prompt for roleplay; a card's system_prompt replaces it ({{original}}
# inside the card's prompt puts this back in).
ROLEPLAY_MAIN_PROMPT = (
    "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}. "
    "Stay in character, write in third person past tense for narration, and never speak or act for {{user}}."
)
CONVERSATION_MAIN_PROMPT = (
    "You are {{char}}, chatting with {{user}} in a private conversation. Reply as {{char}} would, "
    "in their own voice, naturally and briefly unless asked for more."
)
# A Game chat's Game Master (a member's card: its own system prompt may wrap this with {{original}}).
GAME_MASTER_PROMPT = (
    "You are {{char}}, the Game Master of a text adventure {{user}} plays. Describe the world and what "
    "happens in it, play every character {{user}} meets, the party's included, and keep the game's rules "
    "and secrets. Never speak or act for {{user}}."
)
GAME_MASTER_TURN = (
    "[Write the Game Master's next turn: what happens in answer to {{user}}, ending where {{user}} can act.]"
)
GROUP_NUDGE = "[Write the next reply only as {{char}}.]"
# A merged group's main prompt: the reply is the whole group's, not its first member's.
MERGED_MAIN_PROMPT = (
    "Write the next reply of {names} in a fictional chat between them and {{{{user}}}}. Stay in "
    "character, write in third person past tense for narration, and never speak or act for {{{{user}}}}."
)
# A merged group's reply speaks for every character who speaks or acts (Marinara's merged mode).
MERGED_NUDGE = (
    "[Write the next reply for the group: each character who speaks or acts gets a paragraph that "
    'starts with <speaker="Name">, Name being one of {names}. Never write for {{{{user}}}}.]'
)
# SillyTavern's defaults for Continue and Impersonate, sent last as system messages.
CONTINUE_NUDGE = "[Continue your last message without repeating its original content.]"
IMPERSONATION_PROMPT = (
    "[Write your next reply from the point of view of {{user}}, using the chat history so far as a guideline "
    "for the writing style of {{user}}. Don't write as {{char}} or system. Don't describe actions of {{char}}.]"
)
# "reply": the speaker's next message; "continue": extend the newest message, which is the
# speaker's; "impersonate": the user's next message, written by the model.
Purpose = Literal["reply", "continue", "impersonate"]


@dataclass(frozen=True)
class CardSnapshot:
    id: int
    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    mes_example: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""


@dataclass(frozen=True)
class DepthNote:
    """A short note among the recent messages: 0 after the newest message, d before the d-th newest."""

    text: str
    depth: int = 4
    role: str = "system"
    kind: str = "context_note"
    label: str = "Context note"


@dataclass(frozen=True)
class DynamicBlock:
    kind: str
    label: str
    text: str


@dataclass(frozen=True)
class GroupCards:
    """A group chat's prompt: whose cards are in it is the caller's choice (`characters`); these say
    how they are written. `scenario`, when set, replaces the cards' scenarios."""

    join_prefix: str = ""
    join_suffix: str = ""
    scenario: str = ""
    # One reply for the whole group, each part marked with its speaker (MERGED_NUDGE).
    merged_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class PromptContext:
    mode: str
    characters: tuple[CardSnapshot, ...]
    speaker: CardSnapshot
    user_name: str
    persona_description: str
    messages: tuple[HistoryMessage, ...]  # chronological, hidden ones included (the builder skips them)
    context_size: int
    reply_reserve: int
    recent_limit: int = 80
    # Hidden messages the caller already left out of `messages` (they are only counted).
    hidden_elsewhere: int = 0
    # When the caller already cut `messages` to the window (the pinned first message, then the
    # newest ones), its plan; otherwise the builder plans the window over `messages` itself.
    window: WindowPlan | None = None
    keep_first: bool = True
    depth_notes: tuple[DepthNote, ...] = ()
    # Blocks of the stable part beyond the card's (constant lorebook entries); their kind places them.
    fixed: tuple[DynamicBlock, ...] = ()
    dynamic: tuple[DynamicBlock, ...] = ()
    current_time: str | None = None  # e.g. "Monday, 30 November 2026, 14:05"; the caller reads the clock
    # Variables and seeds for {{setvar}}, {{random}}, {{pick}}... in prompts and card fields. Chat
    # messages and recalled memories only get {{char}} and {{user}}: their macros would otherwise
    # run again on every reply ({{addvar}} in an old message would count up each turn).
    macros: MacroContext | None = None
    extra_notes: tuple[str, ...] = field(default_factory=tuple)
    extra_warnings: tuple[str, ...] = field(default_factory=tuple)
    receipt: tuple[str, ...] = ()  # the sources' lines for under the reply, passed through
    # Messages the prompt sources took out (e.g. those a summary stands in for): never sent.
    left_out: frozenset[int] = frozenset()
    # A group chat (names in the history, the group nudge) even when one card is in the prompt (swap).
    group: GroupCards | None = None
    purpose: Purpose = "reply"
    # Tools declared this turn ({name, description, parameters}); with none, earlier replies' tool
    # calls are not sent back (Anthropic refuses tool blocks in a request that declares no tools).
    tools: tuple[dict, ...] = ()
    # A Game chat's prompt for its Game Master (the speaker runs the game): the Game Master's main
    # prompt and turn instructions. Any Game chat's prompt puts what changes each turn after the history.
    game_master: bool = False
    # The preset arranging the prompt (None: Sugo's default layout) and its choices' values for this chat.
    preset: Preset | None = None
    preset_values: Mapping[str, str] = field(default_factory=dict)
    # The reply starts with this (the composer's "start with", else the preset's prefill): sent as the
    # last, assistant message for the model to go on from; a new reply or version only.
    prefill: str = ""
    # A text-completion connection's templates: the prompt is also rendered as one raw text (Prompt.raw).
    text_templates: TextTemplates | None = None


def _names_list(names: Sequence[str]) -> str:
    """ "Aria", "Aria and Bram", "Aria, Bram and Cleo"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _examples_text(raw: str) -> str:
    # SillyTavern separates example chats with <START>; each becomes a labelled example.
    parts = [p.strip() for p in raw.replace("<start>", "<START>").split("<START>")]
    return "\n\n".join(f"[Example Chat]\n{p}" for p in parts if p)


def _character_text(
    card: CardSnapshot, *, group: bool, ex: Callable[[str], str], cards: GroupCards | None = None
) -> str:
    def wrapped(field: str, text: str) -> str:
        if cards is None or not (cards.join_prefix or cards.join_suffix):
            return text
        # SillyTavern's join prefix and suffix: <FIELDNAME> names the field, {{char}} the card.
        prefix, suffix = (
            part.replace("<FIELDNAME>", field).replace("{{char}}", card.name)
            for part in (cards.join_prefix, cards.join_suffix)
        )
        return f"{ex(prefix)}{text}{ex(suffix)}"

    lines = []
    if group:
        lines.append(f"## {card.name}")
    if card.description.strip():
        lines.append(wrapped("Description", ex(card.description.strip())))
    if card.personality.strip():
        lines.append(wrapped("Personality", f"{card.name}'s personality: {ex(card.personality.strip())}"))
    return "\n".join(lines) if (len(lines) > 1 or not group) else ""


def build(ctx: PromptContext, count: Callable[[str], int] = count_tokens) -> Prompt:
    speaker = ctx.speaker
    group = ctx.group is not None or len(ctx.characters) > 1

    def ex(text: str, char: str = speaker.name) -> str:
        return expand_macros(text, char=char, user=ctx.user_name, context=ctx.macros)

    def ex_card(card: CardSnapshot) -> Callable[[str], str]:
        # SillyTavern expands each member's joined fields with {{char}} = that member, not the speaker.
        return lambda text: ex(text, card.name)

    def ex_chat(text: str) -> str:
        return expand_macros(text, char=speaker.name, user=ctx.user_name)

    fixed_before: list[PromptBlock] = []

    def add(
        into: list[PromptBlock],
        kind: str,
        label: str,
        text: str,
        *,
        name: str | None = None,
        role: str = "system",
        depth: int | None = None,
    ) -> None:
        text = text.strip()
        if text:  # empty optional blocks take no tokens
            into.append(
                PromptBlock(
                    name or kind, label, GROUP_OF[kind], role, text, count(text), depth=depth, kind=kind
                )
            )

    game = ctx.mode == "game"
    arrangement = arrange(ctx.preset or DEFAULT_PRESET)

    def preset_text(text: str) -> str:
        return fill_choices(text, ctx.preset_values)

    if game and ctx.game_master:
        main = GAME_MASTER_PROMPT
    elif ctx.mode != "conversation" and ctx.group is not None and ctx.group.merged_names:
        main = MERGED_MAIN_PROMPT.format(names=_names_list(ctx.group.merged_names))
    elif arrangement.main_text or arrangement.no_main:
        main = preset_text(arrangement.main_text)
    else:
        main = CONVERSATION_MAIN_PROMPT if ctx.mode == "conversation" else ROLEPLAY_MAIN_PROMPT
    if speaker.system_prompt.strip():
        main = speaker.system_prompt.replace("{{original}}", main)
    add(fixed_before, "main_prompt", "Main prompt", ex(main))
    for card in ctx.characters:
        add(
            fixed_before,
            "character",
            f"Character: {card.name}",
            _character_text(card, group=group, ex=ex_card(card), cards=ctx.group),
            name=f"character_{card.id}",
        )
    # Each card's scenario with its own {{char}}; the same text twice is written once.
    scenarios = {ex_card(c)(c.scenario.strip()) for c in ctx.characters if c.scenario.strip()}
    if ctx.group is not None and ctx.group.scenario.strip():
        scenarios = {ex(ctx.group.scenario.strip())}
    add(fixed_before, "scenario", "Scenario", "\n".join(f"Scenario: {s}" for s in sorted(scenarios)))
    if ctx.persona_description.strip():
        add(
            fixed_before,
            "persona",
            f"Persona: {ctx.user_name}",
            f"About {ctx.user_name}: {ex(ctx.persona_description.strip())}",
        )
    examples = "\n\n".join(
        ex_card(c)(_examples_text(c.mes_example)) for c in ctx.characters if c.mes_example.strip()
    )
    add(fixed_before, "examples", "Example dialogue", examples)
    for block in ctx.fixed:
        add(fixed_before, block.kind, block.label, block.text)

    dynamic: list[PromptBlock] = []
    for block in ctx.dynamic:
        add(dynamic, block.kind, block.label, ex_chat(block.text))
    if ctx.current_time:
        add(dynamic, "current_time", "Current time", f"Current time: {ctx.current_time}")
    notes_at_depth: list[PromptBlock] = []
    for note in ctx.depth_notes:
        add(
            notes_at_depth,
            note.kind,
            note.label,
            ex(note.text),
            role=note.role,
            depth=note.depth,
            name=f"{note.kind}_{len(notes_at_depth)}",
        )
    ordered_after: list[PromptBlock] = []
    # Impersonating, the model writes as the user: the speaker's own instructions would contradict it.
    post_history = preset_text(arrangement.post_history_text)
    if speaker.post_history_instructions.strip():
        post_history = speaker.post_history_instructions.replace("{{original}}", post_history)
    if post_history.strip() and ctx.purpose != "impersonate":
        add(ordered_after, "post_history", "Post-history instructions", ex(post_history))
    custom = [
        _custom_block(position, section, text, count)
        for position, section in arrangement.custom
        if (text := ex(preset_text(section.content))).strip()  # a choice may leave it empty
    ]
    placed = _arranged(arrangement, fixed_before, dynamic, notes_at_depth, ordered_after, custom, count)
    fixed_before, dynamic, notes_at_depth, ordered_after = placed
    cache_warning = _cache_warning(fixed_before)
    notes_at_depth = [
        # On Continue the message being extended stays the newest turn (SillyTavern moves depth 0 to 1).
        replace(b, depth=max(1, b.depth or 0)) if ctx.purpose == "continue" else b
        for b in notes_at_depth
    ]
    after_history: list[PromptBlock] = []
    if game:
        after_history = [b for b in fixed_before if b.kind in GAME_AFTER_HISTORY]
        fixed_before = [b for b in fixed_before if b.kind not in GAME_AFTER_HISTORY]
        # Notes at a depth too: one inside the history would move up a turn each reply and change the
        # prefix. They keep their order (deepest first), then the recaps and the dynamic blocks.
        notes = sorted(notes_at_depth, key=lambda b: -(b.depth or 0))
        after_history = [
            replace(b, group="after_history", depth=None) for b in (*notes, *after_history, *dynamic)
        ]
        dynamic, notes_at_depth = [], []
    else:
        notes_at_depth = [replace(b, label=f"{b.label} (depth {b.depth})") for b in notes_at_depth]
    # The group nudge (or the Game Master's turn) closes the history, as SillyTavern's does; the preset's
    # parts after the history follow; Continue's nudge or Impersonate's instruction come last of all.
    fixed_after: list[PromptBlock] = []
    if game and ctx.game_master and ctx.purpose != "impersonate":
        add(fixed_after, "game_master_turn", "Game Master's turn instructions", ex(GAME_MASTER_TURN))
    elif group and ctx.purpose != "impersonate":
        if ctx.group is not None and ctx.group.merged_names:
            nudge = MERGED_NUDGE.format(names=", ".join(ctx.group.merged_names))
        else:
            nudge = GROUP_NUDGE
        add(fixed_after, "group_nudge", "Group nudge", ex(nudge))
    fixed_after.extend(ordered_after)
    if ctx.purpose == "continue":
        add(fixed_after, "continue_nudge", "Continue nudge", ex(CONTINUE_NUDGE))
    elif ctx.purpose == "impersonate":
        add(fixed_after, "impersonation", "Impersonation prompt", ex(IMPERSONATION_PROMPT))
    prefill = ex(preset_text(ctx.prefill)) if ctx.purpose == "reply" and ctx.prefill.strip() else ""
    if prefill.strip():
        # Not stripped as other blocks are: "Aria:" and "Aria: " ask for different continuations.
        text = prefill.rstrip()
        fixed_after.append(
            PromptBlock(
                "prefill",
                "Start of the reply",
                "after_history",
                "assistant",
                text,
                count(text),
                kind="prefill",
            )
        )

    visible = [m for m in ctx.messages if not m.hidden]
    empty = {m.id for m in visible if not m.content.strip()}
    hidden_skipped = len(ctx.messages) - len(visible) + ctx.hidden_elsewhere
    plan = ctx.window or plan_window(len(visible), ctx.recent_limit, keep_first=ctx.keep_first)
    if ctx.window is None:
        visible = visible[: plan.pinned] + (visible[len(visible) - plan.recent :] if plan.recent else [])

    rendered = []
    pinned = 0
    left_out = skipped_empty = 0
    for index, msg in enumerate(visible):
        if msg.id in ctx.left_out:  # a summary stands in for it, empty or not
            left_out += 1
            continue
        if msg.id in empty:
            skipped_empty += 1
            continue
        pinned += index < plan.pinned
        role = "user" if msg.role == "user" else ("system" if msg.role == "system" else "assistant")
        calls = msg.tool_calls if ctx.tools and role == "assistant" else ()
        if calls:
            # Each round's text is expanded on its own so the rounds' offsets stay true.
            calls = _expanded_rounds(msg.content, calls, ex_chat)
            text = "".join(c["text_before"] for c in calls) + calls[-1]["text_after"]
        else:
            text = ex_chat(msg.content)
        # A merged reply names its speakers in its marks: no name before it.
        merged_reply = ctx.group is not None and bool(ctx.group.merged_names) and msg.role == "assistant"
        if group and msg.role != "system" and not merged_reply:
            text = f"{msg.name}: {text}"
            if calls:
                calls = (
                    {**calls[0], "text_before": f"{msg.name}: {calls[0]['text_before']}"},
                    *calls[1:],
                )
        tokens = count(text) + sum(_call_tokens(c, count) for c in calls)
        rendered.append((msg, role, text, tokens, calls))

    fixed_tokens = sum(
        b.tokens + MESSAGE_OVERHEAD_TOKENS
        for b in (*fixed_before, *dynamic, *notes_at_depth, *after_history, *fixed_after)
    )
    budget = ctx.context_size - ctx.reply_reserve - fixed_tokens
    sizes = [tokens + MESSAGE_OVERHEAD_TOKENS for _, _, _, tokens, _ in rendered]
    drop_recent, drop_pinned = fit_window(sizes, budget, pinned=pinned, batch=batch_size(ctx.recent_limit))
    kept = rendered[drop_pinned:pinned] + rendered[pinned + drop_recent :]
    history = [
        PromptBlock(
            f"message_{m.id}",
            m.name,
            "conversation",
            role,
            text,
            tokens,
            message_id=m.id,
            kind="message",
            tool_calls=calls,
        )
        for m, role, text, tokens, calls in kept
    ]
    conversation = _place_among_history(history, [m.name for m, *_ in kept], dynamic, notes_at_depth)
    candidates = rendered

    warnings = list(ctx.extra_warnings)
    if cache_warning:
        warnings.append(cache_warning)
    if len(history) < len(candidates):
        warnings.append(
            f"{len(candidates) - len(history)} older message(s) did not fit the context size "
            f"({ctx.context_size} tokens minus {ctx.reply_reserve} reserved for the reply)."
        )
    blocks = (*fixed_before, *conversation, *after_history, *fixed_after)
    messages = _provider_messages(blocks)
    raw = None
    if ctx.text_templates is not None:
        cards = StoryCards(
            description=ex(speaker.description.strip()),
            personality=ex(speaker.personality.strip()),
            scenario="\n".join(sorted(scenarios)),
            persona=ex(ctx.persona_description.strip()),
            examples=tuple(ex_card(c)(c.mes_example) for c in ctx.characters if c.mes_example.strip()),
        )
        raw = render_raw(
            blocks,
            len(fixed_before),
            cards,
            ctx.text_templates,
            char=speaker.name,
            user=ctx.user_name,
            group=group,
            purpose=ctx.purpose,
        )
    tool_tokens = sum(count(json.dumps(t, ensure_ascii=False, sort_keys=True)) for t in ctx.tools)
    total = sum(b.tokens for b in blocks) + MESSAGE_OVERHEAD_TOKENS * len(messages) + tool_tokens
    return Prompt(
        blocks=tuple(blocks),
        messages=tuple(messages),
        total_tokens=total,
        context_size=ctx.context_size,
        reply_reserve=ctx.reply_reserve,
        history_available=len(candidates),
        history_included=len(history),
        hidden_skipped=hidden_skipped,
        window_dropped=plan.dropped,
        sources_left_out=left_out,
        empty_skipped=skipped_empty,
        notes=ctx.extra_notes,
        warnings=tuple(warnings),
        receipt=ctx.receipt,
        tools=ctx.tools,
        tool_tokens=tool_tokens,
        prefill=prefill.rstrip(),
        cache_warning=cache_warning,
        raw=raw,
    )


def _custom_block(position: int, section: Section, text: str, count: Callable[[str], int]) -> PromptBlock:
    """A preset's own text; the arrangement decides its group and place (`_arranged`)."""
    text = text.strip()
    return PromptBlock(
        f"preset_{section.id}",
        section.name or "Preset text",
        "system",
        section.role,
        text,
        count(text),
        depth=section.depth if section.placement == "depth" else None,
        kind="preset_text",
    )


def _arranged(
    arrangement: Arrangement,
    fixed: list[PromptBlock],
    dynamic: list[PromptBlock],
    notes: list[PromptBlock],
    after: list[PromptBlock],
    custom: list[PromptBlock],
    count: Callable[[str], int],
) -> tuple[list[PromptBlock], list[PromptBlock], list[PromptBlock], list[PromptBlock]]:
    """The blocks where the preset puts them: before the history (in the preset's order), just above the
    newest turns, among the recent messages, after the history. Parts the preset turns off are left
    out; parts it does not name go where the default layout puts them (arrangement.py)."""
    before: list[tuple[float, PromptBlock]] = []
    recent: list[tuple[float, PromptBlock]] = []
    at_depth: list[PromptBlock] = []
    behind: list[tuple[float, PromptBlock]] = []
    sections = {f"preset_{s.id}": (i, s) for i, s in arrangement.custom}
    origin = [("fixed", b) for b in fixed] + [("dynamic", b) for b in dynamic] + [("note", b) for b in notes]
    origin += [("after", b) for b in after] + [("custom", b) for b in custom]
    for source, block in origin:
        if block.kind in arrangement.off:
            continue
        if source == "custom":
            position, section = sections[block.name]
        else:
            position, section = arrangement.position(block.kind), arrangement.section(block.kind)
        placement = section.placement if section is not None else "default"
        key = float(position) if position is not None else float(default_sort_key(block.kind))
        if placement == "default":
            placement = {"fixed": "ordered", "dynamic": "recent", "note": "note", "after": "ordered"}[source]
        if placement == "ordered":
            if position is None:  # not named: stable parts end the part before the history
                placement = "behind" if source == "after" else "ordered"
            elif not arrangement.before_history(position):
                placement = "behind"
        if placement == "ordered":
            group = block.group if block.group in STABLE_GROUPS else "above_conversation"
            before.append((key, replace(block, group=group, depth=None)))
        elif placement == "behind":
            # The post-history instructions keep their own group, as before presets.
            group = block.group if source == "after" else "after_history"
            behind.append((key, replace(block, group=group, depth=None)))
        elif placement == "recent":
            recent.append((key, replace(block, group="dynamic", depth=None)))
        elif placement == "note":
            at_depth.append(block)
        else:  # "depth": the section's depth and role
            assert section is not None
            at_depth.append(replace(block, group="at_depth", depth=section.depth, role=section.role))

    def in_order(part: list[tuple[float, PromptBlock]]) -> list[PromptBlock]:
        return [b for _, b in sorted(part, key=lambda item: item[0])]

    # Blocks before the history are sent as one message, so a section's blocks share one wrap there.
    return (
        _wrapped(in_order(before), arrangement, count, shared=True),
        _wrapped(in_order(recent), arrangement, count),
        _wrapped(at_depth, arrangement, count),
        _wrapped(in_order(behind), arrangement, count),
    )


def _cache_warning(prefix: Sequence[PromptBlock]) -> str | None:
    """A part that changes every turn placed above stable ones: the provider's prompt cache then misses
    from that part on, every turn."""
    for i, block in enumerate(prefix):
        if GROUP_OF.get(block.kind) in CHANGING_GROUPS:
            stable = [b for b in prefix[i + 1 :] if GROUP_OF.get(b.kind, "system") not in CHANGING_GROUPS]
            if stable:
                return (
                    f"The preset puts {block.label} (it changes every turn) above {stable[0].label}: the "
                    "cached prompt prefix breaks there, and every turn pays again for what follows it. Move "
                    "it after the stable parts, or just above the newest turns."
                )
    return None


def _wrapped(
    blocks: list[PromptBlock], arrangement: Arrangement, count: Callable[[str], int], *, shared: bool = False
) -> list[PromptBlock]:
    """Each section's text in its XML tag or under its Markdown heading; with `shared`, a section's
    consecutive blocks (one per character) wrapped once."""
    if arrangement.wrap == "none":
        return blocks
    out = []
    for i, block in enumerate(blocks):
        section = arrangement.section(block.kind)
        name = block.label if block.kind == "preset_text" else (section.name if section else block.label)
        opening, closing = wrap_text(block.text, name, arrangement.wrap)

        def joined(other: int, kind: str = block.kind) -> bool:
            return shared and kind != "preset_text" and blocks[other].kind == kind

        first = i == 0 or not joined(i - 1)
        last = i == len(blocks) - 1 or not joined(i + 1)
        text = (opening if first else "") + block.text + (closing if last else "")
        out.append(replace(block, text=text, tokens=count(text)))
    return out


def _expanded_rounds(content: str, calls: Sequence[dict], ex: Callable[[str], str]) -> tuple[dict, ...]:
    """The calls with the reply's text cut at each round: `text_before` is what the model wrote before
    that call (empty for a second call of the same round), `text_after` on the last what it wrote after."""
    out = []
    at = 0
    for call in calls:
        end = min(max(at, int(call.get("at") or 0)), len(content))
        out.append({**call, "text_before": ex(content[at:end])})
        at = end
    out[-1]["text_after"] = ex(content[at:])
    return tuple(out)


def _call_tokens(call: dict, count: Callable[[str], int]) -> int:
    return (
        count(str(call.get("name", "")))
        + count(str(call.get("arguments", "")))
        + count(str(call.get("result", "")))
    )


def _place_among_history(
    history: list[PromptBlock], speakers: list[str], dynamic: list[PromptBlock], notes: list[PromptBlock]
) -> list[PromptBlock]:
    """The conversation with the dynamic group above the newest speaker turns and each note at its
    depth (counted in history messages; at one spot, dynamic blocks come before notes)."""
    at: dict[int, list[PromptBlock]] = {}
    if dynamic:
        at.setdefault(dynamic_insert_index(speakers), []).extend(dynamic)
    for note in notes:
        at.setdefault(depth_index(len(history), note.depth or 0), []).append(note)
    out: list[PromptBlock] = []
    for i in range(len(history) + 1):
        out.extend(at.get(i, ()))
        if i < len(history):
            out.append(history[i])
    return out


def _provider_messages(blocks: Sequence[PromptBlock]) -> list[dict]:
    """Consecutive system blocks before the conversation become one system message (many local
    models accept only one); a preset's text with another role stands as its own message. The end of
    that stable prefix carries the cache marker."""
    messages: list[dict] = []
    i = 0
    while i < len(blocks) and blocks[i].group in STABLE_GROUPS:
        role = blocks[i].role
        run: list[str] = []
        while i < len(blocks) and blocks[i].group in STABLE_GROUPS and blocks[i].role == role:
            run.append(blocks[i].text)
            i += 1
        messages.append({"role": role, "content": "\n\n".join(run)})
    if messages:
        messages[-1]["cache"] = True
    for block in blocks[i:]:
        if block.tool_calls:
            messages.extend(_replayed(block))
        else:
            messages.append({"role": block.role, "content": block.text})
    return messages


def _replayed(block: PromptBlock) -> list[dict]:
    """A reply with tool rounds as the model made it: for each round, the text it wrote and its calls,
    then their results; then the rest of its text."""
    out: list[dict] = []
    pending: list[dict] = []

    def flush() -> None:
        if pending:
            out.append(
                {
                    "role": "assistant",
                    "content": pending[0]["text_before"],
                    "tool_calls": [
                        {"id": c["id"], "name": c["name"], "arguments": c.get("arguments") or "{}"}
                        for c in pending
                    ],
                }
            )
            for c in pending:
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": c["id"],
                        "name": c["name"],
                        "content": str(c.get("result") or ""),
                        "is_error": bool(c.get("error")),
                    }
                )
            pending.clear()

    for call in block.tool_calls:
        if pending and call.get("round") != pending[0].get("round"):
            flush()
        pending.append(call)
    flush()
    rest = block.tool_calls[-1]["text_after"]
    if rest.strip():
        out.append({"role": "assistant", "content": rest})
    return out

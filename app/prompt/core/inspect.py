"""Ways to look at a built prompt: the size breakdown ("what is eating my context") and the
annotated snapshot text. Pure functions over a Prompt."""

from __future__ import annotations

from dataclasses import dataclass

from app.prompt.core.blocks import Prompt
from app.prompt.core.layout import GROUP_LABELS, GROUPS
from app.prompt.core.tokens import MESSAGE_OVERHEAD_TOKENS


@dataclass(frozen=True)
class SizeRow:
    label: str
    group: str
    tokens: int
    share: float  # of the context size


FRAMING = "framing"


def size_breakdown(prompt: Prompt) -> list[SizeRow]:
    """Blocks by size, biggest first; the recent messages count as one row. A block counts what
    Peek Prompt shows for it (its text's tokens); the role markers of the messages the blocks are
    sent in are one row of their own, so the rows still add up to the prompt's total."""
    rows: dict[str, tuple[str, int]] = {}
    messages = 0
    for block in prompt.blocks:
        if block.message_id is not None:
            label = "Recent messages"
            messages += 1
        else:
            label = block.label
        group, tokens = rows.get(label, (block.group, 0))
        rows[label] = (group, tokens + block.tokens)
    if messages:
        group, tokens = rows.pop("Recent messages")
        rows[f"Recent messages ({messages})"] = (group, tokens)
    framing = prompt.total_tokens - sum(b.tokens for b in prompt.blocks)
    if framing > 0:
        rows[f"Message framing ({len(prompt.messages)} messages' role markers)"] = (FRAMING, framing)
    size = max(1, prompt.context_size)
    out = [SizeRow(label, group, tokens, tokens / size) for label, (group, tokens) in rows.items()]
    order = (*GROUPS, FRAMING)
    return sorted(out, key=lambda r: (-r.tokens, order.index(r.group)))


def group_totals(prompt: Prompt) -> dict[str, int]:
    """Tokens per group, adding up to the prompt's total: the stable groups share one message (and
    one message overhead), every other block is a message of its own."""
    totals: dict[str, int] = {}
    stable = ("system", "above_conversation", "examples")
    for block in prompt.blocks:
        overhead = 0 if block.group in stable else MESSAGE_OVERHEAD_TOKENS
        totals[block.group] = totals.get(block.group, 0) + block.tokens + overhead
    head = next((b.group for b in prompt.blocks if b.group in stable), None)
    if head:
        totals[head] += MESSAGE_OVERHEAD_TOKENS
    if prompt.tool_tokens:
        totals["tools"] = prompt.tool_tokens
    return totals


def stable_prefix_tokens(prompt: Prompt) -> int:
    """Tokens of the leading system message, the part a provider can cache from turn to turn."""
    first = prompt.messages[0] if prompt.messages else None
    if not first or not first.get("cache"):
        return 0
    return sum(b.tokens for b in prompt.blocks if b.group in ("system", "above_conversation", "examples")) + (
        MESSAGE_OVERHEAD_TOKENS
    )


def message_counts(prompt: Prompt) -> list[tuple[str, int]]:
    """Where each message the AI may read went, every message in one place: the parts add up to
    `prompt.history_total`. "sent" always; the others when there are any."""
    parts = [
        ("sent", prompt.history_included),
        ("left out for summaries", prompt.sources_left_out),
        ("dropped by the window", prompt.window_dropped),
        ("did not fit the context", prompt.history_available - prompt.history_included),
        ("hidden", prompt.hidden_skipped),
        ("empty", prompt.empty_skipped),
    ]
    return [parts[0], *(p for p in parts[1:] if p[1])]


def snapshot_text(prompt: Prompt, header: list[tuple[str, str]]) -> str:
    """The package for the next reply as annotated text: what is active, what fits, every block."""
    lines = ["Sugo prompt snapshot", "=" * 20]
    lines += [f"{key}: {value}" for key, value in header]
    lines.append(
        f"Tokens: ~{prompt.total_tokens} of {prompt.context_size} ({prompt.reply_reserve} kept for the reply)"
    )
    lines.append(
        f"Conversation: {prompt.history_included} of {prompt.history_available} messages in the recent window fit"
        f"; {prompt.window_dropped} older message(s) dropped by the window; {prompt.hidden_skipped} hidden left out"
    )
    counts = ", ".join(f"{n} {label}" for label, n in message_counts(prompt))
    lines.append(f"Each message once: {prompt.history_total} messages: {counts}")
    dynamic = [b.label for b in prompt.blocks if b.group in ("dynamic", "after_history")]
    lines.append("Active near the newest turns: " + (", ".join(dynamic) if dynamic else "nothing"))
    lines += [f"Warning: {warning}" for warning in prompt.warnings]
    lines += [f"Note: {note}" for note in prompt.notes]
    lines.append("")
    for i, block in enumerate(prompt.blocks, 1):
        where = GROUP_LABELS[block.group] + (f", depth {block.depth}" if block.depth is not None else "")
        lines.append(f"--- [{i}] {block.label} · {block.role} · {where} · {block.tokens} tokens ---")
        lines.append(block.text)
        lines.append("")
    return "\n".join(lines)

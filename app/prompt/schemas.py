"""Peek Prompt as JSON: the blocks and the messages exactly as sent."""

from __future__ import annotations

from pydantic import BaseModel

from app.prompt.core.blocks import Prompt


class PromptBlockRead(BaseModel):
    name: str
    label: str
    group: str
    role: str
    tokens: int
    text: str
    message_id: int | None


class PromptRead(BaseModel):
    blocks: list[PromptBlockRead]
    messages: list[dict]
    total_tokens: int
    context_size: int
    reply_reserve: int
    history_available: int
    history_included: int
    hidden_skipped: int
    # With hidden_skipped and the messages that did not fit (available - included), each message the AI
    # may read counted once; they add up to history_total.
    window_dropped: int = 0
    sources_left_out: int = 0  # a summary stands in for them
    empty_skipped: int = 0
    history_total: int = 0
    notes: list[str]
    warnings: list[str] = []
    # Milliseconds per prompt source, only with SUGO_DEBUG_TIMINGS=1 (null otherwise).
    source_ms: dict[str, float] | None = None
    # The tools declared with this prompt ({name, description, parameters}), what they cost in tokens
    # (counted in total_tokens), and why each other tool was not offered.
    tools: list[dict] = []
    tool_tokens: int = 0
    tools_missing: dict[str, str] = {}
    # A text-completion connection's raw prompt as sent ({text, stop}); null for a chat connection.
    raw: dict | None = None


def prompt_read(prompt: Prompt, *, timings: bool = False) -> PromptRead:
    return PromptRead(
        blocks=[
            PromptBlockRead(
                name=b.name,
                label=b.label,
                group=b.group,
                role=b.role,
                tokens=b.tokens,
                text=b.text,
                message_id=b.message_id,
            )
            for b in prompt.blocks
        ],
        messages=[dict(m) for m in prompt.messages],
        total_tokens=prompt.total_tokens,
        context_size=prompt.context_size,
        reply_reserve=prompt.reply_reserve,
        history_available=prompt.history_available,
        history_included=prompt.history_included,
        hidden_skipped=prompt.hidden_skipped,
        window_dropped=prompt.window_dropped,
        sources_left_out=prompt.sources_left_out,
        empty_skipped=prompt.empty_skipped,
        history_total=prompt.history_total,
        notes=list(prompt.notes),
        warnings=list(prompt.warnings),
        source_ms={name: round(ms, 3) for name, ms in prompt.source_ms} if timings else None,
        tools=[dict(t) for t in prompt.tools],
        tool_tokens=prompt.tool_tokens,
        tools_missing=dict(prompt.tools_missing),
        raw={"text": prompt.raw.text, "stop": list(prompt.raw.stop)} if prompt.raw is not None else None,
    )

"""Prompt blocks: named pieces of the prompt, each in a group, with its own token estimate.
The same blocks feed the provider, Peek Prompt and (later) the context grid."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.connections.core.raw_prompt import RawPrompt
from app.prompt.core.layout import GROUP_LABELS, GROUPS  # noqa: E402,F401  (re-exported for views)


@dataclass(frozen=True)
class PromptBlock:
    name: str
    label: str
    group: str
    role: str
    text: str
    tokens: int
    message_id: int | None = None  # set for history blocks
    depth: int | None = None  # for at_depth blocks: how many messages from the end
    kind: str = ""  # the layout slot (app/prompt/core/layout.py)
    # A reply's tool rounds, sent back as the provider expects ({id, name, arguments, result, error,
    # at}: `at` is where in `text` that round's call was made).
    tool_calls: tuple[dict, ...] = ()


@dataclass(frozen=True)
class Prompt:
    blocks: tuple[PromptBlock, ...]
    messages: tuple[dict, ...]
    total_tokens: int
    context_size: int
    reply_reserve: int
    history_available: int  # visible messages inside the recent-message limit
    history_included: int  # of those, how many fit the context
    hidden_skipped: int
    window_dropped: int = 0  # older messages the recent-message window dropped (whole batches)
    # Of the window's messages, those a prompt source took out (a summary stands in for them) and the
    # empty ones: with the others above, each message the AI may read is counted once (`history_total`).
    sources_left_out: int = 0
    empty_skipped: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    # What went wrong or was cut (a failed source, messages that did not fit): shown as warnings,
    # while notes only inform.
    warnings: tuple[str, ...] = field(default_factory=tuple)
    receipt: tuple[str, ...] = ()  # lines the sources want under the reply (the memory receipt)
    # Milliseconds each prompt source took to build this prompt, (name, ms) in registry order:
    # measured by the seam (app/prompt/sources.py), shown by Peek Prompt with SUGO_DEBUG_TIMINGS=1.
    source_ms: tuple[tuple[str, float], ...] = ()
    # The tools declared to the model with this prompt ({name, description, parameters}) and what
    # their declarations cost in tokens (the context grid shows them as their own group).
    tools: tuple[dict, ...] = ()
    tool_tokens: int = 0
    tools_missing: tuple[tuple[str, str], ...] = ()  # (tool name, why it was not offered)
    # What the reply starts with (sent last, as the assistant's): the stored reply begins with it.
    prefill: str = ""
    # The preset puts a part that changes every turn above stable ones (also among `warnings`): the
    # context grid says so beside the cost of the cached prefix.
    cache_warning: str | None = None
    # For a text-completion connection: the prompt as the one text sent, and the stop strings its
    # templates add (Peek Prompt shows the text exactly as sent).
    raw: RawPrompt | None = None

    @property
    def history_total(self) -> int:
        """The messages the AI may read (since a refresh mark; failed replies are never sent): hidden,
        dropped by the window, left out by a source, empty, cut to fit the context, or sent."""
        return (
            self.hidden_skipped
            + self.window_dropped
            + self.sources_left_out
            + self.empty_skipped
            + self.history_available
        )

    @property
    def included_message_ids(self) -> list[int]:
        return [b.message_id for b in self.blocks if b.message_id is not None]

    def tokens_by_group(self) -> dict[str, int]:
        totals = {g: 0 for g in GROUPS}
        for block in self.blocks:
            totals[block.group] += block.tokens
        return {g: t for g, t in totals.items() if t}

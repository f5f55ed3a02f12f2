"""How often the prompt prefix (system part and the conversation's older part) is unchanged from
one turn to the next: Sugo's batch-dropping window against a plain sliding window of the same
limit. An unchanged prefix is what lets a provider's prompt cache hit.

Run: .venv/bin/python bench/cache_prefix.py   (prints name=value lines; asserts nothing)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.chats.core.window import DEFAULT_RECENT_LIMIT, HistoryMessage, WindowPlan  # noqa: E402
from app.prompt.core.builder import CardSnapshot, PromptContext, build  # noqa: E402

TURNS = 500
LIMIT = DEFAULT_RECENT_LIMIT
CARD = CardSnapshot(1, "Mirela", description="A lighthouse keeper on a cold coast.", personality="patient")


def history(turn: int) -> list[HistoryMessage]:
    """The chat before turn `turn`'s reply: a greeting, then alternating user and character."""
    msgs = [HistoryMessage(1, "assistant", "Mirela", "*Mirela lowers her lantern.* You're alive.")]
    for i in range(turn):
        msgs.append(HistoryMessage(2 + 2 * i, "user", "Rowan", f"Turn {i}: the tide is {i % 7} feet."))
        if i < turn - 1:
            msgs.append(HistoryMessage(3 + 2 * i, "assistant", "Mirela", f"Reply {i}: the lamp holds."))
    return msgs


def prompt_json(messages: list[HistoryMessage], window: WindowPlan | None) -> str:
    ctx = PromptContext(
        mode="roleplay",
        characters=(CARD,),
        speaker=CARD,
        user_name="Rowan",
        persona_description="",
        messages=tuple(messages),
        context_size=200_000,
        reply_reserve=512,
        recent_limit=LIMIT,
        window=window,
    )
    return json.dumps(list(build(ctx).messages), ensure_ascii=False)


def share_unchanged(prompts: list[str]) -> float:
    same = sum(1 for a, b in zip(prompts, prompts[1:], strict=False) if b.startswith(a[:-1]))
    return same / (len(prompts) - 1)


def main() -> None:
    sugo, sliding = [], []
    for turn in range(1, TURNS + 1):
        msgs = history(turn)
        sugo.append(prompt_json(msgs, None))
        newest = msgs[-LIMIT:]
        sliding.append(
            prompt_json(newest, WindowPlan(pinned=0, dropped=len(msgs) - len(newest), size=len(newest)))
        )
    print(f"turns={TURNS}")
    print(f"recent_message_limit={LIMIT}")
    print(f"prefix_unchanged_share_sugo={share_unchanged(sugo):.3f}")
    print(f"prefix_unchanged_share_sliding={share_unchanged(sliding):.3f}")
    # Past the first 40 turns the sliding window is always full; that is where the two differ.
    print(f"prefix_unchanged_share_sugo_when_full={share_unchanged(sugo[40:]):.3f}")
    print(f"prefix_unchanged_share_sliding_when_full={share_unchanged(sliding[40:]):.3f}")


if __name__ == "__main__":
    main()

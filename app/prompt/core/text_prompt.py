"""The prompt as one raw text, for a text-completion connection: the builder's blocks laid out by the
connection's context template (the story string) and instruct template, as SillyTavern's text completion
does (app/connections/core/raw_prompt.py renders; this module says what goes where).

Decisions:
- Before the history, the story string places the main prompt (`system`), the character's description
  and personality, the scenario, the persona and the constant lorebook entries (before and after the
  character); every other part that comes before the history (memories, summaries, tool guidance, a
  preset's own text) follows the story string, in the prompt's order, as SillyTavern's "after the story
  string" extension prompts do. A preset still decides what is in (a part turned off stays out), not
  the order: the story string is the text-completion layout.
- In a group, the joined cards (each member's description and personality) are the description.
- Among and after the history, every block that is not a message (recalled memories, notes at a depth,
  the group nudge, post-history instructions) is a system line at its place, as SillyTavern's
  injections are; Continue leaves the reply open instead of sending the nudge; a prefill opens the reply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.connections.core.raw_prompt import (
    ContextTemplate,
    InstructTemplate,
    Line,
    RawPrompt,
    StoryFields,
    render_text_prompt,
)
from app.prompt.core.blocks import PromptBlock

STORY_KINDS = frozenset(
    ("main_prompt", "character", "scenario", "persona", "lore_before_char", "constant_lore", "examples")
)
_EXAMPLE_LINE = re.compile(r"^([^:\n]{1,80}):\s?(.*)$")


@dataclass(frozen=True)
class TextTemplates:
    context: ContextTemplate
    instruct: InstructTemplate | None  # None: plain text, names before every line


@dataclass(frozen=True)
class StoryCards:
    """The card fields the story string names, expanded, for a chat of one (a group joins its cards)."""

    description: str = ""
    personality: str = ""
    scenario: str = ""
    persona: str = ""
    examples: tuple[str, ...] = ()  # each card's raw mes_example, macros expanded


def example_lines(raw: str, *, char: str, user: str) -> list[list[Line]]:
    """A card's example dialogue as SillyTavern reads it: blocks split at <START>, each line `Name: text`
    (the user's name or {{user}} for the user's turns); a line without a name goes on the one before."""
    blocks: list[list[Line]] = []
    for part in re.split(r"<start>", raw, flags=re.IGNORECASE):
        lines: list[Line] = []
        for row in part.strip().splitlines():
            match = _EXAMPLE_LINE.match(row)
            if match and match.group(1).strip() in (user, char, "{{user}}", "{{char}}"):
                who = match.group(1).strip()
                role = "user" if who in (user, "{{user}}") else "assistant"
                lines.append(Line(role, user if role == "user" else char, match.group(2)))
            elif lines:
                last = lines[-1]
                lines[-1] = Line(last.role, last.name, f"{last.content}\n{row}")
        if lines:
            blocks.append(lines)
    return blocks


def render_raw(
    blocks: Sequence[PromptBlock],
    prefix: int,
    cards: StoryCards,
    templates: TextTemplates,
    *,
    char: str,
    user: str,
    group: bool,
    purpose: str,
) -> RawPrompt:
    """The raw prompt for `blocks` (the first `prefix` of them come before the history)."""
    head, rest = blocks[:prefix], blocks[prefix:]
    kinds = {b.kind for b in head}

    def joined(kind: str) -> str:
        return "\n".join(b.text for b in head if b.kind == kind)

    story = StoryFields(
        system=joined("main_prompt"),
        description=(joined("character") if group else cards.description) if "character" in kinds else "",
        personality=cards.personality if "character" in kinds and not group else "",
        scenario=cards.scenario if "scenario" in kinds else "",
        persona=cards.persona if "persona" in kinds else "",
        wi_before=joined("lore_before_char"),
        wi_after=joined("constant_lore"),
        anchor_after="\n".join(b.text for b in head if b.kind not in STORY_KINDS),
    )
    examples = (
        [block for raw in cards.examples for block in example_lines(raw, char=char, user=user)]
        if "examples" in kinds
        else []
    )
    history: list[Line] = []
    prefill = ""
    for block in rest:
        if block.kind == "message":
            text = block.text
            if group and block.role != "system" and text.startswith(f"{block.label}: "):
                text = text[len(block.label) + 2 :]  # the template names the speaker itself
            role = block.role if block.role in ("user", "assistant") else "system"
            history.append(Line(role, block.label if role != "system" else "", text))
        elif block.kind == "prefill":
            prefill = block.text
        elif block.kind == "continue_nudge":
            continue  # text completion continues the open reply itself
        else:
            history.append(Line("system", "", block.text, is_injection=True))
    continuing = purpose == "continue" and bool(history) and history[-1].role == "assistant"
    if prefill:
        history.append(Line("assistant", char, prefill))
        continuing = True
    return render_text_prompt(
        story,
        examples,
        history,
        context=templates.context,
        instruct=templates.instruct,
        char=char,
        user=user,
        continue_last=continuing,
        impersonate=purpose == "impersonate",
        group=group,
    )

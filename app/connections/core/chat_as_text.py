"""Messages (a helper's request: a summary, a scene check) as one raw prompt for a text-completion
connection. A reply's prompt is laid out by the builder itself, with the card's fields in the story
string (app/prompt/core/text_prompt.py); a helper's request has only messages, so its leading system
messages are the story string's system prompt and the rest are turns. A trailing assistant message is
the start of the answer (left open). Empty templates mean SillyTavern's Default context template and
plain text with names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.connections.core.builtin_templates import BUILTIN_CONTEXT_TEMPLATES
from app.connections.core.raw_prompt import Line, RawPrompt, StoryFields, render_text_prompt
from app.connections.core.template_files import (
    ContextTemplate,
    InstructTemplate,
    parse_context_template,
    parse_instruct_template,
)

# The names a helper's request is written with: nobody is playing a character.
USER, ASSISTANT = "User", "Assistant"
# A request the reply path built itself: one message holding the raw prompt, and its templates' stops.
RAW_ROLE = "raw"


def templates(
    instruct: Mapping[str, Any], context: Mapping[str, Any]
) -> tuple[ContextTemplate, InstructTemplate | None]:
    """A connection's stored templates read: TemplateError when one no longer parses."""
    ctx = parse_context_template(context or BUILTIN_CONTEXT_TEMPLATES["Default"])
    return ctx, (parse_instruct_template(instruct) if instruct else None)


def chat_as_text(
    messages: Sequence[Mapping[str, Any]], instruct: Mapping[str, Any], context: Mapping[str, Any]
) -> RawPrompt:
    if len(messages) == 1 and messages[0].get("role") == RAW_ROLE:
        return RawPrompt(str(messages[0].get("content") or ""), tuple(messages[0].get("stop") or ()))
    ctx, inst = templates(instruct, context)
    rows = list(messages)
    system: list[str] = []
    while rows and rows[0].get("role") == "system":
        system.append(_text(rows.pop(0)))
    history = [_line(row) for row in rows if row.get("role") in ("system", "user", "assistant", "tool")]
    open_answer = bool(history) and history[-1].role == "assistant"
    return render_text_prompt(
        StoryFields(system="\n\n".join(system)),
        [],
        history,
        context=ctx,
        instruct=inst,
        char=ASSISTANT,
        user=USER,
        continue_last=open_answer,
    )


def _text(row: Mapping[str, Any]) -> str:
    content = row.get("content")
    if isinstance(content, list):  # parts: only the text ones have a place in a raw prompt
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content or "")


def _line(row: Mapping[str, Any]) -> Line:
    role = row.get("role")
    if role == "user":
        return Line("user", USER, _text(row))
    if role == "assistant":
        return Line("assistant", ASSISTANT, _text(row))
    return Line("system", "", _text(row), is_injection=True)

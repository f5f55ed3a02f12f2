"""SillyTavern context and instruct templates, and the raw text-completion prompt they make.

A text-completion connection (llama.cpp /completion, Ollama /api/generate raw, /v1/completions) sends
one string; SillyTavern users bring the two templates that shape it. Any file of their shape works: the
built-ins (app/connections/core/builtin_templates.py) are data read by the same code.

The files are read and written back by app/connections/core/template_files.py (re-exported here), the
story string rendered by app/connections/core/story_string.py.

The prompt follows SillyTavern's text-completion path as read from its source (public/script.js
`Generate`, `formatMessageHistoryItem`, `getStoppingStrings`; public/scripts/instruct-mode.js
`formatInstructModeChat`, `formatInstructModeExamples`, `formatInstructModePrompt`,
`formatInstructModeSystemPrompt`, `formatInstructModeStoryString`, `getInstructStoppingSequences`; 1.12,
the version the shipped presets come from, and the current one where they differ):
  [anchor before] story string [anchor after] examples [chat_start] [user alignment] history, last line.
- 1.12 wrapped the system prompt in `system_sequence_prefix`/`_suffix`; current files wrap the whole story
  string in `story_string_prefix`/`_suffix` instead (and drop the old pair). Both are honoured.
- Anchors go where the story string says `{{anchorBefore}}`/`{{anchorAfter}}`, else around it (1.12).
- `story_string_position` 1 puts the story string in the chat, `story_string_depth` messages from the end.
- Names, with `names_behavior` "force" (every shipped preset), are written only for a speaker who is not
  the chat's own: a line whose name is not `user` or `char` stands in for SillyTavern's group and
  forced-avatar messages. In examples, "force" names the user's turns (SillyTavern does).
- Continue cuts the last message after its text; SillyTavern's stray space when continuing a user's
  message in plain mode, or with `always_force_name2` off, is not copied.
Sugo's own rule: an instruct template with no turn sequence or suffix at all renders as plain text with
names (SillyTavern would send unnamed turns), its stop_sequence kept.
Macros: `{{name}}`, `{{user}}` and `{{char}}` in sequences are filled here; any other `{{macro}}` is
left for Sugo's macro engine.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.connections.core.story_string import render_story_string
from app.connections.core.template_files import (
    ContextTemplate,
    InstructTemplate,
    TemplateError,
    context_template_to_json,
    instruct_template_to_json,
    parse_context_template,
    parse_instruct_template,
)

__all__ = [
    "ContextTemplate",
    "InstructTemplate",
    "Line",
    "RawPrompt",
    "StoryFields",
    "TemplateError",
    "context_template_to_json",
    "instruct_template_to_json",
    "parse_context_template",
    "parse_instruct_template",
    "render_text_prompt",
]

IN_CHAT = 1  # story_string_position: SillyTavern's extension_prompt_types.IN_CHAT
_FIRST, _LAST = 1, 2  # SillyTavern's force_output_sequence


@dataclass(frozen=True)
class StoryFields:
    """The story string's parameters, macros already expanded."""

    system: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    persona: str = ""
    wi_before: str = ""
    wi_after: str = ""
    anchor_before: str = ""
    anchor_after: str = ""


@dataclass(frozen=True)
class Line:
    role: Literal["user", "assistant", "system"]
    name: str
    content: str
    is_injection: bool = False


@dataclass(frozen=True)
class RawPrompt:
    text: str
    stop: tuple[str, ...]


# ---- the prompt ----------------------------------------------------------------------------------


def _fill(text: str, *, user: str, char: str, name: str | None = None) -> str:
    text = re.sub(r"\{\{user\}\}", lambda _: user, text, flags=re.I)
    text = re.sub(r"\{\{char\}\}", lambda _: char, text, flags=re.I)
    return text if name is None else re.sub(r"\{\{name\}\}", lambda _: name, text, flags=re.I)


def _has_turn_markers(t: InstructTemplate) -> bool:
    marks = (t.input_sequence, t.output_sequence, t.system_sequence, t.first_output_sequence)
    marks += (t.last_output_sequence, t.first_input_sequence, t.last_input_sequence, t.last_system_sequence)
    return any(mark.strip() for mark in marks + (t.input_suffix, t.output_suffix, t.system_suffix))


def _plain_line(line: Line) -> str:
    """formatMessageHistoryItem without instruct: `Name: text`, narration and nameless lines bare."""
    return f"{line.name}: {line.content}\n" if line.name and line.role != "system" else f"{line.content}\n"


def _instruct_line(t: InstructTemplate, line: Line, force: int, *, user: str, char: str) -> str:
    """formatInstructModeChat."""
    narrator, is_user = line.role == "system", line.role == "user"
    name = line.name if is_user else (line.name or char)
    own_name = user if is_user else char  # a speaker other than the chat's own is SillyTavern's forced avatar
    other = bool(line.name) and line.name != own_name and name != user
    include = not narrator and (t.names_behavior == "always" or (t.names_behavior == "force" and other))
    if narrator:
        prefix = t.input_sequence if t.system_same_as_user else t.system_sequence
        suffix = t.input_suffix if t.system_same_as_user else t.system_suffix
    elif is_user:
        first, last = t.first_input_sequence, t.last_input_sequence
        prefix = {_FIRST: first, _LAST: last}.get(force, "") or t.input_sequence
        suffix = t.input_suffix
    else:
        first, last = t.first_output_sequence, t.last_output_sequence
        prefix = {_FIRST: first, _LAST: last}.get(force, "") or t.output_sequence
        suffix = t.output_suffix
    if t.macro:
        prefix = _fill(prefix, user=user, char=char, name=name or "System")
        suffix = _fill(suffix, user=user, char=char, name=name or "System")
    suffix = suffix or ("\n" if t.wrap else "")
    text = f"{name}: {line.content}" if include and name else line.content
    return ("\n" if t.wrap else "").join(part for part in (prefix, text + suffix) if part)


def _example_turns(block: Sequence[Line]) -> list[tuple[bool, str]]:
    """(is the user's, text) per turn; a narration line joins the turn before it (or after it), as
    SillyTavern's parseExampleIntoIndividual joins lines that name no speaker."""
    turns: list[list] = []
    pending = ""
    for line in block:
        if line.role == "system":
            if turns:
                turns[-1][1] += "\n" + line.content
            else:
                pending += line.content + "\n"
            continue
        turns.append([line.role == "user", pending + line.content])
        pending = ""
    return [(is_user, text) for is_user, text in turns]


def _raw_examples(blocks: Sequence[Sequence[Line]], heading: str, *, user: str, char: str) -> list[str]:
    """parseMesExamples: each block as `Name: text` lines under its heading."""
    out = []
    for block in blocks:
        lines = [f"{user if is_user else char}: {text}" for is_user, text in _example_turns(block)]
        if lines:
            out.append(f"{heading}{chr(10).join(lines).strip()}\n")
    return out


def _instruct_examples(
    t: InstructTemplate, blocks: Sequence[Sequence[Line]], heading: str, *, user: str, char: str
) -> list[str]:
    """formatInstructModeExamples (1:1 chat)."""
    if t.skip_examples:
        return _raw_examples(blocks, heading, user=user, char=char)
    ins, outs, in_suffix, out_suffix = t.input_sequence, t.output_sequence, t.input_suffix, t.output_suffix
    if t.macro:  # the newline for an empty suffix is added only here, as in SillyTavern
        ins, in_suffix = (_fill(s, user=user, char=char, name=user) for s in (ins, in_suffix))
        outs, out_suffix = (_fill(s, user=user, char=char, name=char) for s in (outs, out_suffix))
        in_suffix, out_suffix = (s or ("\n" if t.wrap else "") for s in (in_suffix, out_suffix))
    out: list[str] = []
    for block in blocks:
        turns = _example_turns(block)
        if turns and heading:
            out.append(heading)
        for is_user, text in turns:
            named = t.names_behavior == "always" or (t.names_behavior == "force" and is_user)
            content = f"{user if is_user else char}: {text}" if named else text
            prefix, suffix = (ins, in_suffix) if is_user else (outs, out_suffix)
            out.append(("\n" if t.wrap else "").join(part for part in (prefix, content + suffix) if part))
    return out


def _instruct_prompt_line(t: InstructTemplate, name: str, *, impersonate: bool, user: str, char: str) -> str:
    """formatInstructModePrompt: the sequence that opens the reply (1:1 chat, no prompt bias)."""
    include = bool(name) and t.names_behavior == "always"
    sequence = t.input_sequence if impersonate else (t.last_output_sequence or t.output_sequence)
    filler = ""  # Mistral's hack: an output sequence ending in a space lends it to the name
    last, output = t.last_output_sequence, t.output_sequence
    if include and last and output and sequence == last and output[-1].isspace() and not last[-1].isspace():
        filler = output[-1]
    if t.macro:
        sequence = _fill(sequence, user=user, char=char, name=name or "System")
    sep = "\n" if t.wrap else ""
    text = sep + sequence + sep + filler + f"{name}:" if include else sep + sequence
    return (text.rstrip() if t.wrap else text) + ("" if include else sep)


def _stop_strings(
    context: ContextTemplate,
    t: InstructTemplate | None,
    *,
    user: str,
    char: str,
    impersonate: bool,
    continue_on_user: bool,
) -> tuple[str, ...]:
    """getStoppingStrings with getInstructStoppingSequences (no custom strings, no group)."""
    out = ["\n"] if context.single_line else []
    if context.names_as_stop_strings:
        out += [f"\n{char}:" if impersonate else f"\n{user}:", f"\n{user}:"]
        out += [f"\n{char}:"] if continue_on_user else []
    if t is not None:
        sequences = [t.stop_sequence]
        if t.sequences_as_stop_strings:
            named = ((t.input_sequence, user), (t.output_sequence, char), (t.first_output_sequence, char))
            named += (
                (t.last_output_sequence, char),
                (t.system_sequence, "System"),
                (t.last_system_sequence, "System"),
            )
            sequences += [re.sub(r"\{\{name\}\}", lambda _, n=n: n, s, flags=re.I) for s, n in named]
        for sequence in dict.fromkeys("\n".join(sequences).split("\n")):
            if sequence.strip():  # a blank sequence would stop at every newline
                sequence = "\n" + sequence if t.wrap else sequence
                out.append(_fill(sequence, user=user, char=char) if t.macro else sequence)
    if context.use_stop_strings:
        for mark in (context.chat_start, context.example_separator):
            out += ["\n" + _fill(mark, user=user, char=char)] if mark else []
    return tuple(dict.fromkeys(stop for stop in out if stop))


def _story_string(
    story: StoryFields,
    examples: tuple[str, str],
    context: ContextTemplate,
    t: InstructTemplate | None,
    *,
    user: str,
    char: str,
) -> tuple[str, str, str]:
    """renderStoryString and formatInstructModeStoryString: (anchor before, story string, anchor after)."""
    new_style = t is not None and bool(t.story_string_prefix or t.story_string_suffix)
    sep = "\n" if t is not None and t.wrap else ""
    system = story.system
    if t is not None and not new_style and system:  # 1.12's formatInstructModeSystemPrompt
        prefix = re.sub(r"\{\{name\}\}", "System", t.system_sequence_prefix, flags=re.I)
        system = (
            (prefix + sep if prefix else "")
            + system
            + (sep + t.system_sequence_suffix if t.system_sequence_suffix else "")
        )
    before, after = story.anchor_before.strip(), story.anchor_after.strip()
    params = {"system": system, "description": story.description, "personality": story.personality}
    params |= {"scenario": story.scenario, "persona": story.persona, "char": char, "user": user}
    params |= {"wiBefore": story.wi_before, "loreBefore": story.wi_before, "wiAfter": story.wi_after}
    params |= {"loreAfter": story.wi_after, "anchorBefore": before, "anchorAfter": after}
    params |= {"mesExamples": examples[0], "mesExamplesRaw": examples[1]}
    text = render_story_string(context.story_string, params)
    in_chat = context.story_string_position == IN_CHAT
    # 1.12 left the newline out for an instruct template without wrap; current files always add it.
    if text and not text.endswith("\n") and not in_chat and (t is None or t.wrap or new_style):
        text += "\n"
    if t is not None and text and not in_chat:
        if t.story_string_prefix:
            text = _fill(t.story_string_prefix, user=user, char=char, name="System") + sep + text
        text += _fill(t.story_string_suffix, user=user, char=char)
    outside_before = f"{before}\n" if before and "anchorBefore" not in context.story_string else ""
    outside_after = f"\n{after}\n" if after and "anchorAfter" not in context.story_string else ""
    return outside_before, text, outside_after


def render_text_prompt(
    story: StoryFields,
    examples: list[list[Line]],
    history: list[Line],
    *,
    context: ContextTemplate,
    instruct: InstructTemplate | None,
    char: str,
    user: str,
    continue_last: bool = False,
    impersonate: bool = False,
    group: bool = False,
) -> RawPrompt:
    """The raw prompt SillyTavern would send for `char`'s next reply (or the user's, impersonating), and
    its stop strings. `history` is oldest first, depth injections already placed. In a `group`, "force"
    names every speaker, the reply's own line included (SillyTavern forces names in group chats)."""
    if continue_last and impersonate:
        raise ValueError("continue_last and impersonate are exclusive")
    if group and instruct is not None and instruct.names_behavior == "force":
        instruct = dataclasses.replace(instruct, names_behavior="always")
    t = instruct if instruct is not None and _has_turn_markers(instruct) else None
    separator = _fill(context.example_separator, user=user, char=char)
    heading = separator + "\n" if separator else ""
    raw_examples = _raw_examples(examples, heading or ("<START>\n" if t else ""), user=user, char=char)
    shown = _instruct_examples(t, examples, heading, user=user, char=char) if t else raw_examples
    before, story_text, after = _story_string(
        story, ("".join(shown), "".join(raw_examples)), context, t, user=user, char=char
    )

    lines = list(history)
    if context.story_string_position == IN_CHAT and story_text.strip():
        depth = max(context.story_string_depth, 1 if continue_last else 0)
        role = ("system", "user", "assistant")[context.story_string_role % 3]
        name = {"system": "", "user": user, "assistant": char}[role]
        lines.insert(max(len(lines) - depth, 0), Line(role, name, story_text.strip(), is_injection=True))
        story_text = ""
    continuing = continue_last and bool(lines)
    last_user = max((j for j, line in enumerate(lines) if line.role == "user"), default=-1)
    items: list[str] = []
    for j, line in enumerate(lines):
        if t is None:
            text = _plain_line(line)
        else:
            force = (
                _LAST if j == last_user or (continuing and j == len(lines) - 1) else (_FIRST if j == 0 else 0)
            )
            text = _instruct_line(t, line, force, user=user, char=char)
        if continuing and j == len(lines) - 1:  # leave the message open: no suffix after its text
            text = text[: text.rfind(line.content) + len(line.content)]
        items.append(text)
    continued = items.pop() if continuing else ""

    alignment = ""
    remaining = lines[:-1] if continuing and len(lines) > 1 else lines
    if t is not None and t.user_alignment_message and (not remaining or remaining[0].role != "user"):
        alignment = _instruct_line(
            t, Line("user", user, t.user_alignment_message), _FIRST, user=user, char=char
        )
    last_line = ""
    if not continuing:
        items = items or [""]
        if t is None or t.wrap:  # the reply's own line brings the newline back
            items[-1] = items[-1].removesuffix("\n")
        if t is not None:
            last_line = _instruct_prompt_line(
                t, user if impersonate else char, impersonate=impersonate, user=user, char=char
            )
        elif impersonate or context.always_force_name2:
            last_line = ("" if items[-1].endswith("\n") else "\n") + f"{user if impersonate else char}:"
    chat_start = _fill(context.chat_start, user=user, char=char) + "\n" if context.chat_start else ""
    text = (
        before
        + story_text
        + after
        + "".join(shown)
        + chat_start
        + alignment
        + "".join(items)
        + last_line
        + continued
    )
    continue_on_user = continuing and lines[-1].role == "user"
    stop = _stop_strings(
        context, instruct, user=user, char=char, impersonate=impersonate, continue_on_user=continue_on_user
    )
    return RawPrompt(text.replace("\r", ""), stop)

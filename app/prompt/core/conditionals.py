"""Conditional prompt blocks, the first step of macro expansion with a context (app/prompt/core/macros.py
calls this; it is part of the one engine, kept in its own module for size), and the ToolView they read.

`{{if capability:NAME}}…{{else}}…{{/if}}`, `{{if tool:function_name}}`, `{{if tool_family:url_fetch}}`;
`!` negates; blocks nest, each with at most one `{{else}}`; no and/or. As TomoriBot's tests have it:
- an unknown name is false even when negated (`{{if !capability:not_real}}` takes the else branch);
- a malformed block ({{else extra}}, two {{else}}, a condition that does not parse) is left out, the
  text around it kept; an unclosed one drops everything from its opening tag on;
- a block that renders nothing takes one blank-line separator with it, so a paragraph switched off
  leaves no empty paragraph; a chosen branch keeps its whitespace exactly;
- Handlebars blocks (`{{#if x}}…{{/if}}` in story strings) are left as written, their own
  `{{else}}` and `{{/if}}` included;
- a tag inside a `{{// comment}}` is not read (the comment is removed later, as it always was).

One left-to-right pass; output is at most the input. A closed block's output is appended to its
parent as a list, never copied, so any nesting depth stays linear.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

# {{if capability:NAME}}: the names a ToolView's capabilities answer for ...
CAPABILITIES = frozenset(
    {
        "tool_use",
        "self_teaching",  # the memory permission
        "personal_memories",
        "short_term_memory",
        "tasks",
        "documents",
        "metadata",
        "web_search",
        "url_fetch",
        "manage_message",
        "time_awareness",
    }
)
# ... and TomoriBot's Discord-only or media ones, which Sugo leaves out: always false (and known, so a
# prompt written for TomoriBot can say {{if !capability:image_generation}}…).
LEFT_OUT_CAPABILITIES = frozenset(
    {
        "emoji_usage",
        "sticker_usage",
        "thread_creation",
        "image_generation",
        "video_generation",
        "voice_message",
        "user_blocking",
    }
)
# {{if tool_family:NAME}}: the registry's families (a family the view holds is known too).
TOOL_FAMILIES = frozenset(
    {
        "memory",
        "short_term_memory",
        "task",
        "document",
        "metadata",
        "manage_message",
        "web_search",
        "url_fetch",
        "capabilities",
        "user_info",
        "mcp",
    }
)


@dataclass(frozen=True)
class ToolView:
    """What the turn's tools look like to a prompt: read by {{if tool:…}}, {{if tool_family:…}},
    {{if capability:…}} and the {…_tool} macros. Built per turn by the caller (see `tool_view`)."""

    names: frozenset[str] = frozenset()  # function names declared this turn (after Deliberate Tool Mode)
    families: frozenset[str] = frozenset()  # their families: memory, task, web_search, url_fetch, mcp…
    # "memory_tool" -> "create_long_term_memory", for declared tools only (an MCP replacement included)
    macros: Mapping[str, str] = field(default_factory=dict)
    # CAPABILITIES -> on/off: tool_use, self_teaching (the memory permission), web_search…
    capabilities: Mapping[str, bool] = field(default_factory=dict)


class ToolLike(Protocol):
    """The part of app.tools.registry.Tool a ToolView is made from (the pure core cannot import it)."""

    @property
    def name(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def macro(self) -> str | None: ...
    @property
    def source(self) -> str: ...


def tool_view(declared: Iterable[ToolLike], *, capabilities: Mapping[str, bool]) -> ToolView:
    """The view of the tools a turn declares. When a built-in tool and an MCP server's replacement
    both claim a macro ({web_search_tool}), the replacement names it: the owner added that server to
    take the built-in one's place."""
    declared = list(declared)
    macros: dict[str, str] = {}
    replaced: set[str] = set()
    for tool in declared:
        if not tool.macro:
            continue
        if tool.source != "built-in" and tool.macro not in replaced:
            macros[tool.macro] = tool.name
            replaced.add(tool.macro)
        elif tool.macro not in macros:
            macros[tool.macro] = tool.name
    return ToolView(
        names=frozenset(t.name for t in declared),
        families=frozenset(t.family for t in declared if t.family),
        macros=macros,
        capabilities=dict(capabilities),
    )


@dataclass
class _Pass:
    """What one rendering carries: the view, its names lower-cased once, where warnings go."""

    view: ToolView | None
    warn: Callable[[str], None]
    _tool_names: frozenset[str] | None = None

    @property
    def tool_names(self) -> frozenset[str]:
        if self._tool_names is None:
            names = self.view.names if self.view is not None else ()
            self._tool_names = frozenset(n.lower() for n in names)
        return self._tool_names


# Conditional blocks. The tags are ours ({{if …}}, {{else}}, {{/if}}) or Handlebars' ({{#if}},
# {{#unless}}, {{#each}}, {{#with}} and their closers), which are only tracked so their {{/if}} and
# {{else}} are not taken for ours. [^{}]*? stops at the next brace, so each scan ends where the next
# "{{" starts and the pass stays linear.
_DIRECTIVE = re.compile(r"\{\{\s*([#/]?)(if|else|unless|each|with)\b([^{}]*?)\}\}", re.IGNORECASE)
_COMMENT_OPEN = re.compile(r"\{\{(?!\{)(?=\s*//)")
_BRACES = re.compile(r"\{\{(?!\{)|\}\}")
_CONDITION = re.compile(r"(!)?(capability|tool|tool_family):([a-z0-9][a-z0-9_.-]*)", re.IGNORECASE)
_LEADING_BLANK_LINE = re.compile(r"[^\S\n]*\n[^\S\n]*\n")


@dataclass
class _Frame:
    """One open block while the conditional pass reads a text."""

    emitting: bool  # whether text here reaches the output (so far: a later problem can still drop it)
    parent_emitting: bool = True
    legacy: str = ""  # "if", "each"… for a Handlebars block, whose tags stay in the text
    opener: str = ""  # the opening tag as written
    condition: str = ""  # as written, for warnings
    value: bool = False
    in_else: bool = False
    malformed: bool = False
    # What the block renders: strings, and the lists of blocks closed inside it (appended, not copied,
    # so deep nesting costs no more than flat text).
    out: list = field(default_factory=list)
    length: int = 0
    trailing_newlines: int = 0  # in the whitespace that ends `out`
    solid: bool = False  # `out` holds a character that is not whitespace
    drop_blank_line: bool = False  # a block here just rendered nothing after a blank line


def _put(frame: _Frame, text: str) -> None:
    if not text or not frame.emitting:
        return
    if frame.drop_blank_line:
        # The emptied block sat between two blank-line separators: one of them goes with it.
        frame.drop_blank_line = False
        m = _LEADING_BLANK_LINE.match(text)
        if m:
            text = text[m.end() :]
            if not text:
                return
    frame.out.append(text)
    _grow(frame, len(text), text)


def _grow(frame: _Frame, length: int, text: str | None, trailing: int = 0, solid: bool = False) -> None:
    """Keep `frame`'s length and trailing-whitespace count after appending `text` (or a closed
    block of `length` characters whose own counts are `trailing` and `solid`)."""
    frame.length += length
    if text is not None:
        body = text.rstrip()
        trailing, solid = text.count("\n", len(body)), bool(body)
    if solid:
        frame.trailing_newlines, frame.solid = trailing, True
    else:
        frame.trailing_newlines += trailing


def render_conditionals(text: str, view: ToolView | None, *, warn: Callable[[str], None]) -> str:
    """Evaluate the conditional blocks in one left-to-right pass; the rest of the text is untouched
    (comments included: a tag inside {{// …}} is not read)."""
    if "{{" not in text or not _DIRECTIVE.search(text):
        return text
    ctx = _Pass(view, warn)
    root = _Frame(emitting=True)
    stack = [root]
    pos = 0
    m = _DIRECTIVE.search(text)
    while pos < len(text):
        if m is not None and m.start() < pos:  # it was inside a comment
            m = _DIRECTIVE.search(text, pos)
        # Each stretch is searched once: for a comment up to the next tag, for a tag from past the
        # last comment, so many comments before one late tag stay linear.
        c = _COMMENT_OPEN.search(text, pos, m.start() if m else len(text))
        if c is not None:
            end = _comment_end(text, c.start())
            _put(stack[-1], text[pos:end])
            pos = end
            continue
        if m is None:
            break
        _put(stack[-1], text[pos : m.start()])
        pos = m.end()
        _directive(m, stack, ctx)
    _put(stack[-1], text[pos:])
    while len(stack) > 1:
        frame = stack.pop()
        if frame.legacy:  # not ours: it stays as written
            _close_legacy(frame, stack[-1], "")
        elif frame.parent_emitting:
            ctx.warn(f"Left out an unclosed conditional block: {_shown(frame.opener)}")
    return _flatten(root.out)


def _comment_end(text: str, start: int) -> int:
    """Where the {{// …}} starting at `start` ends (nested "{{…}}" counted), or the end of the text."""
    depth = 0
    for m in _BRACES.finditer(text, start):
        depth += 1 if m.group() == "{{" else -1
        if not depth:
            return m.end()
    return len(text)


def _directive(m: re.Match[str], stack: list[_Frame], ctx: _Pass) -> None:
    top = stack[-1]
    tag = m.group()
    prefix, word, rest = m.group(1), m.group(2).lower(), m.group(3).strip()
    if prefix == "#" and word != "else":
        stack.append(_Frame(emitting=top.emitting, parent_emitting=top.emitting, legacy=word, opener=tag))
    elif prefix == "/" and top.legacy and word == top.legacy:
        stack.pop()
        _close_legacy(top, stack[-1], tag)
    elif prefix == "/" and word == "if" and not top.legacy:
        if len(stack) == 1:
            ctx.warn("Left out an {{/if}} without its {{if}}")
            return
        stack.pop()
        parent = stack[-1]
        if rest or top.malformed:
            if parent.emitting:
                ctx.warn(f"Left out a malformed conditional block: {_shown(top.opener)}")
            length = 0
        else:
            length = top.length
            if length and parent.emitting:
                parent.out.append(top.out)
                _grow(parent, length, None, top.trailing_newlines, top.solid)
        if parent.emitting:
            parent.drop_blank_line = not length and parent.trailing_newlines >= 2
    elif not prefix and word == "if":
        _open(tag, rest, stack, ctx)
    elif not prefix and word == "else" and not top.legacy:
        if len(stack) == 1:
            ctx.warn("Left out an {{else}} without its {{if}}")
        elif rest or top.in_else:
            top.malformed, top.emitting = True, False
        else:
            top.in_else = True
            top.emitting = top.parent_emitting and not top.malformed and not top.value
    else:  # {{unless}}, {{#else}}, an {{else}} or a stray closer inside a Handlebars block: text
        _put(top, tag)


def _open(tag: str, condition: str, stack: list[_Frame], ctx: _Pass) -> None:
    top = stack[-1]
    m = _CONDITION.fullmatch(condition)
    frame = _Frame(emitting=False, parent_emitting=top.emitting, opener=tag, condition=condition)
    if m is None:
        frame.malformed = True
    elif top.emitting:  # a condition in a branch that is left out is never read
        negated, namespace, name = bool(m.group(1)), m.group(2).lower(), m.group(3).lower()
        known = _predicate(namespace, name, ctx)
        if known is None:
            ctx.warn(f"Unknown prompt condition: {_shown(condition)}")
        frame.value = False if known is None else known != negated
        frame.emitting = frame.value
    stack.append(frame)


def _predicate(namespace: str, name: str, ctx: _Pass) -> bool | None:
    """The truth of capability:/tool:/tool_family: NAME, or None when the name is unknown."""
    view = ctx.view
    if namespace == "tool":
        return name in ctx.tool_names
    if namespace == "tool_family":
        families = view.families if view is not None else frozenset()
        return name in families if name in TOOL_FAMILIES or name in families else None
    capabilities = view.capabilities if view is not None else {}
    if name in LEFT_OUT_CAPABILITIES:
        return False
    if name in CAPABILITIES or name in capabilities:
        return bool(capabilities.get(name, False))
    return None


def _close_legacy(frame: _Frame, parent: _Frame, closer: str) -> None:
    _put(parent, frame.opener)
    if frame.length and parent.emitting:
        parent.out.append(frame.out)
        _grow(parent, frame.length, None, frame.trailing_newlines, frame.solid)
    _put(parent, closer)


def _shown(tag: str) -> str:
    """A tag as a warning quotes it: a card's hostile 100 kB condition is not copied into the log."""
    return tag if len(tag) <= 80 else tag[:79] + "…"


def _flatten(pieces: list) -> str:
    """The strings of nested lists in order, without recursion (nesting can be as deep as the text)."""
    out: list[str] = []
    stack = [iter(pieces)]
    while stack:
        for piece in stack[-1]:
            if isinstance(piece, list):
                stack.append(iter(piece))
                break
            out.append(piece)
        else:
            stack.pop()
    return "".join(out)

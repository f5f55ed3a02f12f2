"""Macro expansion for card fields, prompts, lore entries and messages.

Without a MacroContext this knows only {{char}} and {{user}} (and their SillyTavern V1 spellings
<BOT>/<CHAR>/<USER>), case-insensitively: the renderer and the prompt builder call it that way and must
not start rolling dice. With a context it follows SillyTavern's macro set: {{random}}, {{pick}}, {{roll}},
{{time}}, {{date}}, {{setvar}}/{{getvar}}/{{addvar}} on the chat's variables, and {{// comments}}.

With a context it also reads the turn's tools (`MacroContext.tools`, a ToolView):
- conditional blocks, evaluated first, before any other macro: `{{if capability:NAME}}…{{else}}…{{/if}}`,
  `{{if tool:function_name}}`, `{{if tool_family:url_fetch}}`, `!` to negate, nesting, one `{{else}}`
  per block, no and/or. TomoriBot's rules: an unknown name is false even when negated; a malformed
  block is left out with the text around it kept; an unclosed one drops everything from its opening
  tag on; a block that renders nothing takes one blank-line separator with it; a chosen branch keeps
  its whitespace exactly; Handlebars' `{{#if x}}…{{/if}}` (story strings) is left as written.
- tool macros in single braces, `{memory_tool}`, `{web_search_tool}`…: the function name this turn
  declares (an MCP replacement included), or calm words when that tool is not there, so a prompt
  never names a function the model was not given.
Chat messages, model output and tool results are expanded without a context, so none of this runs
in them: they stay literal.

Names are case-insensitive. Nested macros expand inside-out, once: a macro's output is never scanned
again, so a variable holding "{{user}}" prints that literally. Macros run left to right, so a {{getvar}}
sees a {{setvar}} earlier in the same text. Unknown or malformed macros stay as written.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, localcontext

from app.prompt.core.conditionals import ToolView, render_conditionals, tool_view

__all__ = ["MacroContext", "ToolView", "expand_macros", "generation_seed", "tool_view"]

log = logging.getLogger(__name__)


def generation_seed(chat_id: int, message_id: int | None, swipe_index: int) -> int:
    """One seed per reply version, for dice, {{random}} and lorebook probability: the same swipe
    rolls the same, another swipe rolls anew."""
    digest = hashlib.sha256(f"{chat_id}:{message_id}:{swipe_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


_MACRO = re.compile(r"\{\{\s*(char|user)\s*\}\}|<(BOT|CHAR|USER)>", re.IGNORECASE)

# Cards and lorebooks are other people's uploads, so expansion must stay cheap on hostile text.
MAX_DEPTH = 16  # deeper nesting stays text: every character is copied once per level it sits in
MAX_EXPANSION_CHARS = 1_000_000  # macro output per call; past it macros stay as written ({{getvar}} x 1e5)
# A longer variable value is refused, so {{addvar::x::{{getvar::x}}}} cannot double forever.
MAX_VALUE_CHARS = 100_000
MAX_DICE = 100
MAX_SIDES = 1_000_000

# The tool macros, and the words a prompt reads when that tool is not declared this turn (calm, and
# naming no function, so the model is never pointed at a tool it was not given).
TOOL_MACROS: dict[str, str] = {
    "memory_tool": "long-term memory (not available now)",
    "memory_update_tool": "changing long-term memories (not available now)",
    "short_term_memory_tool": "short-term memory (not available now)",
    "task_tool": "reminders (not available now)",
    "task_update_tool": "changing reminders (not available now)",
    "document_tool": "reading attached documents (not available now)",
    "message_metadata_tool": "message times and ids (not available now)",
    "manage_message_tool": "editing messages (not available now)",
    "web_search_tool": "a web search (not available now)",
    "url_fetch_tool": "reading web pages (not available now)",
    "capabilities_tool": "a capabilities check (not available now)",
}
# TomoriBot's older names, kept so prompts written for it still work.
TOOL_MACRO_ALIASES = {"pin_tool": "manage_message_tool", "timestamp_refresh_tool": "message_metadata_tool"}
# Distinct unknown-condition warnings logged per MacroContext; past it they go to debug only.
MAX_CONDITION_WARNINGS = 20

# "{{" followed by another "{" is not an opener, so "{{{user}}}" reads as "{" + {{user}} + "}". The
# single-brace tool macros are matched by their known names only, so JSON-looking text and any other
# {word} stay exactly as they were.
_TOOL_MACRO_NAMES = "|".join(sorted((*TOOL_MACROS, *TOOL_MACRO_ALIASES), key=len, reverse=True))
_TOKEN = re.compile(r"\{\{(?!\{)|\}\}|<(?:BOT|CHAR|USER)>|\{(?:" + _TOOL_MACRO_NAMES + r")\}", re.IGNORECASE)
_COMMENT = re.compile(r"\s*//")
_HEAD = re.compile(r"\s*([A-Za-z]+)")
_UNESCAPED_COMMA = re.compile(r"(?<!\\),")
_DICE = re.compile(r"([0-9]*)d([0-9]+)([+-][0-9]+)?")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@dataclass
class MacroContext:
    """Per-chat state for the macros beyond {{char}} and {{user}}."""

    variables: dict[str, str]  # the chat's own, changed in place by setvar/addvar; the caller saves them
    pick_seed: str = ""  # e.g. the chat id: {{pick}} repeats its choice for the same seed, text and place
    random_seed: int | None = None  # fixes {{random}} and {{roll}} for tests and reproducible swipes
    now: datetime | None = None  # for {{time}} and {{date}}; None reads the local clock
    # The turn's tools for conditional blocks and tool macros. None (no tool information at all, e.g. a
    # connection without tools): every tool:/tool_family: condition is false, every known capability
    # false, every {…_tool} reads as its "not available" words.
    tools: ToolView | None = None
    # Problems with conditional blocks met while expanding with this context (unknown names, malformed
    # or unclosed blocks), for Peek Prompt. Each is logged once per context (a context lives for one
    # prompt build), at warning, and again only at debug: a module-level "seen" set would be hidden
    # process state, and a card with a typo must not fill the log on every turn's every field.
    condition_warnings: set[str] = field(default_factory=set)


def expand_macros(text: str, *, char: str, user: str, context: MacroContext | None = None) -> str:
    if not text or ("{" not in text and "<" not in text):
        return text
    if context is None:

        def sub(m: re.Match[str]) -> str:
            name = (m.group(1) or m.group(2)).lower()
            return user if name == "user" else char

        return _MACRO.sub(sub, text)
    run = _Run(context, char, user)
    if "{{" in text:
        text = render_conditionals(text, context.tools, warn=lambda message: _warn(context, message))
    return _expand(text, run)


@dataclass
class _Run:
    """What one expansion call carries between macros."""

    ctx: MacroContext
    char: str
    user: str
    budget: int = MAX_EXPANSION_CHARS
    picks_seen: dict[str, int] = field(default_factory=dict)  # raw pick text -> occurrences so far
    now: datetime | None = None  # read once so {{time}} and {{date}} agree within a text
    _rng: random.Random | None = None

    @property
    def rng(self) -> random.Random:
        """Seeded on first use: most texts ({{char}} in a lorebook entry) roll nothing, and seeding
        costs more than their expansion."""
        if self._rng is None:
            self._rng = random.Random(self.ctx.random_seed)
        return self._rng


def _expand(text: str, run: _Run) -> str:
    """One left-to-right pass over the tokens; each open macro collects its (already expanded) body."""
    out: list[str] = []
    stack: list[tuple[int, list[str]]] = []  # open macros: where each starts, its body so far
    overflow = 0  # openers past MAX_DEPTH, kept as text; their closers must be kept too
    comment_at, comment_depth = 0, 0  # inside {{// ...}} nothing runs, so a commented-out setvar stays off
    pos = 0
    for m in _TOKEN.finditer(text):
        token = m.group()
        if comment_depth:
            comment_depth += 1 if token == "{{" else -1 if token == "}}" else 0
            if not comment_depth:
                pos = m.end()
            continue
        parts = stack[-1][1] if stack else out
        parts.append(text[pos : m.start()])
        pos = m.end()
        if token == "{{":
            if _COMMENT.match(text, m.end()):
                comment_at, comment_depth = m.start(), 1
            elif len(stack) < MAX_DEPTH:
                stack.append((m.start(), []))
            else:
                overflow += 1
                parts.append(token)
        elif token == "}}":
            if overflow:
                overflow -= 1
                parts.append(token)
            elif stack:
                start, inner = stack.pop()
                body = "".join(inner)
                value = _spend(run, _evaluate(body, text[start : m.end()], run))
                (stack[-1][1] if stack else out).append("{{" + body + "}}" if value is None else value)
            else:
                parts.append(token)
        elif token[0] == "{":
            value = _spend(run, _tool_macro(token[1:-1], run.ctx.tools))
            parts.append(token if value is None else value)
        else:
            value = _spend(run, run.user if token[1] in "uU" else run.char)
            parts.append(token if value is None else value)
    parts = stack[-1][1] if stack else out
    parts.append(text[comment_at:] if comment_depth else text[pos:])  # an unclosed comment is just text
    while stack:  # so are unclosed macros
        _, inner = stack.pop()
        (stack[-1][1] if stack else out).append("{{" + "".join(inner))
    return "".join(out)


def _tool_macro(name: str, view: ToolView | None) -> str | None:
    name = name.lower()
    name = TOOL_MACRO_ALIASES.get(name, name)
    if name not in TOOL_MACROS:
        return None
    declared = view.macros.get(name) if view is not None else None
    return declared or TOOL_MACROS[name]


def _warn(ctx: MacroContext, message: str) -> None:
    seen = ctx.condition_warnings
    if message in seen or len(seen) >= MAX_CONDITION_WARNINGS:
        log.debug("%s", message)
        return
    seen.add(message)
    log.warning("%s", message)


def _spend(run: _Run, value: str | None) -> str | None:
    if value is None or len(value) > run.budget:
        return None
    run.budget -= len(value)
    return value


def _evaluate(body: str, raw: str, run: _Run) -> str | None:
    """The expansion of one macro whose nested macros are already expanded; None leaves it as written."""
    head = _HEAD.match(body)
    if head is None:
        return None
    name, rest = head.group(1).lower(), body[head.end() :]
    if name in ("char", "user", "time", "date"):
        if rest.strip():
            return None
        if name in ("char", "user"):
            return run.char if name == "char" else run.user
        if run.now is None:
            run.now = run.ctx.now or datetime.now().astimezone()
        return _time(run.now) if name == "time" else _date(run.now)
    if name in ("random", "pick"):
        options = _options(rest)
        if options is None:
            return None
        if name == "random":
            return run.rng.choice(options)
        return options[_pick_index(run, raw, len(options))]
    if name == "roll":
        return _roll(rest, run.rng)
    if name in ("setvar", "getvar", "addvar"):
        return _variable(name, rest, run.ctx.variables)
    return None


def _time(now: datetime) -> str:
    return f"{now.hour % 12 or 12}:{now.minute:02d} {'AM' if now.hour < 12 else 'PM'}"  # "3:07 PM"


def _date(now: datetime) -> str:
    return f"{_MONTHS[now.month - 1]} {now.day}, {now.year}"  # "November 30, 2026"


def _options(rest: str) -> list[str] | None:
    """SillyTavern's list rule: split on "::" if there is one, else on commas ("\\," escapes one)."""
    rest = rest.lstrip()
    if not rest.startswith(":"):
        return None
    listing = rest[2:] if rest.startswith("::") else rest[1:]
    if not listing:
        return None
    if "::" in listing:
        return listing.split("::")  # kept verbatim, as SillyTavern does
    return [item.strip().replace("\\,", ",") for item in _UNESCAPED_COMMA.split(listing)]


def _pick_index(run: _Run, raw: str, count: int) -> int:
    # Seeded by the macro's own source and how many identical picks came before it, not by its offset,
    # so editing other parts of the text does not reshuffle earlier choices.
    nth = run.picks_seen.get(raw, 0)
    run.picks_seen[raw] = nth + 1
    key = f"{run.ctx.pick_seed}\x1f{raw}\x1f{nth}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % count


def _roll(rest: str, rng: random.Random) -> str | None:
    """{{roll:1d6}}, {{roll:d20}}, {{roll:2d6+3}}, {{roll:20}} (= 1d20); also "::" or a space before it."""
    if rest.startswith("::"):
        rest = rest[2:]
    elif rest[:1] == ":" or rest[:1].isspace():
        rest = rest[1:]
    else:
        return None
    formula = "".join(rest.split()).lower()
    if len(formula) > 32:  # keeps int() of the parts cheap
        return None
    if formula.isascii() and formula.isdigit():
        formula = "1d" + formula
    m = _DICE.fullmatch(formula)
    if m is None:
        return None
    dice, sides, modifier = int(m.group(1) or 1), int(m.group(2)), int(m.group(3) or 0)
    if not (1 <= dice <= MAX_DICE and 1 <= sides <= MAX_SIDES):
        return None
    return str(sum(rng.randint(1, sides) for _ in range(dice)) + modifier)


def _variable(name: str, rest: str, variables: dict[str, str]) -> str | None:
    if not rest.startswith("::"):
        return None
    if name == "getvar":
        key = rest[2:].strip()
        return variables.get(key, "") if key else None
    key, sep, value = rest[2:].partition("::")
    key = key.strip()
    if not key or not sep:
        return None
    if name == "addvar":
        value = _add(variables.get(key, ""), value)
    if len(value) > MAX_VALUE_CHARS:
        return None
    variables[key] = value
    return ""


def _add(current: str, value: str) -> str:
    # SillyTavern: a missing or empty variable counts as 0; two numbers add, anything else appends as text.
    a, b = _number(current or "0"), _number(value)
    if a is None or b is None:
        return current + value
    with localcontext() as exact:
        exact.prec = 200  # both sides have at most 64 characters, so the sum is exact
        total = a + b
    if total == total.to_integral_value():
        return str(int(total))
    return format(total.normalize(), "f")  # Decimal keeps 0.1 + 0.2 at "0.3"


def _number(text: str) -> Decimal | None:
    text = text.strip()
    if len(text) > 64 or not _NUMBER.fullmatch(text):
        return None
    return Decimal(text)

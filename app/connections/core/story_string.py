"""The story string of a SillyTavern context template, rendered as SillyTavern renders it: the subset of
Handlebars its templates use, then its {{trim}} rule.

Rules read from SillyTavern's source (public/scripts/power-user.js `renderStoryString`,
public/scripts/macros.js, and Handlebars' own whitespace control), not remembered:
- `{{#if x}}…{{else}}…{{/if}}` and `{{#unless x}}…{{/unless}}` nest; `{{else if y}}` chains. A name
  is true when its value is a non-empty string (Handlebars' truth for strings); an unknown name is false.
- `{{x}}` and `{{{x}}}` print a parameter, unescaped (SillyTavern compiles with `noEscape`). An unknown
  `{{name}}` stays as written: SillyTavern hands it to its macro engine, and Sugo's engine runs around
  this one. `{{! comments }}` and `{{!-- comments --}}` print nothing.
- Handlebars' whitespace rules: a block tag or comment alone on its line takes that line's indent and
  newline with it (a "standalone" tag); `{{~` and `~}}` strip all whitespace on their side.
- `{{trim}}` is kept through the template (macros.js registers it as a helper returning itself) and then
  removed with the newlines around it: `/(?:\\r?\\n)*{{trim}}(?:\\r?\\n)*/gi` → ''.
- Leading newlines are removed. Adding the final newline depends on the instruct template, so the caller
  does it (app/connections/core/raw_prompt.py).
Other Handlebars (`{{#each}}`, paths, partials) is left as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["StoryStringError", "check_story_string", "render_story_string"]

_TAG = re.compile(
    r"\{\{(?P<ls>~?)(?:!--.*?--|!(?:[^}]|\}(?!\}))*?|\{(?P<triple>[^{}]*)\}|(?P<body>[^{}]*?))(?P<rs>~?)\}\}",
    re.S,
)
_BLOCK = re.compile(r"#(if|unless)\s+(\S+)$")
_ELSE = re.compile(r"(?:else|\^)(?:\s+if\s+(\S+))?$")
_CLOSE = re.compile(r"/(if|unless)$")
_TRIM = re.compile(r"(?:\r?\n)*\{\{trim\}\}(?:\r?\n)*", re.I)


class StoryStringError(ValueError):
    """The story string's blocks do not pair up; the message says where, for a user to read."""


@dataclass
class _Token:
    kind: str  # text | var | open | else | close | comment
    value: str  # text: the text now; var: the name; open: the tested name; close: "if"/"unless"
    raw: str  # as written, for unknown names
    original: str = ""  # text before any stripping: Handlebars tests standalone lines on it
    helper: str = ""  # open: "if"/"unless"; else: "if" for `{{else if x}}`
    strip_left: bool = False  # `{{~`
    strip_right: bool = False  # `~}}`
    left_stripped: bool = False
    right_stripped: bool = False


def _tokens(template: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    for match in _TAG.finditer(template):
        if match.start() > pos:
            text = template[pos : match.start()]
            out.append(_Token("text", text, text, text))
        pos = match.end()
        raw, ls, rs = match.group(0), bool(match.group("ls")), bool(match.group("rs"))
        body = match.group("body")
        triple = match.group("triple")
        if triple is not None:
            out.append(_Token("var", triple.strip(), raw, strip_left=ls, strip_right=rs))
            continue
        if body is None:
            out.append(_Token("comment", "", raw, strip_left=ls, strip_right=rs))
            continue
        body = body.strip()
        if block := _BLOCK.match(body):
            out.append(_Token("open", block[2], raw, helper=block[1], strip_left=ls, strip_right=rs))
        elif other := _ELSE.match(body):
            chained = other[1] or ""
            out.append(
                _Token("else", chained, raw, helper="if" if chained else "", strip_left=ls, strip_right=rs)
            )
        elif close := _CLOSE.match(body):
            out.append(_Token("close", close[1], raw, strip_left=ls, strip_right=rs))
        else:
            out.append(_Token("var", body, raw, strip_left=ls, strip_right=rs))
    if pos < len(template):
        out.append(_Token("text", template[pos:], template[pos:], template[pos:]))
    return out


def _strip_next(tokens: list[_Token], i: int, *, everything: bool) -> None:
    # Handlebars' omitRight: the text after a tag loses its leading whitespace (all of it for `~`,
    # else the rest of the line and its newline), once.
    if i + 1 < len(tokens) and tokens[i + 1].kind == "text":
        nxt = tokens[i + 1]
        if not everything and nxt.right_stripped:
            return
        before = nxt.value
        nxt.value = re.sub(r"^\s+" if everything else r"^[ \t]*\r?\n?", "", nxt.value)
        nxt.right_stripped = nxt.value != before


def _strip_previous(tokens: list[_Token], i: int, *, everything: bool) -> None:
    # Handlebars' omitLeft: the text before a tag loses its trailing whitespace (the line's indent).
    if i > 0 and tokens[i - 1].kind == "text":
        prev = tokens[i - 1]
        if not everything and prev.left_stripped:
            return
        before = prev.value
        prev.value = re.sub(r"\s+$" if everything else r"[ \t]+$", "", prev.value)
        prev.left_stripped = prev.value != before


def _control_whitespace(tokens: list[_Token]) -> None:
    last = len(tokens) - 1
    for i, token in enumerate(tokens):
        if token.kind == "text":
            continue
        if token.strip_right:
            _strip_next(tokens, i, everything=True)
        if token.strip_left:
            _strip_previous(tokens, i, everything=True)
        if token.kind == "var":
            continue  # a printed value is never a standalone line
        prev = tokens[i - 1] if i > 0 else None
        nxt = tokens[i + 1] if i < last else None
        # At the template's very start or end the line needs no newline to be whole.
        prev_ok = prev is None or (
            prev.kind == "text" and bool(re.search(r"\n\s*$" if i > 1 else r"(^|\n)\s*$", prev.original))
        )
        next_ok = nxt is None or (
            nxt.kind == "text"
            and bool(re.match(r"[ \t]*\r?\n" if i + 1 < last else r"[ \t]*(\r?\n|$)", nxt.original))
        )
        if prev_ok and next_ok:
            _strip_next(tokens, i, everything=False)
            _strip_previous(tokens, i, everything=False)


def _parse(tokens: list[_Token], i: int, closing: str | None) -> tuple[list, int]:
    """Nodes up to the `{{/closing}}` or `{{else}}` that ends this body: (nodes, index of that tag)."""
    nodes: list = []
    while i < len(tokens):
        token = tokens[i]
        if token.kind in ("else", "close"):
            if closing is None:
                raise StoryStringError(f"The story string has {token.raw} without a {{{{#if}}}} before it.")
            if token.kind == "close" and token.value != closing:
                raise StoryStringError(f"The story string closes {{{{#{closing}}}}} with {token.raw}.")
            return nodes, i
        if token.kind == "open":
            block, i = _parse_block(tokens, i, token.helper)
            nodes.append(block)
            continue
        nodes.append(token)
        i += 1
    if closing is not None:
        raise StoryStringError(f"The story string has a {{{{#{closing}}}}} without its {{{{/{closing}}}}}.")
    return nodes, i


def _parse_block(tokens: list[_Token], i: int, closing: str) -> tuple[tuple, int]:
    """A block from its opening tag, ended by `{{/closing}}`: ((helper, name, then-nodes, else-nodes),
    index after it)."""
    helper, name = tokens[i].helper, tokens[i].value
    then, i = _parse(tokens, i + 1, closing)
    otherwise: list = []
    if tokens[i].kind == "else":
        if tokens[i].helper:  # {{else if y}} opens a nested block closed by this block's {{/if}}
            tokens[i].kind = "open"
            chained, i = _parse_block(tokens, i, closing)
            return (helper, name, then, [chained]), i
        otherwise, i = _parse(tokens, i + 1, closing)
        if tokens[i].kind == "else":
            raise StoryStringError(f"The story string has two {{{{else}}}} in one {{{{#{closing}}}}}.")
    return (helper, name, then, otherwise), i + 1


def _program(template: str) -> list:
    tokens = _tokens(template)
    _control_whitespace(tokens)
    nodes, _ = _parse(tokens, 0, None)
    return nodes


def _evaluate(nodes: list, params: Mapping[str, str], out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, tuple):
            helper, name, then, otherwise = node
            truth = bool(params.get(name))
            _evaluate(then if truth == (helper == "if") else otherwise, params, out)
        elif node.kind == "text":
            out.append(node.value)
        elif node.kind == "var":
            out.append(params[node.value] if node.value in params else node.raw)


def check_story_string(template: str) -> None:
    """Raise StoryStringError when the template's blocks do not pair up."""
    _program(template)


def render_story_string(template: str, params: Mapping[str, str]) -> str:
    """The story string with `params` filled in, `{{trim}}` applied and leading newlines removed."""
    out: list[str] = []
    _evaluate(_program(template), params, out)
    return re.sub(r"^\n+", "", _TRIM.sub("", "".join(out)))

"""Markdown for messages, rendered safe: raw HTML in a message is shown as text, links keep only
http(s)/mailto, dialogue is marked while parsing, and everything goes through an allow-list
sanitizer (nh3) last."""

from __future__ import annotations

import re
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markupsafe import Markup

_md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False}).enable(
    ["strikethrough", "table"]
)

_ALLOWED_TAGS = {
    "p", "br", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "a", "table", "thead", "tbody", "tr", "th", "td", "span",
}  # fmt: skip
_ALLOWED_ATTRS = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}}
# The one class a message's HTML may carry: the dialogue mark below.
_ALLOWED_CLASSES = {"span": {"dialogue"}}
# Straight and curly double quotes; roleplay dialogue is set apart from narration like Marinara does.
_DIALOGUE = re.compile(r"(\"[^\"\n]{1,2000}\"|“[^”\n]{1,2000}”)")


def _dialogue_token(kind: str, content: str) -> Token:
    return Token(kind, "", 0, content=content)


def _mark_dialogue(state: StateCore) -> None:
    """Set quoted speech apart in the parsed text itself, before anything is rendered or sanitized:
    quotes are looked for in what the user wrote (never in code), so no HTML is ever cut apart, and
    the quoted words are escaped like any other text."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        for token in block.children:
            if token.type != "text" or not _DIALOGUE.search(token.content):
                children.append(token)
                continue
            at = 0
            for match in _DIALOGUE.finditer(token.content):
                if match.start() > at:
                    children.append(_dialogue_token("text", token.content[at : match.start()]))
                children += [_dialogue_token("html_inline", '<span class="dialogue">'),
                             _dialogue_token("text", match.group(0)), _dialogue_token("html_inline", "</span>")]  # fmt: skip
                at = match.end()
            if at < len(token.content):
                children.append(_dialogue_token("text", token.content[at:]))
        block.children = children


_md.core.ruler.push("dialogue", _mark_dialogue)


@lru_cache(maxsize=4096)
def render_markdown(text: str) -> str:
    html = _md.render(text or "")
    return nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRS,
        allowed_classes=_ALLOWED_CLASSES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


def markdown_filter(text: str) -> Markup:
    return Markup(render_markdown(text))

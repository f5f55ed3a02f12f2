"""Markdown for messages, rendered safe: raw HTML in a message is shown as text, links keep only
http(s)/mailto, and everything goes through an allow-list sanitizer (nh3) last."""

from __future__ import annotations

import re
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

_md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False}).enable(
    ["strikethrough", "table"]
)

_ALLOWED_TAGS = {
    "p", "br", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "a", "table", "thead", "tbody", "tr", "th", "td", "span",
}  # fmt: skip
_ALLOWED_ATTRS = {"a": {"href", "title"}, "span": {"class"}, "th": {"align"}, "td": {"align"}}
_TAG_SPLIT = re.compile(r"(<[^>]*>)")
# Straight and curly double quotes; roleplay dialogue is set apart from narration like Marinara does.
_DIALOGUE = re.compile(r"(\"[^\"\n]{1,2000}\"|“[^”\n]{1,2000}”)")


def _mark_dialogue(html: str) -> str:
    parts = _TAG_SPLIT.split(html)
    inside_code = 0
    for i, part in enumerate(parts):
        if part.startswith("<"):
            tag = part.strip("</> ").split(" ")[0].lower()
            if tag in {"code", "pre"}:
                inside_code += -1 if part.startswith("</") else 1
            continue
        if not inside_code and part:
            # Text segments of sanitized HTML hold no "<", so wrapping them in our own span is safe.
            parts[i] = _DIALOGUE.sub(r'<span class="dialogue">\1</span>', part)
    return "".join(parts)


@lru_cache(maxsize=4096)
def render_markdown(text: str) -> str:
    html = _md.render(text or "")
    clean = nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRS,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return _mark_dialogue(clean)


def markdown_filter(text: str) -> Markup:
    return Markup(render_markdown(text))

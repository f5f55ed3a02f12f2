"""Markdown for messages, rendered safe: raw HTML in a message is shown as text, links keep only
http(s)/mailto, dialogue is marked while parsing, and everything goes through an allow-list
sanitizer (nh3) last."""

from __future__ import annotations

import bisect
import html
import re
import threading
import zlib
from collections import OrderedDict

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markupsafe import Markup

from app.platform.core.speech import name_key

_md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False}).enable(
    ["strikethrough", "table"]
)

_ALLOWED_TAGS = {
    "p", "br", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "a", "table", "thead", "tbody", "tr", "th", "td", "span",
}  # fmt: skip # a table: the allowed tags in rows, as HTML groups them
_ALLOWED_ATTRS = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}}
# The one class a message's HTML may carry: the dialogue mark below.
_ALLOWED_CLASSES = {"span": {"dialogue"}}
# The marks that open speech and the mark that closes each: straight and curly double quotes,
# guillemets and corner brackets (SillyTavern and Marinara set these apart from narration). Never the
# apostrophe or single quotes: "it's", "don't" and a plural's "the Smiths'" are words, not speech.
_CLOSING = {'"': '"', "“": "”", "«": "»", "「": "」"}
_MAX_QUOTE = 2000  # characters inside one pair of quotes; longer is not dialogue
# What a nested element (emphasis, a link, inline code, an image) counts as in the text of the element
# around it: one character that is neither a quote nor a line break, so a quote spans it.
_ELEMENT = "\ue000"
_DIALOGUE_OPEN = '<span class="dialogue">'
_DIALOGUE_CLOSE = "</span>"


def dialogue_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each quote (an opening mark, 1 to _MAX_QUOTE characters on one line, its
    closing mark), leftmost first, as the regex `"[^"\\n]{1,2000}"|“[^”\\n]{1,2000}”|…` (one
    alternative per pair in _CLOSING) would find them. A regex scans ahead up to 2000 characters from
    each unclosed quote, which made 150,000 curly quotes take seconds; here each character is looked
    at a bounded number of times."""
    ahead: dict[str, int] = {}  # character -> where it next occurs (-1: nowhere), for rising `at`

    def find(ch: str, at: int) -> int:
        found = ahead.get(ch)
        if found is None or -1 < found < at:
            found = ahead[ch] = text.find(ch, at)
        return found

    spans: list[tuple[int, int]] = []
    at = 0
    openers = list(_CLOSING)
    while True:
        starts = [p for p in (find(ch, at) for ch in openers) if p != -1]
        if not starts:
            break
        start = min(starts)
        close = find(_CLOSING[text[start]], start + 1)
        if close == -1:  # never closed: no later quote of this kind is either
            openers.remove(text[start])
            continue
        newline = find("\n", start + 1)
        if 1 <= close - start - 1 <= _MAX_QUOTE and not -1 < newline < close:
            spans.append((start, close + 1))
            at = close + 1
        else:
            at = start + 1
    return spans


def _dialogue_token(kind: str, content: str) -> Token:
    return Token(kind, "", 0, content=content)


def _sibling_groups(children: list[Token]) -> list[list[int]]:
    """The inline tokens grouped by the element holding them (the paragraph's own, each emphasis,
    link...): indexes of each group's text and leaf tokens and of the opening token of each element
    nested in it, which stands for the whole element. A pair of quotes is looked for within one
    group, so whatever lies between its two marks is whole elements and the span around it nests."""
    groups: list[list[int]] = []
    open_groups: list[list[int]] = [[]]
    for i, token in enumerate(children):
        if token.nesting == 1:
            open_groups[-1].append(i)
            open_groups.append([])
        elif token.nesting == -1:
            if len(open_groups) > 1:
                groups.append(open_groups.pop())
        else:
            open_groups[-1].append(i)
    return groups + open_groups


def _dialogue_cuts(children: list[Token]) -> dict[int, list[tuple[int, str]]]:
    """Where to put the dialogue span's opening and closing tags: by token index, (offset in the
    token's text, tag), in order."""
    cuts: dict[int, list[tuple[int, str]]] = {}
    for group in _sibling_groups(children):
        parts: list[str] = []
        offsets: list[tuple[int, int]] = []  # (offset in the group's text, token index), rising
        at = 0
        for i in group:
            token = children[i]
            if token.type == "text":
                part = token.content
            elif token.type in ("softbreak", "hardbreak"):
                part = "\n"  # speech stays on one line, as in a single text
            else:
                part = _ELEMENT
            offsets.append((at, i))
            parts.append(part)
            at += len(part)
        text = "".join(parts)
        if not any(mark in text for mark in _CLOSING):
            continue
        for start, end in dialogue_spans(text):
            # Both marks are characters of text tokens (an element is never a quote mark).
            for where, tag in ((start, _DIALOGUE_OPEN), (end - 1, _DIALOGUE_CLOSE)):
                k = bisect.bisect_right(offsets, (where, len(children))) - 1
                base, index = offsets[k]
                cuts.setdefault(index, []).append((where - base + (tag == _DIALOGUE_CLOSE), tag))
    return cuts


def _mark_dialogue(state: StateCore) -> None:
    """Set quoted speech apart in the parsed text itself, before anything is rendered or sanitized:
    quotes are looked for in what the user wrote (never in code, a link's address or title), so no
    HTML is ever cut apart, and the quoted words are escaped like any other text. A quote may span
    emphasis or a link ("Hello *waves* there"): its span then holds those elements whole."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        cuts = _dialogue_cuts(block.children)
        if not cuts:
            continue
        children: list[Token] = []
        for i, token in enumerate(block.children):
            if i not in cuts:
                children.append(token)
                continue
            at = 0
            for offset, tag in cuts[i]:
                if offset > at:
                    children.append(_dialogue_token("text", token.content[at:offset]))
                children.append(_dialogue_token("html_inline", tag))
                at = offset
            if at < len(token.content):
                children.append(_dialogue_token("text", token.content[at:]))
        block.children = children


_md.core.ruler.push("dialogue", _mark_dialogue)


class RenderCache:
    """Rendered HTML by message text, the least recently used dropped first, bounded by the
    characters it holds (text and HTML): a count of entries bounds nothing when one message can
    be 256 KB and a chat page renders hundreds. Pages render on worker threads, hence the lock."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.chars = 0
        self._items: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> str | None:
        with self._lock:
            html = self._items.get(text)
            if html is not None:
                self._items.move_to_end(text)
            return html

    def put(self, text: str, html: str) -> None:
        size = len(text) + len(html)
        if size > self.max_chars // 8:  # a huge message would push out everything else
            return
        with self._lock:
            if text in self._items:
                return
            self._items[text] = html
            self.chars += size
            while self.chars > self.max_chars:
                old_text, old_html = self._items.popitem(last=False)
                self.chars -= len(old_text) + len(old_html)

    def __len__(self) -> int:
        return len(self._items)


# At most ~8 million characters, text and HTML (8–32 MB as Python strings, by script): some 4,000 typical
# messages, dozens of the chat page's 60-message pages. It was 32 million (~100 MB in the worst case), a
# large share of a server that should stay under 750 MB (issue 21, bench/memory_use.py). A memo of a pure
# function, so one per process serves every app in it.
RENDER_CACHE_CHARS = 8 * 1024 * 1024
_cache = RenderCache(RENDER_CACHE_CHARS)


def render_markdown(text: str) -> str:
    text = text or ""
    if (cached := _cache.get(text)) is not None:
        return cached
    html = _render(text)
    _cache.put(text, html)
    return html


def _render(text: str) -> str:
    return nh3.clean(
        _md.render(text),
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRS,
        allowed_classes=_ALLOWED_CLASSES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


# A merged group reply's speaker marks (`<speaker="Aria">` before each character's part, SillyTavern-style
# closing tags ignored): shown as the character's name in a colour of its own. The mark becomes a token
# Markdown and the sanitizer leave alone, then the name's span is put in its place.
_SPEAKER_MARK = re.compile(
    r"""<\s*speaker\s*=\s*["“']([^"”'<>\n]{1,60})["”']\s*/?>|<\s*/\s*speaker\s*>""", re.IGNORECASE
)
_SPEAKER_TOKEN = re.compile("\u27e6(\\d{1,4})\u27e7")
SPEAKER_COLOURS = 8


def render_with_speakers(text: str) -> str:
    """Markdown, with a merged reply's speaker marks as coloured names (one colour per name)."""
    text = text or ""
    if "<" not in text or not _SPEAKER_MARK.search(text):
        return render_markdown(text)
    names: list[str] = []

    def token(match: re.Match) -> str:
        if match.group(1) is None:
            return ""
        names.append(match.group(1).strip())
        return f"\u27e6{len(names) - 1}\u27e7"

    rendered = render_markdown(_SPEAKER_MARK.sub(token, text))
    parts = _SPEAKER_TOKEN.split(rendered)  # HTML, a mark's index, HTML, ...
    out = [parts[0]]
    key = ""
    for at in range(1, len(parts), 2):
        index = int(parts[at])
        if index < len(names):
            name = names[index]
            key = name_key(name)
            colour = zlib.crc32(name.lower().encode()) % SPEAKER_COLOURS
            # data-name: the chat's speakers.css gives a member's mark its speech colour by it.
            out.append(
                f'<span class="speaker-mark speaker-c{colour}" data-name="{key}">{html.escape(name)}</span>'
            )
        else:
            out.append(f"\u27e6{parts[at]}\u27e7")
        # The speech after a mark is that speaker's (Marinara colours each part by its speaker): the
        # dialogue spans, which only this module writes, carry the same fingerprint.
        out.append(
            parts[at + 1].replace(_DIALOGUE_OPEN, f'<span class="dialogue" data-name="{key}">')
            if key
            else parts[at + 1]
        )
    return "".join(out)


def markdown_filter(text: str) -> Markup:
    return Markup(render_with_speakers(text))


def plural(count: int, word: str, many: str | None = None) -> str:
    """ "1 key", "2 keys"; `many` for words that do not just take an s ("entry", "entries")."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


PREVIEW_SOURCE_CHARS = 2000  # a preview needs the start of a message, never all of a long one


def plain_text(text: str, limit: int = 120) -> str:
    """A message as one line of plain words, for a preview: Markdown's marks and any HTML tags
    (with a script's or style's content) dropped, whitespace collapsed, at most `limit` characters
    then "…". Plain text, not HTML: the template escapes it."""
    parts: list[str] = []
    for token in _md.parse((text or "")[:PREVIEW_SOURCE_CHARS]):
        if token.type == "inline":
            for child in token.children or ():
                if child.type in ("text", "code_inline", "image"):  # an image's content is its alt text
                    parts.append(child.content)
                elif child.type in ("softbreak", "hardbreak"):
                    parts.append(" ")
        elif token.type in ("fence", "code_block"):
            parts.append(token.content)
        if token.nesting == -1 or token.type in ("fence", "code_block", "hr"):
            parts.append(" ")
    words = html.unescape(nh3.clean("".join(parts), tags=set())).split()
    line = " ".join(words)
    return line if len(line) <= limit else line[:limit].rstrip() + "…"


def middle_truncate(text: str, limit: int = 64) -> str:
    """`text` cut in the middle to at most `limit` characters, so both its start and its
    distinguishing end (a chat's "(branch)", its date) stay in view."""
    if len(text) <= limit:
        return text
    tail = (limit - 1) // 2
    return text[: limit - 1 - tail].rstrip() + "…" + text[len(text) - tail :].lstrip()

"""Scene breaks in a character's reply: where a reply is saved as several messages. Pure functions.

With Advanced Memory Recall on, a new character reply that changes scene or point of view with a
break line (`***`, `---`, `⁂`...) is saved as separate messages of the same character, one per part.
`split_reply` returns the parts (one element, the text unchanged, when nothing splits); the caller
saves them in order and decides what else goes where:

- the reply's reasoning goes with the first part (an inline `<think>` block at the top stays in it:
  it is never a part of its own), and is not sent back to the model;
- message info, trackers and agent results go with the last part;
- Continue and Impersonate never split: the caller does not call `split_reply` for them;
- a swipe or regeneration of an earlier part keeps only `first_part` of the new text.

Decisions (the spec names `***` and `---`; the rest follows what the chat shows as Markdown):
- A break line is a CommonMark thematic break: at most 3 spaces of indentation (a tab counts as 4;
  more is an indented code block), then 3 or more of one of `*`, `-`, `_`, with spaces or tabs
  between them allowed and nothing else (`***`, `---`, `___`, `* * *`, `- - -`, `-----`, `  ***  `).
  Also a line of one or more asterisms (`⁂`, `⁂ ⁂ ⁂`) and an HTML rule alone on its line (`<hr>`,
  `<hr/>`), which the chat renders as rules too. Other ornaments (`~~~` is a fence, `===`, `###`,
  `• • •`, `◇`) are not breaks.
- `---` directly under a line of text is a setext heading underline in CommonMark; here it is a break
  anyway. The spec names `---` as a break; models that write single newlines put it under the last
  line of a scene and mean a scene change; a heading in a roleplay reply is written with `#` almost
  always; and a wrong split costs two messages where a wrong join costs a scene that never ends.
- Code: a ``` or ~~~ fence (any indentation, as inside a list item) runs to a closing line of the
  same character at least as long, so a ```` fence holding ``` lines stays one block; an unclosed
  fence runs to the end of the reply (Markdown renders it so), so nothing after it splits. Indented
  code needs no rule: its lines have 4+ spaces and are never break lines.
- HTML: a line starting with an opening tag (`<details>`, `<div class=...>`, `<!--`) opens a block
  that runs to the line where that tag's nesting closes (CommonMark would end it at a blank line, but
  the `---` inside a `<details>` with paragraphs is part of the panel, and splitting there would cut
  the HTML in two). A known HTML element or a reasoning tag (`think`, `thinking`, `reasoning`) left
  unclosed runs to the end, like a fence; an unknown tag name (`<sigh>`, `<status>`) opens a block only
  when its closing tag follows, so an action written in angle brackets does not stop every split.
  Void and self-closed tags (`<br>`, `<img ...>`, `<x/>`) and tags closed on their own line open none.
  A reasoning closer with no opener before it (the template put `<think>` in the prompt) makes
  everything up to it reasoning, as `strip_thinking` reads it.
- A break splits only when the part before it has content and content follows it. Content is any
  line that is not blank, not a break and not reasoning, so: a break at the very start stays at the
  top of the first part; a break at the end stays at the bottom of the last; consecutive breaks stay
  together at the top of the next part; a reply of only breaks (or only reasoning and breaks) is one
  part; no part is empty or only whitespace. The break line stays at the top of the part it opens.
- Each part of a split reply loses its leading blank lines and trailing whitespace; its line endings
  (`\\n`, `\\r\\n`, `\\r`) are kept as written. An unsplit reply is returned unchanged.
- Limits: at most `MAX_PARTS` parts (past it the rest stays in the last part), and only break lines
  that start within the first `MAX_SPLIT_CHARS` characters count (the rest stays in the last part).
  Work is linear in the text's length; nothing here raises on model output.
"""

from __future__ import annotations

import re
from enum import Enum
from itertools import pairwise

from app.connections.core.answers import THINK_CLOSE, THINK_OPEN

MAX_PARTS = 20  # more scene changes than this in one reply is a broken reply, not a story
MAX_SPLIT_CHARS = 200_000  # ~50k tokens: past any reply a model writes in one turn

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_LINE_END = re.compile(r"\r\n|\r|\n")
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*(?:\r\n|\r|\n))+")
_RULE_CHARS = frozenset("*-_")
_ASTERISM = "⁂"
_HR = re.compile(r"<hr\s*/?>", re.IGNORECASE)
# A tag: `<name ...>`, `</name>`, `<name/>`. `[^<>]*?` stops at the next angle bracket, so a line
# full of `<a ` without `>` costs linear time.
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)(?:\s[^<>]*?)?(/?)>")
_LINE_OPENS_TAG = re.compile(r"[ \t]*<([A-Za-z][A-Za-z0-9-]*)(?:[\s/>]|$)")
_COMMENT_OPEN = re.compile(r"[ \t]*<!--")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")

_REASONING_TAGS = frozenset({"think", "thinking", "reasoning"})
_VOID_TAGS = frozenset("area base br col embed hr img input link meta param source track wbr".split())
# Element names a model writes in replies; one of these left open runs to the end, like a fence.
_HTML_TAGS = _REASONING_TAGS | frozenset(
    """a abbr address article aside audio b bdi bdo blockquote button canvas caption center cite code
    colgroup data datalist dd del details dfn dialog div dl dt em fieldset figcaption figure font
    footer form h1 h2 h3 h4 h5 h6 header hgroup i iframe ins kbd label legend li main map mark menu
    meter nav noscript object ol optgroup option output p picture pre progress q rp rt ruby s samp
    script search section select small span strong style sub summary sup svg table tbody td template
    textarea tfoot th thead time tr u ul var video""".split()
)


class _Kind(Enum):
    BLANK = "blank"
    BREAK = "break"
    CONTENT = "content"
    REASONING = "reasoning"  # kept with its part but not content: a part of only reasoning is empty


def is_break_line(line: str) -> bool:
    """Whether this one line, read outside code and HTML, is a scene break (see the decisions above)."""
    line = line.rstrip("\r\n")
    indent = len(line) - len(line.lstrip(" \t"))
    if len(line[:indent].expandtabs(4)) > 3:
        return False  # indented code in Markdown
    body = line.strip()
    if not body:
        return False
    if _HR.fullmatch(body):
        return True
    marks = body.replace(" ", "").replace("\t", "")
    if set(marks) == {_ASTERISM}:
        return True
    return len(marks) >= 3 and marks[0] in _RULE_CHARS and marks == marks[0] * len(marks)


def split_reply(text: str, *, max_parts: int = MAX_PARTS) -> list[str]:
    """The reply's parts at its scene breaks, in order: the text unchanged as the only element when
    nothing splits; else each part with its break line at the top (the first part has none) and no
    part empty. Continue and Impersonate never split: the caller does not call this for them."""
    # Past the size limit nothing is read closely: the tail is one block for the last part, and any
    # text in it counts as content after the breaks before it.
    end = _LINE_END.search(text, MAX_SPLIT_CHARS - 1) if len(text) > MAX_SPLIT_CHARS else None
    cut = end.end() if end else len(text)
    lines, tail = _LINE.findall(text[:cut]), text[cut:]
    if len(lines) + bool(tail) < 2 or max_parts < 2:
        return [text]
    kinds = _classify(lines)
    # Content from this line on? A break splits only when some follows it.
    content_after = [False] * len(lines) + [bool(tail.strip())]
    for i in range(len(lines) - 1, -1, -1):
        content_after[i] = content_after[i + 1] or kinds[i] is _Kind.CONTENT
    starts = [0]
    has_content = False
    for i, kind in enumerate(kinds):
        if kind is _Kind.BREAK and has_content and content_after[i + 1]:
            starts.append(i)
            has_content = False
            if len(starts) == max_parts:
                break
        elif kind is _Kind.CONTENT:
            has_content = True
    if len(starts) == 1:
        return [text]
    lines.append(tail)
    return [_tidy("".join(lines[a:b])) for a, b in pairwise([*starts, len(lines)])]


def first_part(text: str) -> str:
    """What a swipe or regeneration of an earlier part keeps of its new text: the part before the
    first break that splits (all of it when none does)."""
    return split_reply(text, max_parts=2)[0]


def _tidy(part: str) -> str:
    return _LEADING_BLANK_LINES.sub("", part).rstrip()


def _classify(lines: list[str]) -> list[_Kind]:
    """Each line's kind, with code fences, HTML blocks and reasoning read as Markdown would."""
    kinds: list[_Kind] = []
    last_closer = _last_closers(lines)
    i = _reasoning_prefix(lines)
    kinds.extend([_Kind.REASONING] * i)
    while i < len(lines):
        line = lines[i].rstrip("\r\n")
        end, kind = _block_end(lines, i, line, last_closer)
        if end is None:
            if not line.strip():
                kinds.append(_Kind.BLANK)
            elif is_break_line(line):
                kinds.append(_Kind.BREAK)
            else:
                kinds.append(_Kind.CONTENT)
            i += 1
            continue
        kinds.extend([kind] * (end + 1 - i))
        i = end + 1
    return kinds


def _reasoning_prefix(lines: list[str]) -> int:
    """How many leading lines are reasoning because a reasoning closer comes before any opener."""
    text = "".join(lines)
    closer, opener = THINK_CLOSE.search(text), THINK_OPEN.search(text)
    if closer is None or (opener is not None and opener.start() < closer.start()):
        return 0
    offset = 0
    for n, line in enumerate(lines):
        offset += len(line)
        if offset >= closer.end():
            return n + 1
    return len(lines)


def _block_end(lines: list[str], i: int, line: str, last_closer: dict[str, int]) -> tuple[int | None, _Kind]:
    """The last line of the code or HTML block that opens on line i (None when none opens), and the
    kind its lines take."""
    fence = _FENCE.match(line)
    if fence and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
        return _fence_end(lines, i, fence.group(1)), _Kind.CONTENT
    if _COMMENT_OPEN.match(line):
        return _comment_end(lines, i), _Kind.CONTENT
    opens = _LINE_OPENS_TAG.match(line)
    if opens is None:
        return None, _Kind.CONTENT
    name = opens.group(1).lower()
    if name in _VOID_TAGS:
        return None, _Kind.CONTENT
    if name not in _HTML_TAGS and last_closer.get(name, -1) <= i:
        return None, _Kind.CONTENT  # `<sigh>`: not HTML unless its closer follows
    end = _tag_end(lines, i, name)
    if end is None:
        return None, _Kind.CONTENT  # closed (or self-closed) on its own line: an ordinary line
    kind = _Kind.REASONING if name in _REASONING_TAGS else _Kind.CONTENT
    return end, kind


def _fence_end(lines: list[str], i: int, opener: str) -> int:
    for j in range(i + 1, len(lines)):
        body = lines[j].strip()
        if body and body[0] == opener[0] and len(body) >= len(opener) and body == body[0] * len(body):
            return j
    return len(lines) - 1  # unclosed: runs to the end


def _comment_end(lines: list[str], i: int) -> int:
    first = lines[i].find("<!--")
    if "-->" in lines[i][first + 4 :]:
        return i
    for j in range(i + 1, len(lines)):
        if "-->" in lines[j]:
            return j
    return len(lines) - 1


def _tag_end(lines: list[str], i: int, name: str) -> int | None:
    """The line where the tag opened on line i closes at its own nesting level; the last line when it
    never does; None when it closes on line i itself (or is self-closed there)."""
    depth = 0
    for j in range(i, len(lines)):
        for tag in _TAG.finditer(lines[j]):
            if tag.group(2).lower() != name or tag.group(3):
                continue
            if not tag.group(1):
                depth += 1
            elif depth > 0:
                depth -= 1
        if depth == 0:
            return None if j == i else j
    return len(lines) - 1


def _last_closers(lines: list[str]) -> dict[str, int]:
    """The last line holding each tag name's closing tag, so an unknown tag's lookahead is one lookup."""
    last: dict[str, int] = {}
    for j, line in enumerate(lines):
        if "</" not in line:
            continue
        for tag in _TAG.finditer(line):
            if tag.group(1):
                last[tag.group(2).lower()] = j
    return last

"""Dialogue styled as dialogue (issue 29): quoted speech marked in the sanitized words, never in
markup, code or attributes; and the speech colours' stylesheet, written only from checked colours."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from app.platform import rendering
from app.platform.core.errors import UserError
from app.platform.core.speech import (
    AA,
    PALETTE_DARK,
    PALETTE_LIGHT,
    SURFACES_DARK,
    SURFACES_LIGHT,
    Member,
    auto_slots,
    checked_colour,
    contrast,
    css_version,
    name_key,
    readable,
    speakers_css,
)
from app.platform.rendering import render_markdown

OPEN = '<span class="dialogue">'


class _Events(HTMLParser):
    """The page's structure as a list of events, dialogue spans left out (each one's end tag found by
    nesting), checking as it goes that every end tag closes the element opened last."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[tuple] = []
        self.stack: list[tuple[str, bool]] = []
        self.dialogue = 0

    def handle_starttag(self, tag, attrs):
        speech = tag == "span" and attrs == [("class", "dialogue")]
        self.dialogue += speech
        if tag not in ("br", "hr"):
            self.stack.append((tag, speech))
        if not speech:
            self.events.append(("start", tag, tuple(attrs)))

    def handle_endtag(self, tag):
        opened, speech = self.stack.pop()
        assert opened == tag, f"</{tag}> closes <{opened}>"
        if not speech:
            self.events.append(("end", tag))

    def handle_data(self, data):
        if self.events and self.events[-1][0] == "text":
            self.events[-1] = ("text", self.events[-1][1] + data)
        else:
            self.events.append(("text", data))


def events(html: str) -> tuple[list[tuple], int]:
    parser = _Events()
    parser.feed(html)
    parser.close()
    assert parser.stack == [], "unclosed elements"
    return parser.events, parser.dialogue


def unmarked(text: str) -> str:
    """The same message rendered without dialogue marking."""
    rendering._md.core.ruler.disable("dialogue")
    try:
        return rendering._render(text)
    finally:
        rendering._md.core.ruler.enable("dialogue")


def speech(html: str) -> list[str]:
    """The text of each dialogue span (outermost), tags inside dropped."""
    out, depth, current = [], 0, []
    for part in re.split(r"(<[^>]+>)", html):
        if part == OPEN:
            depth += 1
            continue
        if depth and part.startswith("</span"):
            depth -= 1
            if depth == 0:
                out.append("".join(current))
                current = []
            continue
        if depth and not part.startswith("<"):
            current.append(part)
    return out


CASES = [
    ('*she smiles* "Hello," she says.', ['"Hello,"']),
    ('"<img src=x onerror=alert(1)>"', ['"&lt;img src=x onerror=alert(1)&gt;"']),
    ('"<style>body{display:none}</style>"', ['"&lt;style&gt;body{display:none}&lt;/style&gt;"']),
    ('"</span><script>alert(1)</script>"', ['"&lt;/span&gt;&lt;script&gt;alert(1)&lt;/script&gt;"']),
    ('[a link](https://x.y "a \\"title\\"") and [x](https://x.y/"q")', []),
    ('`"inline code"` and\n\n```\n"a block"\n```', []),
    ('    "indented code"', []),
    ('"Hello *waves* there," she says.', ['"Hello waves there,"']),
    ('"Read **this** and [that](https://a.b)."', ['"Read this and that."']),
    ('"Hello *there"* and on', []),
    ('*"inside" emphasis*', ['"inside"']),
    ('He said "wait', []),
    ('"one" "two" "three', ['"one"', '"two"']),
    ("It's Bob's, don't 'quote' me", []),
    (
        '"Plain" ASCII and “curly” and «guillemets» and 「corner」',
        ['"Plain"', "“curly”", "«guillemets»", "「corner」"],
    ),
    ('"Wait..." and "..."', ['"Wait..."', '"..."']),
    ('""', []),
    ('"split\nacross lines"', []),
    ("&quot;<b>&quot;", ['"&lt;b&gt;"']),
]


@pytest.mark.parametrize(("text", "spoken"), CASES)
def test_speech_is_marked_in_the_words_only(text, spoken):
    html = render_markdown(text)
    assert speech(html) == spoken
    # Nothing but the dialogue spans was added: the rest is exactly what the sanitizer gave without them.
    marked, count = events(html)
    plain, none = events(unmarked(text))
    assert marked == plain and none == 0 and count >= len(spoken)


@pytest.mark.parametrize("text", [t for t, _ in CASES])
def test_no_tag_from_the_message_survives(text):
    marked, _ = events(render_markdown(text))
    for event in marked:
        if event[0] == "start":
            assert event[1] in rendering._ALLOWED_TAGS and event[1] not in ("script", "style", "img")
            assert not [name for name, _ in event[2] if name.startswith("on") or name == "style"]


def test_code_is_never_speech():
    html = render_markdown('`"x"` then\n\n```\n"y"\n```\n\n"a `b` c"')
    assert '<code>"x"</code>' in html and '"y"' in html.split("<pre>")[1].split("</pre>")[0]
    assert html.split("<pre>")[1].count("dialogue") == 1  # only the last paragraph's quote
    assert '<span class="dialogue">"a <code>b</code> c"</span>' in html


def test_a_quote_spanning_emphasis_keeps_the_markup_nested():
    assert render_markdown('"Hello *waves* there"') == (
        '<p><span class="dialogue">"Hello <em>waves</em> there"</span></p>\n'
    )


def test_each_pair_closes_with_its_own_mark():
    assert speech(render_markdown('«a" b» “c» d”')) == ['«a" b»', "“c» d”"]


# Speech colours


def test_colours_are_checked_and_normalised():
    assert checked_colour("#A0b1C2") == "#a0b1c2" and checked_colour(" #000000 ") == "#000000"
    assert checked_colour("") is None and checked_colour(None) is None
    for bad in (
        "#abc\ndef",
        "red",
        "#abc",
        "#abcdefg",
        "#ggg000",
        "#000000;}body{display:none",
        "url(x)",
        "#12345",
    ):
        with pytest.raises(UserError):
            checked_colour(bad)


def test_the_palette_reads_on_every_surface_of_its_theme():
    assert len(PALETTE_DARK) == len(PALETTE_LIGHT) == 12
    for dark, light in zip(PALETTE_DARK, PALETTE_LIGHT, strict=True):
        assert min(contrast(dark, s) for s in SURFACES_DARK) >= AA
        assert min(contrast(light, s) for s in SURFACES_LIGHT) >= AA


def test_the_surfaces_are_the_stylesheets():
    css = open("static/app.css", encoding="utf-8").read()
    for theme, surfaces in (('[data-theme="dark"]', SURFACES_DARK), ('[data-theme="light"]', SURFACES_LIGHT)):
        block = css.split(theme + " {", 1)[1].split("}", 1)[0]
        found = {re.search(rf"--{name}: (#[0-9a-f]{{6}})", block).group(1) for name in
                 ("bg", "bg-2", "surface", "surface-2", "user-bubble")}  # fmt: skip
        assert found == set(surfaces), theme


def test_a_chosen_colour_is_kept_where_it_reads_and_shaded_where_it_does_not():
    assert readable("#ff8800", SURFACES_DARK, toward="#ffffff") == "#ff8800"
    shaded = readable("#ff8800", SURFACES_LIGHT, toward="#000000")
    assert shaded != "#ff8800" and min(contrast(shaded, s) for s in SURFACES_LIGHT) >= AA
    assert readable("#000000", SURFACES_DARK, toward="#ffffff") != "#000000"


def test_automatic_colours_differ_within_a_chat_and_hold_across_calls():
    slots = auto_slots(list(range(1, 13)))
    assert sorted(slots.values()) == list(range(12))
    assert auto_slots([5, 3]) == auto_slots([3, 5]) == auto_slots([5, 3])
    assert len(set(auto_slots(range(1, 30)).values())) == 12  # past twelve members, colours repeat


def test_the_stylesheet_holds_only_checked_colours():
    css = speakers_css(
        [Member(3), Member(5, "#FF8800"), Member(9, "red;}*{display:none"), Member(12, "#12345")],
        "</style><script>",
    )
    rules = [line for line in css.splitlines() if not line.startswith("/*")]
    assert len(rules) == 8  # four members, two themes each; the user's bad colour writes nothing
    for rule in rules:
        assert re.fullmatch(
            r'(\[data-theme="light"\] )?\.msg\[data-speaker="c\d+"\]\{--speech:#[0-9a-f]{6}\}', rule
        ), rule
    assert '.msg[data-speaker="c5"]{--speech:#ff8800}' in rules
    assert "display" not in css and "script" not in css


def test_the_users_colour_and_the_version():
    css = speakers_css([], "#336699")
    assert '[data-theme="light"] .msg[data-speaker="u"]{--speech:#336699}' in css
    assert '.msg[data-speaker="u"]{--speech:' in css
    assert css_version(css) != css_version(speakers_css([], "#336698"))
    assert re.fullmatch(r"[0-9a-f]{8}", css_version(css))


def test_a_members_speaker_mark_takes_its_colour_by_a_fingerprint_of_its_name():
    html = rendering.render_with_speakers('"Before." <speaker="Aria">"Hi." *"Mm."* <speaker="Bo">"Yo."')
    assert f'data-name="{name_key("aria")}">Aria</span>' in html and name_key(" ARIA ") == name_key("Aria")
    # Each speaker's speech carries its fingerprint; speech before any mark stays the message's.
    aria, bo = name_key("Aria"), name_key("Bo")
    assert html.startswith('<p><span class="dialogue">"Before."</span> <span class="speaker-mark')
    assert html.count(f'<span class="dialogue" data-name="{aria}">') == 2
    assert f'<span class="dialogue" data-name="{bo}">"Yo."</span>' in html
    events(html.replace(' data-name="', ' class2="'))  # still well formed
    css = speakers_css([Member(4, "#ff8800", "Aria"), Member(5, None, "</style>{}")], None)
    assert f'.speaker-mark[data-name="{name_key("Aria")}"]{{color:#ff8800}}' in css
    assert f'.dialogue[data-name="{name_key("Aria")}"]{{--speech:#ff8800}}' in css
    assert "style" not in css.replace("/*", "").split("*/", 1)[1] and "{}" not in css

import random
import re
import time

from app.lore.report import inspector_note
from app.platform import rendering
from app.platform.rendering import RenderCache, dialogue_spans, plural, render_markdown


def test_raw_html_is_shown_as_text():
    html = render_markdown("<script>alert(1)</script><img src=x onerror=alert(1)>")
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;" in html


def test_only_safe_link_schemes():
    assert "href" not in render_markdown("[a](javascript:alert(1))")
    assert 'href="https://example.com"' in render_markdown("[a](https://example.com)")
    assert 'rel="noopener noreferrer nofollow"' in render_markdown("[a](https://example.com)")


def test_roleplay_markup():
    html = render_markdown('*She smiles.* "Welcome," she says.')
    assert "<em>She smiles.</em>" in html and '<span class="dialogue">"Welcome,"</span>' in html


def test_quotes_in_code_are_left_alone():
    assert "dialogue" not in render_markdown('`"x"`')


def test_a_message_of_150000_curly_quotes_renders_in_linear_time():
    # The dialogue regex scanned up to 2,000 characters ahead of every unclosed quote: 2.3 s for
    # this message on every page view. The scan is now linear; 1 s is a generous bound for a
    # loaded machine (it takes milliseconds).
    started = time.monotonic()
    html = render_markdown("“" * 150_000)
    assert time.monotonic() - started < 1.0
    assert "dialogue" not in html and html.count("“") == 150_000


def test_dialogue_marking_matches_the_rule_it_replaced():
    # Leftmost first, 1 to 2,000 characters on one line between a quote and its closing quote.
    rule = re.compile(r"(\"[^\"\n]{1,2000}\"|“[^”\n]{1,2000}”|«[^»\n]{1,2000}»|「[^」\n]{1,2000}」)")
    rnd = random.Random(7)
    for _ in range(5000):
        text = "".join(rnd.choice('ab "“”«»「」\n') for _ in range(rnd.randint(0, 30)))
        text = rnd.choice(["", '"' + "x" * 2000 + '"', "“" + "y" * 2001 + "”"]) + text
        assert dialogue_spans(text) == [m.span() for m in rule.finditer(text)], text


def test_the_render_cache_is_bounded_by_the_characters_it_holds():
    cache = RenderCache(max_chars=1000)
    for i in range(100):
        cache.put(f"message {i} " + "x" * 30, "<p>" + "x" * 30 + "</p>")
    assert cache.chars <= 1000 and 0 < len(cache) < 100
    assert cache.get("message 99 " + "x" * 30) is not None and cache.get("message 0 " + "x" * 30) is None
    cache.put("y" * 200, "<p>" + "y" * 200 + "</p>")  # over an eighth of the bound: not kept
    assert cache.get("y" * 200) is None
    assert rendering._cache.max_chars == rendering.RENDER_CACHE_CHARS <= 8 * 1024 * 1024


def test_a_quote_around_markup_stays_text_and_is_still_dialogue():
    html = render_markdown('"<img src=x onerror=alert(1)>" and "</span><script>alert(1)</script>"')
    assert "<img" not in html and "<script" not in html and "onerror=alert(1)&gt;" in html
    assert html.count('<span class="dialogue">') == 2 and html.count("</span>") == 2


def test_quotes_are_marked_in_the_words_never_inside_attributes():
    html = render_markdown('[he said "hi](https://x.y "a > b") and "then" ["q"](https://a.b)')
    assert 'title="a &gt; b"' in html and '>he said "hi</a>' in html
    assert '<span class="dialogue">"then"</span>' in html
    assert (
        '<a href="https://a.b" rel="noopener noreferrer nofollow"><span class="dialogue">"q"</span></a>'
        in html
    )


def test_plural_counts_read_as_english():
    assert [plural(n, "key") for n in (0, 1, 2)] == ["0 keys", "1 key", "2 keys"]
    assert plural(1, "entry", "entries") == "1 entry" and plural(3, "entry", "entries") == "3 entries"
    snap = {
        "active": [{"reason": "key"}, {"reason": "key"}, {"reason": "constant"}],
        "skipped": [],
        "chat_used": 1,
    }
    assert inspector_note(snap) == "Lorebooks: 3 entries active (1 constant, 2 keys), 1 token."


def test_plain_text_drops_markdown_marks():
    assert rendering.plain_text('*She smiles.* "Hello, **friend**!"') == 'She smiles. "Hello, friend!"'
    assert rendering.plain_text("# Title\n\n- one\n- two\n\n```\ncode\n```") == "Title one two code"
    assert rendering.plain_text("![a cat](x.png) and [a link](https://a.example)") == "a cat and a link"


def test_plain_text_drops_html_tags_and_script_content_but_keeps_comparisons():
    assert rendering.plain_text("<b>bold</b> & <script>alert(1)</script>x") == "bold & x"
    assert rendering.plain_text("1 < 2 > 0") == "1 < 2 > 0"


def test_plain_text_is_one_line_within_its_limit():
    assert rendering.plain_text("a   b\n\nc") == "a b c"
    assert rendering.plain_text("word " * 100, limit=12) == "word word wo…"
    assert rendering.plain_text("") == ""
    assert len(rendering.plain_text("x" * 1_000_000)) == 121  # only the start of a long message is read


def test_middle_truncate_keeps_both_ends():
    assert rendering.middle_truncate("short") == "short"
    name = "Aria and the long walk along the northern coast road – 2026-11-30 23:21 (branch)"
    cut = rendering.middle_truncate(name, 40)
    assert len(cut) <= 40 and cut.startswith("Aria and the") and cut.endswith("23:21 (branch)") and "…" in cut

from app.rendering import render_markdown


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


def test_a_quote_around_markup_stays_text_and_is_still_dialogue():
    html = render_markdown('"<img src=x onerror=alert(1)>" and "</span><script>alert(1)</script>"')
    assert "<img" not in html and "<script" not in html and "onerror=alert(1)&gt;" in html
    assert html.count('<span class="dialogue">') == 2 and html.count("</span>") == 2


def test_quotes_are_marked_in_the_words_never_inside_attributes():
    html = render_markdown('[he said "hi](https://x.y "a > b") and "then" ["q"](https://a.b)')
    assert 'title="a &gt; b"' in html and '>he said "hi</a>' in html
    assert '<span class="dialogue">"then"</span>' in html
    assert '<a href="https://a.b" rel="noopener noreferrer nofollow"><span class="dialogue">"q"</span></a>' in html

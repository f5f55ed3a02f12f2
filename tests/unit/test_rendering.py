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

"""A merged group reply's speaker marks rendered as coloured names (app/platform/rendering.py)."""

from app.platform.rendering import render_with_speakers


def test_each_mark_becomes_its_name_and_closing_tags_vanish():
    html = render_with_speakers('<speaker="Aria">*waves*\n\n<Speaker = "Bram">Hm.</speaker>')
    assert html.count('class="speaker-mark') == 2
    assert ">Aria</span><em>waves</em>" in html and ">Bram</span>Hm." in html
    assert "speaker=" not in html.lower() and "&lt;/speaker" not in html


def test_the_same_name_gets_the_same_colour():
    html = render_with_speakers('<speaker="Aria">a\n\n<speaker="aria">b')
    first, second = (part.split('"')[0] for part in html.split("speaker-mark ")[1:])
    assert first == second


def test_names_are_escaped_and_nothing_else_becomes_html():
    html = render_with_speakers('<speaker="A&B">x <script>alert(1)</script> \u27e69\u27e7')
    assert ">A&amp;B</span>" in html and "<script>" not in html
    assert "\u27e69\u27e7" in html  # a token the text itself holds stays text
    assert render_with_speakers('<speaker="<b>x</b>">y').count("speaker-mark") == 0
    assert render_with_speakers("plain \u27e60\u27e7") == "<p>plain \u27e60\u27e7</p>\n"

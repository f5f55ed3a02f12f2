"""Search results from each engine's answer (app/tools/web/core/hits.py) and the SearXNG URL check."""

import pytest

from app.platform.core.errors import UserError
from app.tools.web.core.hits import (
    MAX_HITS,
    SearchHit,
    brave_hits,
    clean,
    ddgs_hits,
    format_hits,
    searxng_hits,
)
from app.tools.web.core.searxng import searxng_url


def test_brave_web_answer():
    answer = {
        "web": {
            "results": [
                {
                    "title": "Tea &amp; <strong>cakes</strong>",
                    "url": "https://tea.example/",
                    "description": "Hot <b>tea</b>",
                },
                {"title": "No URL"},
                {"title": "Script", "url": "javascript:alert(1)"},
                {"title": "Twice", "url": "https://tea.example/"},
            ]
        }
    }
    assert brave_hits(answer) == [SearchHit("Tea & cakes", "https://tea.example/", "Hot tea")]


def test_brave_news_answer_and_bad_shapes():
    assert brave_hits({"results": [{"title": "N", "url": "https://n.example/a", "description": "d"}]}) == [
        SearchHit("N", "https://n.example/a", "d")
    ]
    assert brave_hits([]) == [] and brave_hits({"web": "x"}) == [] and brave_hits(None) == []


def test_searxng_answer_capped_at_ten():
    items = [{"title": f"T{i}", "url": f"https://s.example/{i}", "content": "c" * 1000} for i in range(25)]
    hits = searxng_hits({"results": items})
    assert len(hits) == MAX_HITS
    assert hits[0].snippet.endswith("…") and len(hits[0].snippet) == 400


def test_ddgs_shapes():
    assert ddgs_hits([{"title": "A", "href": "https://a.example", "body": "b"}]) == [
        SearchHit("A", "https://a.example", "b")
    ]
    assert ddgs_hits([{"title": "V", "content": "https://v.example/w", "description": "d"}]) == [
        SearchHit("V", "https://v.example/w", "d")
    ]
    assert ddgs_hits("nope") == []


def test_clean_and_format():
    assert clean("a\n\n  b <i>c</i>", 100) == "a b c"
    assert clean(None, 10) == ""
    text = format_hits(
        "tea", "SearXNG", [SearchHit("T", "https://t.example", "s")], ["Brave: answered HTTP 500"]
    )
    assert text.splitlines()[0] == "Web search results for “tea” from SearXNG:"
    assert "Brave: answered HTTP 500" in text and "1. T\n   https://t.example\n   s" in text


@pytest.mark.parametrize(
    ("raw", "saved"),
    [
        ("", ""),
        ("  https://searx.example.org/  ", "https://searx.example.org"),
        ("http://127.0.0.1:8888/search", "http://127.0.0.1:8888"),
        ("https://search", "https://search"),
        ("https://ex.org/searxng/", "https://ex.org/searxng"),
    ],
)
def test_searxng_url_saved(raw, saved):
    assert searxng_url(raw) == saved


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("searx.example.org", "must start with http"),
        ("ftp://searx.example.org", "must start with http"),
        ("http://", "must start with http"),
        ("http://a:b@searx.example.org", "no user name"),
        ("https://searx.example.org/?q=1", "without \\? or #"),
        ("http://[::1", "not a URL"),
        ("https://x.org/" + "a" * 3000, "longer than 2048"),
    ],
)
def test_searxng_url_refused(raw, message):
    with pytest.raises(UserError, match=message):
        searxng_url(raw)

"""web_search over the engine chain (issue 24, acceptance 2), with a fake Brave and a fake SearXNG on
loopback (let through by SUGO_FETCH_ALLOW, as Settings(fetch_allow=...)), DuckDuckGo switched off by
its setting so nothing reaches the internet; and Settings → Web search over HTTP (the page and its JSON
twin): the key saved sealed and never sent back, a bad SearXNG URL refused with its sentence."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from sqlmodel import Session

from app.connections.models import AppDefault
from app.tools.builtin.web_search import TOOLS
from app.tools.registry import ToolContext, ToolError
from app.tools.settings import TOOLS_KEY
from tests.support.fake_web import FakeWeb, Seen
from tests.support.live import LiveSugo

WEB_SEARCH = TOOLS[0]
KEY = "BSA-test-key-0123456789"


@pytest.fixture
def engines():
    """One loopback site serving both fakes: Brave under /res/v1, SearXNG under /searx."""
    with FakeWeb(host="127.0.0.2") as web:
        yield web


def _brave_ok(seen: Seen):
    if seen.headers.get("x-subscription-token") != KEY:
        return 401, {"Content-Type": "application/json"}, b'{"error": "bad key"}'
    q = seen.query["q"][0]
    answer = {
        "web": {
            "results": [
                {
                    "title": f"Brave <strong>{q}</strong>",
                    "url": "https://brave.example/1",
                    "description": "From Brave",
                }
            ]
        }
    }
    return 200, {"Content-Type": "application/json"}, json.dumps(answer).encode()


def _searxng_ok(seen: Seen):
    assert seen.query["format"] == ["json"]
    answer = {
        "results": [
            {
                "title": f"SearX {seen.query['q'][0]} {i}",
                "url": f"https://searx.example/{i}",
                "content": f"snippet {i}",
            }
            for i in range(14)
        ]
    }
    return 200, {"Content-Type": "application/json"}, json.dumps(answer).encode()


def _failing(seen: Seen):
    return 500, {"Content-Type": "text/plain"}, b"engine broke"


@pytest.fixture
def sugo_web(tmp_path, engines):
    with LiveSugo(
        tmp_path / "data",
        fetch_allow=("127.0.0.2",),
        brave_url=f"{engines.url}/res/v1",
        start_scheduler=False,
    ) as sugo:
        yield sugo


def _configure(sugo: LiveSugo, **values):
    with sugo.client() as c:
        r = c.put("/api/tools/web", json={"duckduckgo": False, **values})
        assert r.status_code == 200, r.text
        return r.json()


def _search(sugo: LiveSugo, query: str, category: str = "general"):
    ctx = ToolContext(
        services=sugo.services,
        chat_id=1,
        character_id=None,
        persona_id=None,
        message_id=None,
        now=datetime.now(UTC),
    )
    args = WEB_SEARCH.args.model_validate({"query": query, "category": category})
    return asyncio.run(WEB_SEARCH.run(ctx, args))


def test_falls_through_a_failing_brave_to_searxng(sugo_web, engines):
    engines.routes["/res/v1/web/search"] = _failing
    engines.routes["/searx/search"] = _searxng_ok
    _configure(sugo_web, brave_key=KEY, searxng_url=f"{engines.url}/searx")
    result = _search(sugo_web, "green tea")
    lines = result.text.splitlines()
    assert lines[0] == "Web search results for “green tea” from SearXNG:"
    assert lines[1] == "(Tried first, without results: Brave: answered HTTP 500.)"
    assert "1. SearX green tea 0\n   https://searx.example/0\n   snippet 0" in result.text
    assert "10. SearX green tea 9" in result.text and "SearX green tea 10" not in result.text
    assert result.notice == "Searched the web (SearXNG) for “green tea”"
    assert engines.hits("/res/v1/web/search") == 1 and engines.hits("/searx/search") == 1


def test_brave_answers_first_with_the_saved_key(sugo_web, engines):
    engines.routes["/res/v1/news/search"] = _brave_ok
    engines.routes["/searx/search"] = _searxng_ok
    _configure(sugo_web, brave_key=KEY, searxng_url=f"{engines.url}/searx")
    result = _search(sugo_web, "oolong", "news")
    assert result.text.splitlines()[0] == "Web search results for “oolong” from Brave:"
    assert "1. Brave oolong\n   https://brave.example/1\n   From Brave" in result.text
    assert engines.hits("/searx/search") == 0


def test_no_results_and_a_refused_key_fall_through(sugo_web, engines):
    engines.routes["/res/v1/web/search"] = _brave_ok
    engines.json("/searx/search", {"results": []})
    _configure(sugo_web, brave_key="wrong-key", searxng_url=f"{engines.url}/searx")
    with pytest.raises(ToolError) as err:
        _search(sugo_web, "tea")
    assert str(err.value) == (
        "No web search engine gave results: Brave: the API key was refused (HTTP 401); "
        "SearXNG: no results; DuckDuckGo: off in Settings → Web search."
    )


def test_every_engine_failing_names_each(sugo_web, engines):
    engines.routes["/searx/search"] = lambda seen: (403, {"Content-Type": "text/html"}, b"forbidden")
    _configure(sugo_web, searxng_url=f"{engines.url}/searx")
    with pytest.raises(ToolError) as err:
        _search(sugo_web, "tea")
    message = str(err.value)
    assert "Brave: no API key saved" in message
    assert (
        "SearXNG: answered HTTP 403 (for SearXNG: add json to search.formats in its settings.yml)" in message
    )
    assert "DuckDuckGo: off in Settings → Web search" in message


def test_a_searxng_on_loopback_needs_the_allow(tmp_path, engines):
    engines.routes["/searx/search"] = _searxng_ok
    with LiveSugo(tmp_path / "data", start_scheduler=False) as sugo:
        _configure(sugo, searxng_url=f"{engines.url}/searx")
        with pytest.raises(
            ToolError, match="SearXNG: 127.0.0.2 is not fetched: 127.0.0.2 is a loopback address"
        ):
            _search(sugo, "tea")
    assert engines.seen == []


def test_the_key_is_sealed_and_never_sent_back(sugo_web, engines):
    body = _configure(sugo_web, brave_key=KEY, searxng_url=f"{engines.url}/searx/search/")
    assert body == {
        "has_brave_key": True,
        "searxng_url": f"{engines.url}/searx",
        "duckduckgo": False,
        "fetch_allow": ["127.0.0.2"],
    }
    with Session(sugo_web.engine) as s:
        stored = s.get(AppDefault, TOOLS_KEY).value
    assert KEY not in stored and json.loads(stored)["brave_key_sealed"].startswith("sealed:")
    with sugo_web.client() as c:
        page = c.get("/settings/web")
        assert page.status_code == 200 and KEY not in page.text
        assert "A key is saved" in page.text
        assert KEY not in c.get("/api/tools/web").text
        # Saving again without a key keeps it; the Remove button forgets it.
        assert _configure(sugo_web, searxng_url="")["has_brave_key"] is True
        r = c.post("/settings/web/brave-key/delete", headers={"HX-Request": "true"})
        assert r.status_code == 200 and "The Brave key was removed." in r.text and "<html" not in r.text
        assert c.get("/api/tools/web").json()["has_brave_key"] is False


def test_a_bad_searxng_url_is_refused_and_nothing_saved(sugo_web):
    _configure(sugo_web, searxng_url="https://searx.example.org")
    with sugo_web.client() as c:
        r = c.put("/api/tools/web", json={"searxng_url": "searx.example.org"})
        assert r.status_code == 422 and "must start with http:// or https://" in r.text
        r = c.post(
            "/settings/web",
            data={"searxng_url": "ftp://searx.example.org", "duckduckgo": "true"},
            headers={"HX-Request": "true"},
        )
        assert r.status_code == 400
        assert r.headers["HX-Retarget"] == "#web-settings-status"
        assert "must start with http:// or https://" in r.text and "Nothing was saved." in r.text
        r = c.post(
            "/settings/web", data={"searxng_url": "http://x.org/?a=1"}, headers={"Accept": "text/html"}
        )
        assert r.status_code == 400 and 'value="http://x.org/?a=1"' in r.text  # the typed URL stays
        assert c.get("/api/tools/web").json()["searxng_url"] == "https://searx.example.org"
        r = c.put("/api/tools/web", json={"brave_key": "two words"})
        assert r.status_code == 422 and "no spaces" in r.text


def test_bad_arguments_never_reach_the_handler():
    for bad in ({"query": ""}, {"query": "x" * 401}, {"query": "tea", "category": "maps"}):
        with pytest.raises(ValueError):
            WEB_SEARCH.args.model_validate(bad)

"""The web search chain: Brave (with an API key), SearXNG (a URL the owner runs), DuckDuckGo (no key,
through `ddgs`), tried in that order; the first that answers with results wins, and each failure on
the way is kept so the model (and the user) learn why an engine was passed over.

Decisions:
- Brave and SearXNG are fetched through the pinned fetch (app/tools/net/fetch.py), like any page: a
  SearXNG on this machine needs its host in SUGO_FETCH_ALLOW. Brave's base URL is Settings.brave_url
  (SUGO_BRAVE_URL), so tests point it at a fake on loopback.
- DuckDuckGo goes through `ddgs`, which makes its own connections with its own HTTP client (primp, a
  Rust client with browser fingerprints): Sugo cannot hand it a pinned address. So its endpoint host
  is checked first with the same address check (a DNS that sends duckduckgo.com to 10.0.0.1 is
  refused), and the fixed, public endpoints are the only ones it is ever asked to reach. It can be
  switched off in Settings → Web search (tests do, so nothing reaches the internet).
- An engine with no results is a failure too ("no results"): the next engine may know better.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.tools.net.address import AddressRefused, check_url
from app.tools.net.fetch import FetchError, fetch
from app.tools.web.core.hits import SearchHit, brave_hits, ddgs_hits, searxng_hits

log = logging.getLogger(__name__)

ENGINE_TIMEOUT_S = 8.0
ANSWER_MAX_BYTES = 1024 * 1024  # an engine's JSON answer, at most
BRAVE_PATHS = {
    "general": "/web/search",
    "news": "/news/search",
    "images": "/images/search",
    "videos": "/videos/search",
}
SEARXNG_CATEGORIES = {"general": "general", "news": "news", "images": "images", "videos": "videos"}
# The endpoints `ddgs` reaches for DuckDuckGo (ddgs/engines/duckduckgo*.py), checked before it runs.
DDG_ENDPOINTS = {
    "general": "https://html.duckduckgo.com/html/",
    "news": "https://duckduckgo.com/news.js",
    "images": "https://duckduckgo.com/i.js",
    "videos": "https://duckduckgo.com/v.js",
}


class EngineFailed(Exception):
    """One engine could not give results; the message is a short reason ("answered HTTP 500")."""


class SearchFailed(Exception):
    """Every engine failed; `failures` names each one's reason."""

    def __init__(self, failures: list[str]) -> None:
        self.failures = failures
        super().__init__("No web search engine gave results: " + "; ".join(failures) + ".")


@dataclass(frozen=True)
class EngineSetup:
    """What the chain needs, read from the settings once per search."""

    brave_key: str  # unsealed; "" when none is saved
    brave_url: str
    searxng_url: str
    duckduckgo: bool
    allow: tuple[str, ...]  # Settings.fetch_allow
    brave_key_error: str = ""  # a saved key that could not be unsealed


@dataclass(frozen=True)
class SearchOutcome:
    engine: str
    hits: list[SearchHit]
    failures: list[str]  # the engines tried first, with their reasons


async def _json(url: str, setup: EngineSetup, *, params: dict[str, str], headers: dict[str, str]) -> object:
    try:
        got = await fetch(
            url,
            allow=setup.allow,
            max_bytes=ANSWER_MAX_BYTES,
            timeout_s=ENGINE_TIMEOUT_S,
            params=params,
            headers={"Accept": "application/json", **headers},
        )
    except (AddressRefused, FetchError) as err:
        raise EngineFailed(str(err).rstrip(".")) from None
    if got.status in (401, 403) and "X-Subscription-Token" in headers:
        raise EngineFailed(f"the API key was refused (HTTP {got.status})")
    if got.status == 403:
        raise EngineFailed("answered HTTP 403 (for SearXNG: add json to search.formats in its settings.yml)")
    if got.status == 429:
        raise EngineFailed("is rate limiting (HTTP 429)")
    if got.status != 200:
        raise EngineFailed(f"answered HTTP {got.status}")
    if got.truncated:
        raise EngineFailed("answered more than 1 MB")
    try:
        return json.loads(got.body)
    except ValueError:
        raise EngineFailed("answered something that is not JSON") from None


async def search_brave(query: str, category: str, setup: EngineSetup) -> list[SearchHit]:
    if setup.brave_key_error:
        raise EngineFailed(setup.brave_key_error)
    if not setup.brave_key:
        raise EngineFailed("no API key saved")
    answer = await _json(
        setup.brave_url.rstrip("/") + BRAVE_PATHS[category],
        setup,
        params={"q": query, "count": str(10)},
        headers={"X-Subscription-Token": setup.brave_key},
    )
    return brave_hits(answer)


async def search_searxng(query: str, category: str, setup: EngineSetup) -> list[SearchHit]:
    if not setup.searxng_url:
        raise EngineFailed("no URL saved")
    answer = await _json(
        setup.searxng_url.rstrip("/") + "/search",
        setup,
        params={"q": query, "format": "json", "categories": SEARXNG_CATEGORIES[category]},
        headers={},
    )
    return searxng_hits(answer)


def _ddgs_search(query: str, category: str) -> list:
    from ddgs import DDGS  # imported when used: it loads a Rust HTTP client

    client = DDGS(timeout=int(ENGINE_TIMEOUT_S))
    method = {"general": client.text, "news": client.news, "images": client.images, "videos": client.videos}
    return method[category](query, backend="duckduckgo", max_results=10)


async def search_duckduckgo(query: str, category: str, setup: EngineSetup) -> list[SearchHit]:
    if not setup.duckduckgo:
        raise EngineFailed("off in Settings → Web search")
    try:
        # ddgs connects by itself (it cannot be pinned): check where it is going first.
        await check_url(DDG_ENDPOINTS[category], allow=setup.allow)
    except AddressRefused as err:
        raise EngineFailed(str(err).rstrip(".")) from None
    try:
        async with asyncio.timeout(ENGINE_TIMEOUT_S + 2):
            items = await asyncio.to_thread(_ddgs_search, query, category)
    except TimeoutError:
        raise EngineFailed(f"did not answer within {ENGINE_TIMEOUT_S:g} seconds") from None
    except Exception as err:  # ddgs raises its own exceptions and its HTTP client's
        log.info("DuckDuckGo search failed: %r", err)
        reason = str(err).strip() or type(err).__name__
        raise EngineFailed(f"failed ({reason[:160]})") from None
    return ddgs_hits(items)


Engine = Callable[[str, str, EngineSetup], Awaitable[list[SearchHit]]]
ENGINES: tuple[tuple[str, Engine], ...] = (
    ("Brave", search_brave),
    ("SearXNG", search_searxng),
    ("DuckDuckGo", search_duckduckgo),
)


async def search_chain(
    query: str, category: str, setup: EngineSetup, *, engines: tuple[tuple[str, Engine], ...] = ENGINES
) -> SearchOutcome:
    """The first engine's results; raises SearchFailed naming each engine's failure."""
    failures: list[str] = []
    for name, engine in engines:
        try:
            hits = await engine(query, category, setup)
        except EngineFailed as err:
            failures.append(f"{name}: {err}")
            continue
        if hits:
            return SearchOutcome(engine=name, hits=hits, failures=failures)
        failures.append(f"{name}: no results")
    raise SearchFailed(failures)

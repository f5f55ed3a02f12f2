"""Search results from each engine's answer, as one shape (pure: plain data in, plain data out).

Brave and SearXNG answer JSON, `ddgs` answers dicts; each becomes a list of `SearchHit` (title, URL,
snippet), at most MAX_HITS, with HTML tags and entities taken out of titles and snippets (Brave marks
the matched words with <strong>) and each cut to a length a prompt can afford."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CATEGORIES = ("general", "news", "images", "videos")
MAX_HITS = 10
MAX_TITLE_CHARS = 200
MAX_SNIPPET_CHARS = 400
MAX_URL_CHARS = 2048

_TAG = re.compile(r"<[^>]{0,200}>")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


def clean(text: Any, limit: int) -> str:
    """`text` as one line of plain text, at most `limit` characters (an ellipsis when cut)."""
    if not isinstance(text, str):
        return ""
    plain = _SPACE.sub(" ", html.unescape(_TAG.sub("", text))).strip()
    return plain if len(plain) <= limit else plain[: limit - 1].rstrip() + "…"


def _hits(items: Iterable[Any], *, url_keys: Sequence[str], snippet_keys: Sequence[str]) -> list[SearchHit]:
    hits: list[SearchHit] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, Mapping):
            continue
        url = next((v for k in url_keys if isinstance(v := item.get(k), str) and v.strip()), "").strip()
        if not url.startswith(("http://", "https://")) or len(url) > MAX_URL_CHARS or url in seen:
            continue
        snippet = next((s for k in snippet_keys if (s := clean(item.get(k), MAX_SNIPPET_CHARS))), "")
        seen.add(url)
        hits.append(
            SearchHit(title=clean(item.get("title"), MAX_TITLE_CHARS) or url, url=url, snippet=snippet)
        )
        if len(hits) == MAX_HITS:
            break
    return hits


def brave_hits(answer: Any) -> list[SearchHit]:
    """Brave Search API: web search answers {"web": {"results": [...]}}, news, images and videos
    answer {"results": [...]}; an image's page is `url`, its picture `properties.url`."""
    if not isinstance(answer, Mapping):
        return []
    web = answer.get("web")
    items = web.get("results") if isinstance(web, Mapping) else answer.get("results")
    if not isinstance(items, list):
        return []
    return _hits(items, url_keys=("url",), snippet_keys=("description", "extra_snippets", "age"))


def searxng_hits(answer: Any) -> list[SearchHit]:
    """SearXNG's JSON API: {"results": [{"title", "url", "content", "img_src"?}]}."""
    items = answer.get("results") if isinstance(answer, Mapping) else None
    if not isinstance(items, list):
        return []
    return _hits(items, url_keys=("url",), snippet_keys=("content", "img_src"))


def ddgs_hits(items: Any) -> list[SearchHit]:
    """`ddgs`: text results {title, href, body}; news {title, url, body, date, source}; images
    {title, url, image}; videos {title, content (the page), description}."""
    if not isinstance(items, list):
        return []
    return _hits(items, url_keys=("href", "url", "content"), snippet_keys=("body", "description", "image"))


def format_hits(query: str, engine: str, hits: Sequence[SearchHit], failures: Sequence[str] = ()) -> str:
    """What the model reads: a header naming the engine (and those that failed first), then the
    numbered results."""
    lines = [f"Web search results for “{query}” from {engine}:"]
    if failures:
        lines.append(f"(Tried first, without results: {'; '.join(failures)}.)")
    for number, hit in enumerate(hits, 1):
        lines.append(f"\n{number}. {hit.title}\n   {hit.url}")
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
    return "\n".join(lines)

"""fetch_url(url): the readable text of a web page, for the model.

The page is fetched through the pinned fetch (app/tools/net/fetch.py: the address check on every
hop, at most 3 redirects, at most 2 MB read), its main text taken out with trafilatura (the plain text
of the whole HTML when trafilatura finds no article), and at most 20,000 characters returned, with the
title and the final URL on top. Text that is not HTML (plain text, JSON, XML, CSS, code) is returned
as it is; anything binary (a PDF, an image, an archive) is refused with a sentence."""

from __future__ import annotations

import asyncio
import re
from urllib.parse import urlsplit

import trafilatura
from pydantic import BaseModel, ConfigDict, Field

from app.tools.net.address import MAX_URL_CHARS, AddressRefused
from app.tools.net.fetch import PAGE_MAX_BYTES, Fetched, FetchError, fetch
from app.tools.registry import MAX_RESULT_CHARS, Tool, ToolContext, ToolError, ToolResult

FETCH_TIMEOUT_S = 15.0
_HTML = {"text/html", "application/xhtml+xml"}
_TEXT_APPLICATION = {
    "application/json", "application/xml", "application/javascript", "application/x-javascript",
    "application/ecmascript", "application/yaml", "application/x-yaml", "application/toml",
    "application/ld+json", "application/rss+xml", "application/atom+xml", "application/x-sh",
    "application/sql", "application/graphql",
}  # fmt: skip # a table of the text types that do not start with text/
_TITLE = re.compile(rb"<title[^>]{0,200}>(.{0,600}?)</title>", re.IGNORECASE | re.DOTALL)


class FetchUrlArgs(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)
    url: str = Field(
        min_length=1,
        max_length=MAX_URL_CHARS,
        description="The full http:// or https:// address of the page to read",
    )


def _kind(got: Fetched) -> str:
    """ "html", "text" or "binary", from the content type (sniffed from the bytes when there is none)."""
    ctype = got.content_type
    if ctype in _HTML:
        return "html"
    if ctype.startswith("text/") or ctype in _TEXT_APPLICATION or ctype.endswith(("+json", "+xml")):
        return "text"
    if ctype and ctype != "application/octet-stream":
        return "binary"
    head = got.body[:1024]
    if b"\x00" in head:
        return "binary"
    if re.search(rb"<(!doctype html|html|head|body)\b", head, re.IGNORECASE):
        return "html"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 4:  # not merely a character cut at the 1,024th byte
            return "binary"
    return "text"


def _decode(got: Fetched) -> str:
    try:
        return got.body.decode(got.charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return got.body.decode("utf-8", errors="replace")


def _readable(got: Fetched) -> tuple[str, str]:
    """(title, text) of an HTML page: trafilatura's main text, else the plain text of it all."""
    # Without a charset in the header, trafilatura reads the bytes itself (a <meta charset>, or a guess).
    html: str | bytes = _decode(got) if got.charset else got.body
    doc = trafilatura.bare_extraction(html, url=got.url, with_metadata=True, include_comments=False)
    title = (getattr(doc, "title", None) or "").strip()
    text = (getattr(doc, "text", None) or "").strip()
    if not text:
        text = (trafilatura.html2txt(html) or "").strip()
    if not title and (found := _TITLE.search(got.body)):
        title = " ".join(found.group(1).decode("utf-8", errors="replace").split())
    return title[:300], text


def _result(url: str, title: str, text: str, *, truncated: bool) -> str:
    head = [f"Title: {title}" if title else "Title: (none)", f"URL: {url}"]
    if truncated:
        head.append(
            f"(The page is larger than {PAGE_MAX_BYTES // (1024 * 1024)} MB: only its start was read.)"
        )
    top = "\n".join(head) + "\n\n"
    if not text:
        return top + "The page has no readable text (it may need JavaScript, or be only pictures)."
    room = MAX_RESULT_CHARS - len(top)
    if len(text) <= room:
        return top + text
    note = (
        f"\n\n[Cut here: the text is {len(text):,} characters long and only the first {{shown:,}} are shown.]"
    )
    shown = room - len(note.format(shown=room)) - 1
    return top + text[:shown].rstrip() + note.format(shown=shown)


async def read_url(ctx: ToolContext, args: FetchUrlArgs) -> ToolResult:
    try:
        got = await fetch(
            args.url,
            allow=ctx.services.settings.fetch_allow,
            max_bytes=PAGE_MAX_BYTES,
            timeout_s=FETCH_TIMEOUT_S,
            headers={"Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"},
        )
    except (AddressRefused, FetchError) as err:
        raise ToolError(str(err)) from None
    if got.status >= 400:
        raise ToolError(f"{got.url} answered HTTP {got.status}: there is no page to read.")
    if not 200 <= got.status < 300:
        raise ToolError(f"{got.url} answered HTTP {got.status} without a page to read.")
    kind = _kind(got)
    if kind == "binary":
        raise ToolError(
            f"{got.url} is not a text page (it is {got.content_type or 'binary data'}); "
            "fetch_url reads only web pages and text."
        )
    if kind == "html":
        title, text = await asyncio.to_thread(_readable, got)
    else:
        title, text = "", _decode(got).strip()
    host = urlsplit(got.url).hostname or got.url
    return ToolResult(
        text=_result(got.url, title, text, truncated=got.truncated),
        notice=f"Read {title[:80]} ({host})" if title else f"Read a page from {host}",
    )


TOOLS = [
    Tool(
        name="fetch_url",
        description=(
            "Read a web page: returns its title, final URL and main text (up to 20,000 characters). "
            "Use it when the user gives a link or a page must be read to answer."
        ),
        args=FetchUrlArgs,
        run=read_url,
        permission="url_fetch",
        macro="url_fetch_tool",
        family="url_fetch",
        label="Read a web page",
        timeout_s=25.0,
    )
]

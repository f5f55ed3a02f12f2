"""The SearXNG URL the owner types, checked before it is saved (pure)."""

from __future__ import annotations

from urllib.parse import urlsplit

from app.platform.core.errors import UserError

MAX_URL_CHARS = 2048


def searxng_url(raw: str) -> str:
    """`raw` as the saved base URL (trimmed, no trailing slash, no /search); "" clears it. Raises
    UserError with a sentence for anything that is not an http(s) address."""
    url = raw.strip()
    if not url:
        return ""
    if len(url) > MAX_URL_CHARS:
        raise UserError(f"The SearXNG URL is longer than {MAX_URL_CHARS} characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (reading it checks it)
    except ValueError:
        raise UserError(f"“{url[:100]}” is not a URL Sugo can read.") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise UserError(
            f"The SearXNG URL must start with http:// or https:// and name a host "
            f"(like https://searx.example.org), not “{url[:100]}”."
        )
    if parts.username or parts.password:
        raise UserError("Put no user name or password in the SearXNG URL.")
    if parts.query or parts.fragment:
        raise UserError("The SearXNG URL is the address of the instance, without ? or # parts.")
    base = url.rstrip("/")
    # The search page's own address works too: the engine adds /search itself.
    if parts.path.rstrip("/").endswith("/search"):
        base = base.removesuffix("/search").rstrip("/")
    return base

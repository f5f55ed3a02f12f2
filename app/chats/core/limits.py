"""How big a message and an imported chat may be. A 10 MB message was stored, rendered on every
page view and sent with every prompt; no roleplay turn comes near these limits."""

from __future__ import annotations

MAX_MESSAGE_BYTES = 256 * 1024  # UTF-8 bytes of one message (or one swipe)
MAX_IMPORT_MESSAGES = 100_000  # messages in one imported chat file


def message_too_long(text: str) -> str | None:
    """Why `text` is too long for a message, or None."""
    size = len(text.encode("utf-8", "replace")) if len(text) * 4 > MAX_MESSAGE_BYTES else len(text)
    if size <= MAX_MESSAGE_BYTES:
        return None
    return f"The message is {size:,} bytes; messages are limited to {MAX_MESSAGE_BYTES // 1024} KB ({MAX_MESSAGE_BYTES:,} bytes)."

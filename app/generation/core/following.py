"""What a page following a reply written on another server is sent: the reply's stored version, read
now and then, turned into the events the writing server streams to its own pages (`start`, `token`,
`reasoning`, `rewrite`, `thought`, `tool_result`, then `done`, `stopped` or `error`). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Event = tuple[str, dict]

# What a follower says when the server writing the reply died (its claim went stale mid-reply).
WRITER_GONE = "The server writing this reply stopped before it was finished."


@dataclass(frozen=True)
class StoredReply:
    """One read of the version being written: what a page has been shown so far, or what is stored now."""

    text: str = ""
    reasoning: str = ""
    reasoning_ms: int | None = None
    tool_calls: tuple[dict, ...] = ()  # as the page shows them while streaming (id, name, label, error, ms)
    status: str = "streaming"
    error: str | None = None


def growth_events(
    shown: StoredReply, stored: StoredReply, *, message_id: int, label: Callable[[int | None], str]
) -> list[Event]:
    """The events that take a page from `shown` to `stored`. Text and reasoning only grow while a reply
    streams; when either did not (what streamed as the reply was thinking), the page is told to start
    over (`rewrite`) and given the whole text again."""
    events: list[Event] = []
    grew = stored.text.startswith(shown.text) and stored.reasoning.startswith(shown.reasoning)
    if not grew:
        events.append(("rewrite", {"text": "", "reasoning": stored.reasoning}))
        shown = StoredReply(reasoning=stored.reasoning, reasoning_ms=shown.reasoning_ms)
    if len(stored.reasoning) > len(shown.reasoning):
        events.append(("reasoning", {"text": stored.reasoning[len(shown.reasoning) :]}))
    for call in stored.tool_calls[len(shown.tool_calls) :]:
        events.append(("tool_result", {"message_id": message_id, **call}))
    if len(stored.text) > len(shown.text):
        events.append(("token", {"text": stored.text[len(shown.text) :]}))
    if shown.reasoning_ms is None and stored.reasoning_ms is not None:
        events.append(("thought", {"ms": stored.reasoning_ms, "label": label(stored.reasoning_ms)}))
    return events


def end_event(stored: StoredReply, *, message_id: int, message_ids: list[int], stopped_error: str) -> Event:
    """The last event, as the writing server sent it, read from how the version was left."""
    if stored.status == "ok":
        return "done", {"message_id": message_id, "message_ids": message_ids}
    if stored.status == "streaming":  # its writer is gone and nobody finished it yet
        return "error", {"message_id": message_id, "kind": "interrupted", "message": WRITER_GONE}
    if stored.error == stopped_error:
        return "stopped", {"message_id": message_id, "text_kept": bool(stored.text)}
    return "error", {
        "message_id": message_id,
        "kind": "stored",
        "message": stored.error or "The reply could not be written.",
    }

"""A page following a reply written on another server (app/generation/core/following.py): the stored
version, read now and then, becomes the events the writing server streams to its own pages."""

from __future__ import annotations

from app.generation.core.following import WRITER_GONE, StoredReply, end_event, growth_events

STOPPED = "Stopped before the reply was finished."


def _label(ms: int | None) -> str:
    return f"Thought for {ms} ms"


def _grow(shown: StoredReply, stored: StoredReply) -> list:
    return growth_events(shown, stored, message_id=9, label=_label)


def test_new_text_is_sent_as_the_tokens_it_grew_by():
    assert _grow(StoredReply(), StoredReply(text="Hello")) == [("token", {"text": "Hello"})]
    assert _grow(StoredReply(text="Hello"), StoredReply(text="Hello there")) == [
        ("token", {"text": " there"})
    ]
    assert _grow(StoredReply(text="Hello"), StoredReply(text="Hello")) == []  # nothing new: nothing sent


def test_reasoning_grows_apart_and_its_end_is_a_thought():
    shown = StoredReply(reasoning="Let me")
    stored = StoredReply(reasoning="Let me think.", reasoning_ms=1200, text="Yes.")
    assert _grow(shown, stored) == [
        ("reasoning", {"text": " think."}),
        ("token", {"text": "Yes."}),
        ("thought", {"ms": 1200, "label": "Thought for 1200 ms"}),
    ]
    assert _grow(stored, stored) == []  # the thought is said once


def test_text_that_turned_out_to_be_reasoning_starts_the_page_over():
    shown = StoredReply(text="<think>Hmm")
    stored = StoredReply(reasoning="Hmm, yes", text="Fine.")
    assert _grow(shown, stored) == [
        ("rewrite", {"text": "", "reasoning": "Hmm, yes"}),
        ("token", {"text": "Fine."}),
    ]


def test_finished_tool_calls_are_sent_once_each():
    call = {"id": "c1", "name": "roll_dice", "label": "Dice", "error": None, "ms": 3, "notice": None}
    events = _grow(StoredReply(), StoredReply(tool_calls=(call,)))
    assert events == [("tool_result", {"message_id": 9, **call})]
    assert _grow(StoredReply(tool_calls=(call,)), StoredReply(tool_calls=(call,), text="4")) == [
        ("token", {"text": "4"})
    ]


def test_the_last_event_follows_how_the_version_was_left():
    def end(stored: StoredReply) -> tuple:
        return end_event(stored, message_id=9, message_ids=[9, 10], stopped_error=STOPPED)

    assert end(StoredReply(text="Done.", status="ok")) == ("done", {"message_id": 9, "message_ids": [9, 10]})
    assert end(StoredReply(text="Half", status="partial", error=STOPPED)) == (
        "stopped",
        {"message_id": 9, "text_kept": True},
    )
    assert end(StoredReply(status="error", error=STOPPED)) == (
        "stopped",
        {"message_id": 9, "text_kept": False},
    )
    assert end(StoredReply(text="Half", status="partial", error="The provider said no.")) == (
        "error",
        {"message_id": 9, "kind": "stored", "message": "The provider said no."},
    )
    # Its writer is gone and nobody finished it yet.
    assert end(StoredReply(text="Half")) == (
        "error",
        {"message_id": 9, "kind": "interrupted", "message": WRITER_GONE},
    )

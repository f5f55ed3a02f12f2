import json
from datetime import UTC, datetime

import pytest

from app.memory.recall.core.formats import (
    MINILM_SPACE,
    ChunkRecord,
    MemoryFileError,
    export_envelope,
    parse_import,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
T = datetime(2026, 8, 30, 10, 0, tzinfo=UTC)


def test_round_trip():
    chunk = ChunkRecord("Alice: hi\n\nBob: hey", [0.1] * 384, MINILM_SPACE, 5, T, T, T, windows=[[0.1] * 384])
    doc = export_envelope(chat_id=7, name="RP", mode="roleplay", chunks=[chunk], now=NOW)
    assert doc["type"] == "marinara_memory_recall" and doc["data"]["sourceChat"]["memoryCount"] == 1
    source, chunks = parse_import(json.dumps(doc).encode(), now=NOW)
    assert source == "7" and chunks == [chunk]


def test_marinara_file_with_its_default_model_keeps_vectors():
    doc = {
        "type": "marinara_memory_recall",
        "version": 1,
        "exportedAt": "2026-09-01T12:00:00.000Z",
        "data": {
            "sourceChat": {"id": "abc123", "name": "My RP", "mode": "roleplay", "memoryCount": 2},
            "chunks": [
                {
                    "content": "Alice: a",
                    "embedding": [0.5] * 384,
                    "embeddingSpaceId": None,
                    "messageCount": 5,
                    "firstMessageAt": "2026-08-30T10:00:00.000Z",
                    "lastMessageAt": "2026-08-30T10:07:00.000Z",
                    "createdAt": "2026-08-30T10:08:00.000Z",
                },
                {"content": "Bob: b", "embedding": [1, "x"], "firstMessageAt": "garbage"},
                {"content": "   "},
            ],
        },
    }
    source, chunks = parse_import(json.dumps(doc).encode(), now=NOW)
    assert source == "abc123" and len(chunks) == 2
    assert chunks[0].space_id == MINILM_SPACE and chunks[0].first_message_at == T
    assert chunks[1].embedding is None and chunks[1].space_id is None and chunks[1].first_message_at == NOW


@pytest.mark.parametrize(
    "raw, words",
    [
        (b"not json", "not a JSON"),
        (b'{"type": "marinara_lorebook", "version": 1}', "not a Memory Recall export"),
        (b'{"type": "marinara_memory_recall", "version": 1, "data": {"chunks": []}}', "sourceChat"),
        (
            b'{"type": "marinara_memory_recall", "version": 1, "data": {"sourceChat": {"id": "x"}}}',
            "data.chunks",
        ),
    ],
)
def test_bad_files_are_refused_clearly(raw, words):
    with pytest.raises(MemoryFileError, match=words):
        parse_import(raw, now=NOW)


def test_non_finite_numbers_and_oversized_files_are_refused():
    doc = {
        "type": "marinara_memory_recall",
        "version": 1,
        "data": {"sourceChat": {"id": "a"}, "chunks": [{"content": "x", "embedding": [0.1, float("nan")]}]},
    }
    with pytest.raises(MemoryFileError, match="NaN or infinity"):
        parse_import(json.dumps(doc).encode(), now=NOW)  # json writes NaN, as a broken exporter might
    with pytest.raises(MemoryFileError, match="50.0 MB"):
        parse_import(b" " * (50 * 1024 * 1024), now=NOW)
    with pytest.raises(MemoryFileError, match="version 1"):
        parse_import(b'{"type": "marinara_memory_recall", "version": 2, "data": {}}', now=NOW)

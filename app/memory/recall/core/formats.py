"""`.marinara.json` Memory Recall files, in and out (Marinara Engine's envelope). Pure functions."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from app.platform.core import jsonin

ENVELOPE_TYPE = "marinara_memory_recall"
MAX_IMPORT_BYTES = 32 * 1024 * 1024
MINILM_SPACE = "builtin:all-MiniLM-L6-v2:384"


class MemoryFileError(ValueError):
    """Why a memory file was refused, as one sentence for the user."""


@dataclass(frozen=True)
class ChunkRecord:
    content: str
    embedding: list[float] | None
    space_id: str | None
    message_count: int
    first_message_at: datetime
    last_message_at: datetime
    created_at: datetime
    windows: list[list[float]] | None = None  # Sugo's per-window vectors, when the file came from Sugo

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.first_message_at.isoformat(), self.last_message_at.isoformat(), self.content)


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def export_envelope(
    *, chat_id: int, name: str, mode: str, chunks: Sequence[ChunkRecord], now: datetime
) -> dict:
    return {
        "type": ENVELOPE_TYPE,
        "version": 1,
        "exportedAt": _iso(now),
        "data": {
            "sourceChat": {"id": str(chat_id), "name": name, "mode": mode, "memoryCount": len(chunks)},
            "chunks": [
                {
                    "content": c.content,
                    "embedding": c.embedding,
                    "embeddingSpaceId": c.space_id,
                    "messageCount": c.message_count,
                    "firstMessageAt": _iso(c.first_message_at),
                    "lastMessageAt": _iso(c.last_message_at),
                    "createdAt": _iso(c.created_at),
                    **({"sugoWindows": c.windows} if c.windows else {}),
                }
                for c in sorted(chunks, key=lambda c: c.first_message_at)
            ],
        },
    }


def _time(value, fallback: datetime) -> datetime:
    if isinstance(value, str) and value:
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
        except ValueError:
            return fallback
    return fallback


def _vector(value) -> list[float] | None:
    """A usable vector, or None (missing, empty or not numbers: the memory is embedded anew).
    NaN or infinity inside a vector means a damaged file, which is refused."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        return None
    if not all(math.isfinite(x) for x in value):
        raise MemoryFileError("A memory's embedding holds NaN or infinity: the file is damaged.")
    return [float(x) for x in value]


def normalise_space(space_id, vector: list[float] | None) -> str | None:
    """Marinara's default model is all-MiniLM-L6-v2, the same as Sugo's built-in one: its 384-dim
    vectors are used as they are. Other spaces are kept by name (Sugo's own ids match again)."""
    if vector is None:
        return None
    if isinstance(space_id, str) and space_id:
        if "minilm-l6-v2" in space_id.lower() and len(vector) == 384:
            return MINILM_SPACE
        return space_id
    return MINILM_SPACE if len(vector) == 384 else None


def space_dims(space_id: str | None) -> int | None:
    """The vector size a space id names (`source:model:dims`), None when it names none."""
    if not space_id:
        return None
    tail = space_id.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() and int(tail) > 0 else None


def _check_sizes(
    number: int, space_id: str | None, vectors: Sequence[list[float]], seen: dict[str, int]
) -> None:
    """Refuse a file whose vectors do not fit their space: stored, a wrong-size vector breaks every
    search of the chat (and with it the prompt)."""
    if space_id is None:
        return
    want = space_dims(space_id) or seen.get(space_id)
    for vector in vectors:
        if want is not None and len(vector) != want:
            raise MemoryFileError(
                f"Memory {number}'s embedding has {len(vector)} numbers, but its space {space_id} has {want}: "
                "the file is damaged."
            )
        want = len(vector)
    if want is not None:
        seen[space_id] = want


def parse_import(raw: bytes, *, now: datetime) -> tuple[str, list[ChunkRecord]]:
    """(source chat id, chunks) from a `.marinara.json` / `.json` / `.marinara` memory file."""
    if len(raw) > MAX_IMPORT_BYTES:
        raise MemoryFileError(
            f"The file is {len(raw) / 1024 / 1024:.1f} MB; memory files over 32 MB are refused."
        )
    try:
        doc = jsonin.loads(raw.decode("utf-8-sig"))
    except jsonin.JsonTooDeep as err:
        raise MemoryFileError(f"This memory file was refused: {err}.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise MemoryFileError("This is not a JSON memory file.") from err
    if not isinstance(doc, dict) or doc.get("type") != ENVELOPE_TYPE or doc.get("version") != 1:
        raise MemoryFileError(
            'This is not a Memory Recall export (expected type "marinara_memory_recall", version 1).'
        )
    data = doc.get("data")
    source = data.get("sourceChat") if isinstance(data, dict) else None
    if (
        not isinstance(source, dict)
        or not isinstance(source.get("id"), str | int)
        or not str(source.get("id"))
    ):
        raise MemoryFileError("The file does not say which chat its memories came from (data.sourceChat.id).")
    chunks = data.get("chunks")
    if not isinstance(chunks, list):
        raise MemoryFileError("The file has no list of memories (data.chunks).")
    out = []
    sizes: dict[str, int] = {}
    for number, item in enumerate(chunks, 1):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("content"), str)
            or not item["content"].strip()
        ):
            continue
        vector = _vector(item.get("embedding"))
        windows = item.get("sugoWindows")
        windows = [w for w in (_vector(x) for x in windows) if w] if isinstance(windows, list) else None
        space_id = normalise_space(item.get("embeddingSpaceId"), vector)
        # What import stores: Sugo's windows when the file has them, else the one embedding.
        _check_sizes(number, space_id, windows or ([vector] if vector else []), sizes)
        count = item.get("messageCount")
        out.append(
            ChunkRecord(
                content=item["content"],
                embedding=vector,
                space_id=space_id,
                message_count=count if isinstance(count, int) and count > 0 else 1,
                first_message_at=_time(item.get("firstMessageAt"), now),
                last_message_at=_time(item.get("lastMessageAt"), now),
                created_at=_time(item.get("createdAt"), now),
                windows=windows or None,
            )
        )
    return str(source["id"]), out

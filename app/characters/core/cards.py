"""SillyTavern character cards (V1 / V2 / V3) in JSON and PNG form.

Pure functions only: bytes in, dataclasses / dicts / bytes out. The guiding rule is the
V2 spec's "never destroy unknown fields": everything we do not model explicitly is kept
verbatim in ``extensions``, ``character_book``, ``data_extra`` or ``top_extra`` so that an
import followed by an export gives back the same card.
"""

from __future__ import annotations

import base64
import binascii
import copy
import io
import json
import logging
import math
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

from app.platform.core import jsonin
from app.platform.core.jsonin import JsonTooDeep

logger = logging.getLogger(__name__)

MAX_CARD_BYTES = 12 * 1024 * 1024

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

SPEC_V2 = "chara_card_v2"
SPEC_V3 = "chara_card_v3"
SPEC_V1 = "v1"

# The six fields of the legacy flat card; SillyTavern still writes copies of them at the top level.
V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example")
_STRING_FIELDS = V1_FIELDS + (
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "creator",
    "character_version",
)
_LIST_FIELDS = ("alternate_greetings", "tags")
_KNOWN_DATA_KEYS = frozenset(_STRING_FIELDS + _LIST_FIELDS + ("extensions", "character_book"))
_CARD_KEYWORDS = ("ccv3", "chara")  # preference order, as SillyTavern reads them
_TEXT_CHUNK_TYPES = (b"tEXt", b"zTXt", b"iTXt")
# zTXt / iTXt payloads are inflated with a cap so a tiny chunk cannot expand into gigabytes.
_MAX_INFLATED_TEXT = 4 * MAX_CARD_BYTES

PLACEHOLDER_SIZE = (400, 600)
PLACEHOLDER_COLOR = (38, 38, 46)


class CardError(ValueError):
    """Why a card was refused, as one clear sentence for the user."""


@dataclass
class CardData:
    spec: str  # "chara_card_v2" | "chara_card_v3" | "v1"
    spec_version: str  # as found ("2.0", "3.0", ...); "" for v1
    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    creator_notes: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""
    alternate_greetings: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    creator: str = ""
    character_version: str = ""
    extensions: dict[str, Any] = field(default_factory=dict)
    character_book: dict[str, Any] | None = None
    data_extra: dict[str, Any] = field(default_factory=dict)
    top_extra: dict[str, Any] = field(default_factory=dict)
    image: bytes | None = None


# --------------------------------------------------------------------------- PNG chunks


@dataclass
class _Chunk:
    type: bytes
    data: bytes


def _damaged(detail: str) -> CardError:
    logger.info("refusing damaged PNG: %s", detail)
    return CardError(f"This PNG file is damaged ({detail}).")


def _parse_png(raw: bytes) -> list[_Chunk]:
    """Split a PNG into chunks, checking structure and CRCs; stops at IEND."""
    if not raw.startswith(PNG_SIGNATURE):
        raise _damaged("missing PNG signature")
    chunks: list[_Chunk] = []
    pos = len(PNG_SIGNATURE)
    while True:
        if pos + 12 > len(raw):
            raise _damaged("the file ends before the IEND chunk")
        (length,) = struct.unpack(">I", raw[pos : pos + 4])
        ctype = raw[pos + 4 : pos + 8]
        if length > 0x7FFFFFFF or not ctype.isalpha():
            raise _damaged(f"invalid chunk header at byte {pos}")
        end = pos + 12 + length
        if end > len(raw):
            raise _damaged(f"the {ctype.decode('ascii')} chunk is truncated")
        data = raw[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", raw[end - 4 : end])
        if zlib.crc32(ctype + data) != crc:
            raise _damaged(f"bad checksum in the {ctype.decode('ascii')} chunk")
        if not chunks and (ctype != b"IHDR" or length != 13):
            raise _damaged("the first chunk is not IHDR")
        chunks.append(_Chunk(ctype, data))
        pos = end
        if ctype == b"IEND":
            # Bytes after IEND are ignored (some tools append junk); they are not part of the image.
            return chunks


def _encode_png(chunks: list[_Chunk]) -> bytes:
    out = [PNG_SIGNATURE]
    for chunk in chunks:
        out.append(struct.pack(">I", len(chunk.data)))
        out.append(chunk.type)
        out.append(chunk.data)
        out.append(struct.pack(">I", zlib.crc32(chunk.type + chunk.data)))
    return b"".join(out)


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, _MAX_INFLATED_TEXT)
    if inflater.unconsumed_tail:
        raise ValueError("compressed text chunk is too large")
    return out


def _decode_text_chunk(chunk: _Chunk) -> tuple[str, str] | None:
    """(keyword, text) of a tEXt/zTXt/iTXt chunk, or None if it is not one or is malformed."""
    if chunk.type not in _TEXT_CHUNK_TYPES or b"\0" not in chunk.data:
        return None
    keyword_raw, rest = chunk.data.split(b"\0", 1)
    keyword = keyword_raw.decode("latin-1")
    try:
        if chunk.type == b"tEXt":
            return keyword, rest.decode("latin-1")
        if chunk.type == b"zTXt":
            return keyword, _inflate(rest[1:]).decode("latin-1")
        # iTXt: compression flag, method, language tag \0, translated keyword \0, UTF-8 text.
        compressed = rest[:1] == b"\x01"
        _lang, _translated, text = rest[2:].split(b"\0", 2)
        if compressed:
            text = _inflate(text)
        return keyword, text.decode("utf-8")
    except (ValueError, zlib.error, UnicodeDecodeError) as exc:
        logger.warning("ignoring unreadable %s chunk %r: %s", chunk.type.decode(), keyword, exc)
        return None


def _is_card_chunk(chunk: _Chunk) -> bool:
    decoded = _decode_text_chunk(chunk) if chunk.type in _TEXT_CHUNK_TYPES else None
    return decoded is not None and decoded[0].lower() in _CARD_KEYWORDS


def read_png_text_chunks(raw: bytes) -> dict[str, str]:
    """keyword -> text for every tEXt/zTXt/iTXt chunk; the first chunk wins on duplicates."""
    texts: dict[str, str] = {}
    for chunk in _parse_png(raw):
        decoded = _decode_text_chunk(chunk)
        if decoded is not None:
            texts.setdefault(decoded[0], decoded[1])
    return texts


def _text_chunk(keyword: str, text: str) -> _Chunk:
    return _Chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + text.encode("latin-1"))


# --------------------------------------------------------------------------- reading


def _size_mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def _decode_json_text(raw: bytes) -> Any:
    """Parse UTF-8 (BOM tolerated) JSON; raises ValueError on anything else."""
    text = raw.decode("utf-8-sig")
    return jsonin.loads(text)


def _str_field(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if value is None:
        # Some generators write null for empty optional text; treating it as "" is harmless.
        return ""
    if key == "character_version" and isinstance(value, int | float) and not isinstance(value, bool):
        # Seen in the wild as a bare number (1.0); a version label is still a label.
        return str(value)
    if not isinstance(value, str):
        raise CardError(f"The card's '{where}{key}' field must be text, not {_type_name(value)}.")
    return value


def _str_list_field(data: dict[str, Any], key: str, where: str) -> list[str]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CardError(f"The card's '{where}{key}' field must be a list of text values.")
    return list(value)


def _type_name(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        bool: "true/false",
        int: "a number",
        float: "a number",
        type(None): "null",
        str: "text",
    }.get(type(value), type(value).__name__)


def _check_book(book: Any) -> dict[str, Any] | None:
    if book is None:
        return None
    if not isinstance(book, dict):
        raise CardError("The card's 'data.character_book' field must be an object.")
    # Book-level "extensions" may be missing (SillyTavern itself writes such books): keep verbatim.
    if "entries" in book and not isinstance(book["entries"], list):
        raise CardError("The card's 'data.character_book.entries' field must be a list.")
    return book


def _card_from_v1(obj: dict[str, Any]) -> CardData:
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CardError("This card has no 'name' (every character card needs one).")
    fields = {key: _str_field(obj, key, "") for key in V1_FIELDS}
    card = CardData(spec=SPEC_V1, spec_version="", **fields)
    # Older SillyTavern kept the creator's notes and tags as flat extras; carry them into V2 fields.
    if isinstance(obj.get("creatorcomment"), str):
        card.creator_notes = obj["creatorcomment"]
    if isinstance(obj.get("tags"), list) and all(isinstance(t, str) for t in obj["tags"]):
        card.tags = list(obj["tags"])
    # The flat fields stay in top_extra too, so the export keeps SillyTavern's flat copies.
    card.top_extra = copy.deepcopy(obj)
    return card


def _parse_spec_version(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if math.isnan(number):
        raise CardError(f"The card's 'spec_version' ({value!r}) is not a version number.")
    return number


def _card_from_spec(obj: dict[str, Any], spec: str) -> CardData:
    raw_version = obj.get("spec_version", "")
    if spec == SPEC_V3:
        version = _parse_spec_version(raw_version)
        if version >= 4.0:
            raise CardError(
                f"This card uses spec version {raw_version}; only versions below 4.0 are supported."
            )
        if version > 3.0:
            logger.warning("importing character card with newer spec_version %s as V3", raw_version)
    elif str(raw_version) != "2.0":
        logger.warning("importing chara_card_v2 card with unexpected spec_version %r", raw_version)

    data = obj.get("data")
    if not isinstance(data, dict):
        missing = "is missing" if data is None else f"must be an object, not {_type_name(data)}"
        raise CardError(f"The card's 'data' field {missing}.")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CardError("This card has no 'data.name' (every character card needs one).")

    extensions = data.get("extensions")
    if extensions is None:
        extensions = {}
    elif not isinstance(extensions, dict):
        raise CardError("The card's 'data.extensions' field must be an object.")
    if "group_only_greetings" in data:
        _str_list_field(data, "group_only_greetings", "data.")

    data_extra = {k: v for k, v in data.items() if k not in _KNOWN_DATA_KEYS}
    if "character_book" in data and data["character_book"] is None:
        # An explicit null would otherwise vanish on export; data_extra gives way to a real book later.
        data_extra["character_book"] = None

    card = CardData(
        spec=spec,
        spec_version=str(raw_version),
        **{key: _str_field(data, key, "data.") for key in _STRING_FIELDS},
        **{key: _str_list_field(data, key, "data.") for key in _LIST_FIELDS},
        extensions=extensions,
        character_book=_check_book(data.get("character_book")),
        data_extra=data_extra,
        top_extra={k: v for k, v in obj.items() if k not in ("spec", "spec_version", "data")},
    )
    return copy.deepcopy(card)


def _card_from_object(obj: Any) -> CardData:
    if not isinstance(obj, dict):
        raise CardError(f"The card JSON must be an object, not {_type_name(obj)}.")
    spec = obj.get("spec")
    if spec in (SPEC_V2, SPEC_V3):
        return _card_from_spec(obj, spec)
    if spec is not None:
        raise CardError(f"Unsupported card format: spec {spec!r} (expected chara_card_v2 or chara_card_v3).")
    return _card_from_v1(obj)


def _card_from_png(raw: bytes) -> CardData:
    chunks = _parse_png(raw)
    found: dict[str, str] = {}
    for chunk in chunks:
        decoded = _decode_text_chunk(chunk)
        if decoded is not None and decoded[0].lower() in _CARD_KEYWORDS:
            found.setdefault(decoded[0].lower(), decoded[1])
    if not found:
        raise CardError("This PNG has no character card inside (no 'chara' or 'ccv3' data).")

    first_error: CardError | None = None
    for keyword in _CARD_KEYWORDS:
        if keyword not in found:
            continue
        try:
            payload = base64.b64decode(found[keyword].strip() + "==")
            obj = _decode_json_text(payload)
        except JsonTooDeep as exc:
            first_error = first_error or CardError(
                f"The '{keyword}' character data inside this PNG was refused: {exc}."
            )
            continue
        except (binascii.Error, ValueError) as exc:
            logger.warning("PNG card chunk %r is not base64 JSON: %s", keyword, exc)
            err = CardError(f"The '{keyword}' character data inside this PNG is not readable card JSON.")
            first_error = first_error or err
            continue
        try:
            card = _card_from_object(obj)
        except CardError as err:
            # A broken ccv3 next to a good chara chunk should not block the import.
            logger.warning("PNG card chunk %r refused: %s", keyword, err)
            first_error = first_error or err
            continue
        card.image = _encode_png([c for c in chunks if not _is_card_chunk(c)])
        return card
    assert first_error is not None
    raise first_error


def read_card(raw: bytes, filename: str | None = None) -> CardData:
    """Parse a character card from PNG or JSON bytes; raises CardError with a user-facing reason."""
    label = filename or "<upload>"
    if len(raw) > MAX_CARD_BYTES:
        raise CardError(
            f"This file is {_size_mb(len(raw))}; cards larger than {MAX_CARD_BYTES // (1024 * 1024)} MB are refused."
        )
    if not raw.strip():
        raise CardError("This file is empty.")
    if raw.startswith(PNG_SIGNATURE):
        card = _card_from_png(raw)
    else:
        if raw.startswith(b"PK\x03\x04"):
            raise CardError(
                "This looks like a ZIP/CHARX file; only PNG and JSON character cards can be imported."
            )
        try:
            obj = _decode_json_text(raw)
        except JsonTooDeep as exc:
            raise CardError(f"This card was refused: {exc}.") from None
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
            logger.info("card %s is neither PNG nor JSON: %s", label, exc)
            raise CardError("This file is neither a PNG character card nor card JSON.") from None
        card = _card_from_object(obj)
    logger.debug("read %s card %r from %s", card.spec, card.name, label)
    return card


# --------------------------------------------------------------------------- writing


def card_to_dict(card: CardData, *, spec: Literal["v2", "v3"]) -> dict[str, Any]:
    """The card as a V2 or V3 JSON object, keeping every unknown key it was read with."""
    if spec not in ("v2", "v3"):
        raise ValueError(f"spec must be 'v2' or 'v3', not {spec!r}")
    spec_name = SPEC_V2 if spec == "v2" else SPEC_V3
    if card.spec == spec_name and card.spec_version:
        spec_version = card.spec_version
    else:
        spec_version = "2.0" if spec == "v2" else "3.0"

    data: dict[str, Any] = {key: getattr(card, key) for key in _STRING_FIELDS}
    data["alternate_greetings"] = list(card.alternate_greetings)
    data["tags"] = list(card.tags)
    data["extensions"] = card.extensions
    if card.character_book is not None:
        data["character_book"] = card.character_book
    # V3-only keys stay in a V2 export: harmless there, and dropping them would lose data.
    for key, value in card.data_extra.items():
        data.setdefault(key, value)
    if spec == "v3":
        data.setdefault("group_only_greetings", [])

    out: dict[str, Any] = {"spec": spec_name, "spec_version": spec_version, "data": data}
    for key, value in card.top_extra.items():
        if key in ("spec", "spec_version", "data"):
            continue
        # Refresh SillyTavern's flat V1 copies so an edited field is not contradicted by a stale copy.
        out[key] = getattr(card, key) if key in V1_FIELDS else value
    return copy.deepcopy(out)


def card_to_json_bytes(card: CardData, *, spec: Literal["v2", "v3"]) -> bytes:
    """Pretty UTF-8 JSON of the card, for a downloadable .json export."""
    return json.dumps(card_to_dict(card, spec=spec), ensure_ascii=False, indent=2).encode("utf-8")


def _placeholder_png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", PLACEHOLDER_SIZE, PLACEHOLDER_COLOR).save(buf, format="PNG")
    return buf.getvalue()


def _convert_to_png(image: bytes) -> bytes:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(image)) as img:
            img.seek(0)  # animated GIF/WEBP: the first frame is the avatar
            has_alpha = img.mode in ("RGBA", "LA", "PA") or "transparency" in img.info
            converted = img.convert("RGBA" if has_alpha else "RGB")
            buf = io.BytesIO()
            converted.save(buf, format="PNG")
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        logger.info("avatar image could not be converted to PNG: %s", exc)
        raise CardError("The avatar image could not be read; use a PNG, JPEG, WEBP or GIF file.") from None
    return buf.getvalue()


def write_card_png(card: CardData, image: bytes | None) -> bytes:
    """A PNG with the card embedded as SillyTavern writes it: tEXt 'chara' (V2) and 'ccv3' (V3)."""
    if image is None:
        png = _placeholder_png()
    elif image.startswith(PNG_SIGNATURE):
        png = image
    else:
        png = _convert_to_png(image)
    chunks = [c for c in _parse_png(png) if not _is_card_chunk(c)]

    def encoded(spec: Literal["v2", "v3"]) -> str:
        text = json.dumps(card_to_dict(card, spec=spec), ensure_ascii=False, separators=(",", ":"))
        return base64.b64encode(text.encode("utf-8")).decode("ascii")

    card_chunks = [_text_chunk("chara", encoded("v2")), _text_chunk("ccv3", encoded("v3"))]
    # _parse_png guarantees IEND is the last chunk.
    return _encode_png(chunks[:-1] + card_chunks + chunks[-1:])


# A card without talkativeness answers a group's natural-order roll half the time (SillyTavern's default).
DEFAULT_TALKATIVENESS = 0.5


def talkativeness(value: object) -> float:
    """A card's talkativeness (`data.extensions.talkativeness`, SillyTavern's flat copy too) as a
    number from 0 to 1; anything else (missing, text, NaN) is the default, 0.5."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return DEFAULT_TALKATIVENESS
    if number != number:  # NaN
        return DEFAULT_TALKATIVENESS
    return min(1.0, max(0.0, number))

"""SillyTavern chat files (.jsonl): lenient import, lossless export.

Pure functions only. Each message keeps its original line object in ``StMessage.raw`` so an
export can start from it (``message_line(base=raw)``) and only overwrite what Sugo models;
swipe_info, extra, gen_started and any key we do not know survive untouched.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.chats.core.limits import MAX_IMPORT_MESSAGES, message_too_long
from app.platform.core import jsonin

logger = logging.getLogger(__name__)

MAX_CHAT_BYTES = 64 * 1024 * 1024

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_BY_PREFIX = {m[:3].lower(): i for i, m in enumerate(_MONTHS, start=1)}

# "June 19, 2023 2:20pm" / "October 18, 2024 8:52 pm" (SillyTavern's message stamp).
_STAMP_RE = re.compile(
    r"^(?P<month>[A-Za-z]+)\.?\s+(?P<day>\d{1,2}),?\s+(?P<year>\d{4}),?\s+"
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?\s*(?P<ampm>[AaPp][Mm])$"
)
# "2024-7-12@01h31m37s", "2024-6-5 @14h 56m 50s 682ms" (humanizedDateTime and importers).
_HUMANIZED_RE = re.compile(
    r"^(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})\s*@\s*"
    r"(?P<hour>\d{1,2})h\s*(?P<minute>\d{1,2})m\s*(?P<second>\d{1,2})s"
    r"(?:\s*(?P<ms>\d{1,3})\s*ms)?$"
)
_NUMBER_RE = re.compile(r"^\d+(?:\.\d+)?$")
# Below this an epoch number is taken as seconds: 10^11 ms is only March 1973.
_EPOCH_SECONDS_LIMIT = 10**11


class ChatImportError(ValueError):
    """Why a chat file was refused, as one clear sentence for the user."""


@dataclass
class StMessage:
    name: str
    is_user: bool
    is_system: bool  # true = hidden from the AI in SillyTavern
    mes: str  # the visible (active swipe) text
    send_date: datetime | None  # timezone-aware UTC when parseable
    swipes: list[str] = field(default_factory=list)
    swipe_id: int = 0
    raw: dict[str, Any] = field(default_factory=dict)  # the original line object, verbatim


@dataclass
class StChat:
    header: dict[str, Any]  # line 1 verbatim; {} when the file had none (group chats)
    messages: list[StMessage]
    user_name: str
    character_name: str


# --------------------------------------------------------------------------- dates


def _from_epoch(number: float) -> datetime | None:
    if not math.isfinite(number):
        return None
    seconds = number if abs(number) < _EPOCH_SECONDS_LIMIT else number / 1000
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _build(
    year: int, month: int, day: int, hour: int, minute: int, second: int, micro: int
) -> datetime | None:
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
    except ValueError:
        return None


def parse_send_date(value: Any) -> datetime | None:
    """Best-effort parse of any send_date SillyTavern or its importers write; None if unknown.

    Formats without a zone (the message stamp, humanized dates, naive ISO) are taken as UTC:
    SillyTavern writes them in the browser's local time, which the file does not record.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _from_epoch(float(value))
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    if _NUMBER_RE.match(text):
        return _from_epoch(float(text))

    m = _STAMP_RE.match(text)
    if m:
        month = _MONTH_BY_PREFIX.get(m["month"][:3].lower())
        hour = int(m["hour"])
        if month is None or not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if m["ampm"].lower() == "pm" else 0)
        return _build(int(m["year"]), month, int(m["day"]), hour, int(m["minute"]), int(m["second"] or 0), 0)

    m = _HUMANIZED_RE.match(text)
    if m:
        micro = int(m["ms"].ljust(3, "0")) * 1000 if m["ms"] else 0
        return _build(
            int(m["year"]),
            int(m["month"]),
            int(m["day"]),
            int(m["hour"]),
            int(m["minute"]),
            int(m["second"]),
            micro,
        )

    try:
        # Python 3.11 fromisoformat accepts "Z", offsets, a space separator and fractions.
        parsed = datetime.fromisoformat(text)
    except ValueError:
        logger.debug("unparseable send_date %r", value)
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def format_send_date(dt: datetime) -> str:
    """SillyTavern's message stamp, e.g. "October 18, 2024 8:52pm" (UTC; naive means UTC)."""
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    hour12 = dt.hour % 12 or 12
    ampm = "am" if dt.hour < 12 else "pm"
    return f"{_MONTHS[dt.month - 1]} {dt.day}, {dt.year} {hour12}:{dt.minute:02d}{ampm}"


# --------------------------------------------------------------------------- import


def _flatten_text(value: Any) -> str | None:
    """Text of a message or swipe; Chub writes objects like {"message": "..."} instead of strings."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("message", "mes", "text"):
            if isinstance(value.get(key), str):
                return value[key]
        return ""
    return None


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True or value == 1


def _is_header(obj: dict[str, Any]) -> bool:
    return "user_name" in obj or "chat_metadata" in obj or ("name" in obj and "mes" not in obj)


def _message_from_line(obj: dict[str, Any], line_no: int) -> StMessage:
    name = obj.get("name")
    mes = obj.get("mes")
    if mes is None:
        mes_text = ""
    else:
        flattened = _flatten_text(mes)
        mes_text = flattened if flattened is not None else str(mes)

    swipes: list[str] = []
    raw_swipes = obj.get("swipes")
    if raw_swipes is not None:
        if not isinstance(raw_swipes, list):
            raise ChatImportError(f"Line {line_no}: 'swipes' must be a list.")
        for i, swipe in enumerate(raw_swipes):
            text = "" if swipe is None else _flatten_text(swipe)
            if text is None:
                raise ChatImportError(f"Line {line_no}: swipe {i + 1} is not text.")
            swipes.append(text)

    for text in (mes_text, *swipes):
        if problem := message_too_long(text):
            raise ChatImportError(f"Line {line_no}: {problem}")

    swipe_id = obj.get("swipe_id", 0)
    if isinstance(swipe_id, bool) or not isinstance(swipe_id, int | float) or not math.isfinite(swipe_id):
        swipe_id = 0
    swipe_id = max(0, min(int(swipe_id), len(swipes) - 1)) if swipes else 0

    return StMessage(
        name=name if isinstance(name, str) else "",
        is_user=_as_bool(obj.get("is_user")),
        is_system=_as_bool(obj.get("is_system")),
        mes=mes_text,
        send_date=parse_send_date(obj.get("send_date")),
        swipes=swipes,
        swipe_id=swipe_id,
        raw=obj,
    )


def parse_chat_jsonl(raw: bytes) -> StChat:
    """Parse a SillyTavern .jsonl chat (solo with header line, or header-less group chat)."""
    if len(raw) > MAX_CHAT_BYTES:
        raise ChatImportError(
            f"This file is {len(raw) / (1024 * 1024):.1f} MB; chats larger than "
            f"{MAX_CHAT_BYTES // (1024 * 1024)} MB are refused."
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ChatImportError(f"This file is not UTF-8 text (bad byte at position {exc.start}).") from None

    header: dict[str, Any] = {}
    messages: list[StMessage] = []
    seen_first = False
    # Split on "\n" only: str.splitlines() would also break on U+2028 and friends, which JSON
    # strings may legally contain unescaped.
    for line_no, line in enumerate(text.split("\n"), start=1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = jsonin.loads(line)
        except jsonin.JsonTooDeep as exc:
            raise ChatImportError(f"Line {line_no} was refused: {exc}.") from None
        except json.JSONDecodeError as exc:
            raise ChatImportError(
                f"Line {line_no} is not valid JSON: {exc.msg} (column {exc.colno})."
            ) from None
        if not isinstance(obj, dict):
            raise ChatImportError(
                f"Line {line_no} is not valid JSON: expected an object, not {type(obj).__name__}."
            )
        if not seen_first:
            seen_first = True
            if _is_header(obj):
                header = obj
                continue
        if len(messages) >= MAX_IMPORT_MESSAGES:
            raise ChatImportError(
                f"The chat has more than {MAX_IMPORT_MESSAGES:,} messages; larger chats are refused."
            )
        messages.append(_message_from_line(obj, line_no))

    if not header and not messages:
        raise ChatImportError("This file has no chat messages in it.")

    user_name = header.get("user_name")
    character_name = header.get("character_name")
    if not isinstance(character_name, str) or not character_name:
        others = [m for m in messages if not m.is_user and m.name]
        preferred = [m for m in others if not m.is_system] or others
        character_name = preferred[0].name if preferred else ""
    return StChat(
        header=header,
        messages=messages,
        user_name=user_name if isinstance(user_name, str) and user_name else "User",
        character_name=character_name,
    )


# --------------------------------------------------------------------------- export


def _same_second(a: datetime, b: datetime) -> bool:
    a = a.replace(tzinfo=UTC) if a.tzinfo is None else a
    b = b.replace(tzinfo=UTC) if b.tzinfo is None else b
    return int(a.timestamp()) == int(b.timestamp())


def message_line(
    *,
    name: str,
    is_user: bool,
    is_system: bool,
    mes: str,
    send_date: datetime,
    swipes: list[str],
    swipe_id: int,
    base: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One SillyTavern message line; starts from ``base`` (an imported raw line) so unknown keys survive."""
    line: dict[str, Any] = copy.deepcopy(base) if base else {}
    line["name"] = name
    line["is_user"] = is_user
    line["is_system"] = is_system

    original = line.get("send_date")
    parsed = parse_send_date(original)
    if parsed is None or not _same_second(parsed, send_date):
        line["send_date"] = format_send_date(send_date)

    line["mes"] = mes
    if swipes or "swipes" in line:
        line["swipes"] = list(swipes)
    if swipes or "swipe_id" in line:
        line["swipe_id"] = swipe_id
    if base is None:
        # SillyTavern's own new messages always carry an extra object.
        line["extra"] = {}
    return line


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def write_chat_jsonl(header: dict[str, Any], lines: list[dict[str, Any]]) -> bytes:
    """Serialise a chat: header line (omitted if {}), then one compact JSON object per line."""
    out = [_dumps(header)] if header else []
    out.extend(_dumps(line) for line in lines)
    return ("\n".join(out) + "\n").encode("utf-8")

"""Reading a summary model's answer. Pure functions.

A bad answer must never replace a good summary, so every reader returns either a complete result or a
`Failure` whose `reason` is a short sentence for the panel and whose `kind` tells the caller what to do.
Nothing here raises on model output.

Decisions:
- Thinking is stripped first, by the one reader of model answers (app/connections/core/answers.py, which
  the reply path uses too): `<think>`, `<thinking>` and `<reasoning>` blocks anywhere, a closer with no
  opener, an unclosed opener. Reasoning a provider returns separately is only used to tell "only
  thinking" from "empty".
- An answer with nothing left after the thinking, or one cut off (`finish_reason` "length" or
  "max_tokens", or JSON that never closes, whatever `finish_reason` says: some servers end at their own
  limit with "stop"), is a failure with `retry_larger=True`: the model ran out of budget (Marinara bug
  #6470), so the caller asks again with `request_max_tokens(..., attempt + 1)`, and reports the failure
  once that returns None. This holds for a Roleplay answer wrapped as `{"summary": ...` too.
- A summary longer than the Maximum output size is refused, not cut: the summary's end tells the newest
  covered events, and cutting it would hide messages whose events no summary holds any more. The user sees
  the size in the reason and can raise the limit.
- Key details are separate facts, so past `MAX_KEY_DETAILS` the rest are dropped and a detail longer than
  `MAX_KEY_DETAIL_CHARS` is cut at a word with an ellipsis; neither makes the summary fail.
- A Conversation day answer that is not JSON fails ("not JSON") instead of becoming the summary, as
  Marinara does: prose in place of `{summary, keyDetails}` is usually the model chatting or refusing.
  Leniency: code fences, prose before and after, single-quoted strings and trailing commas.
- A failed summary is tried again later after 1 minute, 5, 30, then 2 and 12 hours, then every 12 hours:
  a day never ages out (Marinara #355), and a broken provider is not called every turn.
- A Roleplay entry is prose; an answer shaped like Marinara's older `{"summary": "..."}` is unwrapped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from app.connections.core.answers import strip_thinking

FailureKind = Literal[
    "empty",
    "only_thinking",
    "cut_off",
    "not_json",
    "missing_summary",
    "missing_ends",
    "too_long",
    "provider",
    "internal",
    "garbage",
    "off_topic",
]

MAX_ANSWER_CHARS = 400_000  # before any parsing: ~100k tokens, far past the 32768-token setting's ceiling
MAX_JSON_DEPTH = 16  # deeper nesting is not a summary and would make json.loads recurse
MAX_OBJECT_TRIES = 8  # "{...}" spans tried before the answer counts as not JSON
MAX_KEY_DETAILS = 30
MAX_KEY_DETAIL_CHARS = 500
# Spec (Advanced Memory): summary calls get at least 8196 output tokens so reasoning has room.
MIN_REQUEST_TOKENS = 8196
MAX_REQUEST_TOKENS = 65_536
MAX_ATTEMPTS = 2  # the first request and one with a doubled budget; then the failure is reported

CUT_OFF_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    reason: str  # a sentence for the panel, never the model's text
    retry_larger: bool = False  # the model ran out of output budget: ask again with a larger one


@dataclass(frozen=True)
class ProseSummary:
    text: str


@dataclass(frozen=True)
class DaySummary:
    summary: str
    key_details: tuple[str, ...]


def request_max_tokens(max_output_size: int, attempt: int) -> int | None:
    """The `max_tokens` to request on attempt 0, 1, ...; None once the attempts are used up."""
    if attempt >= MAX_ATTEMPTS:
        return None
    base = max(max_output_size, MIN_REQUEST_TOKENS)
    return min(base * 2**attempt, MAX_REQUEST_TOKENS)


RETRY_DELAYS = (
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=12),
)


def retry_delay(failures: int) -> timedelta:
    """How long to wait before trying a summary again after `failures` failed runs in a row (>= 1)."""
    return RETRY_DELAYS[min(max(failures, 1), len(RETRY_DELAYS)) - 1]


def precheck(text: str, finish_reason: str | None, reasoning: str) -> str | Failure:
    """The answer without its thinking, or the Failure when it is too large, empty, only thinking or
    cut off (shared by every reader of a helper's answer, the scene check's too)."""
    if len(text) > MAX_ANSWER_CHARS:
        return Failure("too_long", f"The answer is too large ({len(text):,} characters).")
    stripped = strip_thinking(text)
    if not stripped.answer:
        if stripped.had_thinking or reasoning.strip():
            return Failure(
                "only_thinking", "Only thinking, no answer: the model spent its budget reasoning.", True
            )
        if finish_reason in CUT_OFF_REASONS:
            return Failure("cut_off", f"Cut off before any answer (finish_reason={finish_reason}).", True)
        return Failure("empty", "Empty answer.")
    if finish_reason in CUT_OFF_REASONS:
        return Failure("cut_off", f"Cut off (finish_reason={finish_reason}).", True)
    return stripped.answer


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:summary|recap)(?:\*\*)?\s*:\s*(?:\*\*)?\s*", re.IGNORECASE)
_SUMMARY_KEY = re.compile(r"""\{\s*["']?summary["']?\s*:""", re.IGNORECASE)


def read_prose_summary(
    text: str,
    *,
    max_tokens: int,
    count_tokens: Callable[[str], int],
    finish_reason: str | None = None,
    reasoning: str = "",
) -> ProseSummary | Failure:
    """A Roleplay summary entry's text from the model's answer."""
    answer = precheck(text, finish_reason, reasoning)
    if isinstance(answer, Failure):
        return answer
    fence = _FENCE.fullmatch(answer)
    if fence:
        answer = fence.group(2).strip()
    if answer.startswith("{") or _SUMMARY_KEY.search(answer):
        # Marinara's `{"summary": ...}`, wherever it starts; one that never closes was cut off, whatever
        # finish_reason says (a server that ends the stream at its own limit reports "stop").
        obj = find_object(answer)
        if isinstance(obj, Failure) and obj.kind == "cut_off":
            return obj
        if isinstance(obj, dict) and isinstance(loose_field(obj, "summary"), str):
            answer = loose_field(obj, "summary").strip()
    answer = _LABEL.sub("", answer, count=1).strip()
    if not answer:
        return Failure("empty", "Empty answer.")
    return within_limit(answer, max_tokens, count_tokens) or ProseSummary(answer)


def read_day_summary(
    text: str,
    *,
    max_tokens: int,
    count_tokens: Callable[[str], int],
    finish_reason: str | None = None,
    reasoning: str = "",
) -> DaySummary | Failure:
    """A Conversation day or week summary, `{summary, keyDetails[]}`, from the model's answer."""
    answer = precheck(text, finish_reason, reasoning)
    if isinstance(answer, Failure):
        return answer
    obj = find_object(answer)
    if isinstance(obj, Failure):
        return obj
    summary = loose_field(obj, "summary")
    if isinstance(summary, list) and summary and all(isinstance(s, str) for s in summary):
        summary = " ".join(s.strip() for s in summary)
    if not isinstance(summary, str) or not summary.strip():
        return Failure("missing_summary", "The answer has no summary text.")
    summary = summary.strip()
    too_long = within_limit(summary, max_tokens, count_tokens)
    if too_long:
        return too_long
    return DaySummary(summary, key_details(loose_field(obj, "keydetails")))


def within_limit(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> Failure | None:
    tokens = count_tokens(text)
    if tokens > max_tokens:
        return Failure(
            "too_long", f"The summary is too long ({tokens:,} tokens; the limit is {max_tokens:,})."
        )
    return None


def answer_field(text: str, finish_reason: str | None, reasoning: str | None, key: str) -> Any:
    """The `key` field (as `loose_field` matches it: "cannotsee" finds "cannot_see") of the JSON object in
    a helper's short answer, through the one reader: thinking, cut-off, junk and an object without the
    field are Failures. The caller checks the value's type."""
    answer = precheck(text, finish_reason, reasoning or "")
    if isinstance(answer, Failure):
        return answer
    obj = find_object(answer, key)
    if isinstance(obj, Failure):
        return obj
    value = loose_field(obj, key)
    return Failure("not_json", f'The answer had no "{key}" field.') if value is None else value


def loose_field(obj: dict[str, Any], name: str) -> Any:
    """A key matched loosely: "keyDetails", "key_details" and "Key Details" are one field."""
    for key, value in obj.items():
        if re.sub(r"[\s_-]", "", str(key)).lower() == name:
            return value
    return None


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def key_details(value: Any) -> tuple[str, ...]:
    """Key details coerced to distinct short strings: a string is split into lines, numbers become
    text, anything else is dropped."""
    if isinstance(value, str):
        items: list[Any] = value.splitlines()
    elif isinstance(value, list):
        items = value
    else:
        return ()
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            continue
        detail = _BULLET.sub("", str(item)).strip()
        if not detail or detail.casefold() in seen:
            continue
        seen.add(detail.casefold())
        out.append(_shorten(detail, MAX_KEY_DETAIL_CHARS))
        if len(out) == MAX_KEY_DETAILS:
            break
    return tuple(out)


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def find_object(answer: str, key: str = "summary") -> dict[str, Any] | Failure:
    """The first JSON object with a `key` field (matched as `loose_field` does) in the answer: in a code fence,
    or anywhere in it ("{braces}" in prose before the object are skipped)."""
    candidates = [m.group(2) for m in _FENCE.finditer(answer)] + [answer]
    unclosed = False
    tries = 0
    first: dict[str, Any] | None = None
    for candidate in candidates:
        start = candidate.find("{")
        while start >= 0 and tries < MAX_OBJECT_TRIES:
            tries += 1
            end = _object_end(candidate, start)
            if end is None:
                unclosed = True
                break
            if end < 0:
                return Failure("not_json", "The answer is not JSON (nested too deeply).")
            obj = _load_object(candidate[start:end])
            if isinstance(obj, dict):
                if loose_field(obj, key) is not None:
                    return obj
                first = first or obj
            start = candidate.find("{", end)
    if unclosed:  # before a complete object without the key: the cut one was most likely the answer
        return Failure("cut_off", "Cut off: the JSON in the answer never closes.", True)
    if first:
        return first  # JSON, but without a summary: the caller reports that
    return Failure("not_json", "The answer is not JSON.")


def _object_end(text: str, start: int) -> int | None:
    """The index after the "}" that closes the "{" at `start` (strings respected); None if it never
    closes, -1 if it nests deeper than MAX_JSON_DEPTH."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return -1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _load_object(text: str) -> Any:
    for attempt in (text, _repair(text)):
        try:
            return json.loads(attempt)
        except (ValueError, RecursionError):
            continue
    return None


def _repair(text: str) -> str:
    """Single-quoted strings become double-quoted ones and trailing commas go; text inside strings is kept."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            j, body = i + 1, []
            while j < n and text[j] != ch:
                if text[j] == "\\" and j + 1 < n:
                    body.append(text[j : j + 2] if text[j + 1] != "'" else "'")
                    j += 2
                    continue
                body.append('\\"' if text[j] == '"' else text[j])
                j += 1
            out.append('"' + "".join(body) + '"')
            i = j + 1
            continue
        if ch == ",":
            k = i + 1
            while k < n and text[k].isspace():
                k += 1
            if k < n and text[k] in "}]":
                i += 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def prose_problem(text: str) -> Failure | None:
    """Why a Roleplay summary read from an answer is not prose the prompt can carry, if it is not:
    read_prose_summary keeps any text, so JSON without a summary or binary noise would pass."""
    if _CONTROL.search(text):
        return Failure("garbage", "The answer holds control characters: it is not text.")
    if text[:1] in "{[":
        return Failure("garbage", "The answer is JSON with no summary text in it.")
    if not any(ch.isalpha() for ch in text):
        return Failure("garbage", "The answer has no words in it.")
    return None

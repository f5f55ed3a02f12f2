"""Recall by decision (issue 27; the manual's "Como funciona a recuperação por decisão"), as pure
functions: the pre-selection, the decision model's two requests, reading their answers, and the time
limits. The shell is `app/memory/scenes/decision.py`; the prompt's planner takes its result as the
ranked candidates.

1. Pre-selection: normal recall's ranking, cut to PRESELECT scenes (or Maximum recalled scenes when
   higher); the scene right after each of the top three gets a place too (what followed a relevant
   moment often is one).
2. Pick: one request lists each pre-selected recap headed by its range, story date and speakers, with
   the user's messages since the character last spoke; the model answers the relevant scenes' numbers
   (a valid answer may pick none).
3. Centre: one request lists up to MAX_SCORED of each chosen scene's source messages that best match
   the query (by shared words); the model scores each 0–10, and the best one centres the scene's excerpt.
4. Time: each step gets about the measured seconds per question × its questions, plus half, within
   10–25 s; both steps within 40 s a reply. A step that fails or runs out of time falls back: the pick,
   to normal ranking; the centring, to normal recall's excerpt for the scenes it did not score.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.memory.summaries.core.answers import Failure, answer_field

PRESELECT = 24
AFTER_TOP = 3  # the scene after each of the top three also gets a place
MAX_SCORED = 12  # source messages scored per chosen scene
MIN_STEP_S, MAX_STEP_S, MAX_TOTAL_S = 10.0, 25.0, 40.0
DEFAULT_SECONDS_PER_QUESTION = 0.5  # before anything was measured
MAX_RECAP_CHARS = 1_500  # of each recap the pick reads
MAX_MESSAGE_CHARS = 600  # of each message the centring reads
ANSWER_TOKENS = 2048

PICK_PROMPT = """\
You choose which earlier scenes of a roleplay matter for the next reply. Below are the user's newest \
messages and numbered recaps of earlier scenes. Pick the scenes whose events, people, places or \
promises the next reply needs to remember; pick none if nothing is relevant.
Answer with JSON only: {"relevant": [scene numbers, most relevant first]}"""

SCORE_PROMPT = """\
You rate how well each numbered message matches what the user's newest messages are about, from 0 \
(unrelated) to 10 (exactly it). Rate every message listed.
Answer with JSON only: {"scores": {"message number": score, "...": 0}}"""


@dataclass(frozen=True)
class RecapForPick:
    scene_id: int
    number: int  # the scene's number in the chat
    first: int  # message numbers
    last: int
    timeframe: str
    speakers: tuple[str, ...]
    summary: str


@dataclass(frozen=True)
class ScoredMessage:
    scene_id: int
    message_id: int
    number: int
    name: str
    text: str


def preselect(ranked: Sequence[int], in_order: Sequence[int], max_scenes: int) -> list[int]:
    """The scenes the model reads: the ranking cut to max(PRESELECT, max_scenes), plus the scene after
    each of the top AFTER_TOP (`in_order`: the chat's scenes oldest first)."""
    limit = max(PRESELECT, max_scenes)
    out = list(dict.fromkeys(ranked))[:limit]
    following = {a: b for a, b in zip(in_order, in_order[1:], strict=False)}
    for sid in list(out[:AFTER_TOP]):
        nxt = following.get(sid)
        if nxt is not None and nxt not in out:
            out.append(nxt)
    return out


def step_limit(seconds_per_question: float, questions: int, left: float) -> float:
    """One step's time: the measured time per question × questions, plus half, within 10–25 s and what
    is left of the reply's 40 s."""
    wanted = seconds_per_question * max(questions, 1) * 1.5
    return max(0.0, min(max(MIN_STEP_S, min(wanted, MAX_STEP_S)), left))


def _clip(text: str, most: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most] + "…"


def pick_request(recaps: Sequence[RecapForPick], query: str) -> list[dict[str, str]]:
    parts = [f"The user's newest messages:\n{_clip(query, 2_000) or '(none)'}", "", "Earlier scenes:"]
    for r in recaps:
        when = f" · story date: {r.timeframe}" if r.timeframe.strip() else ""
        who = f" · speakers: {', '.join(r.speakers)}" if r.speakers else ""
        parts.append(
            f"[Scene {r.number}] messages #{r.first}–#{r.last}{when}{who}\n{_clip(r.summary, MAX_RECAP_CHARS)}"
        )
    return [{"role": "system", "content": PICK_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


def read_pick(
    text: str, finish_reason: str | None, reasoning: str | None, recaps: Sequence[RecapForPick]
) -> list[int] | Failure:
    """The chosen scenes' ids, most relevant first; numbers that name no listed scene are ignored."""
    value = answer_field(text, finish_reason, reasoning, "relevant")
    if isinstance(value, Failure):
        return value
    if not isinstance(value, list):
        return Failure("not_json", 'The answer had no "relevant" list.')
    by_number = {r.number: r.scene_id for r in recaps}
    out: list[int] = []
    for item in value:
        number = _number(item)
        if number in by_number and by_number[number] not in out:
            out.append(by_number[number])
    return out


def _number(item: object) -> int | None:
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, str) and (m := re.search(r"\d+", item)):
        return int(m.group())
    return None


_WORD = re.compile(r"\w{3,}")


def best_matching(
    messages: Sequence[ScoredMessage], query: str, most: int = MAX_SCORED
) -> list[ScoredMessage]:
    """Up to `most` of a scene's messages sharing the most words with the query, in the scene's order."""
    words = {w.casefold() for w in _WORD.findall(query)}
    scored = sorted(
        messages, key=lambda m: (-len(words & {w.casefold() for w in _WORD.findall(m.text)}), m.number)
    )[:most]
    return sorted(scored, key=lambda m: m.number)


def score_request(messages: Sequence[ScoredMessage], query: str) -> list[dict[str, str]]:
    lines = [f"#{m.number} {m.name}: {_clip(m.text, MAX_MESSAGE_CHARS)}" for m in messages]
    body = (
        f"The user's newest messages:\n{_clip(query, 2_000) or '(none)'}\n\nMessages to rate:\n"
        + "\n".join(lines)
    )
    return [{"role": "system", "content": SCORE_PROMPT}, {"role": "user", "content": body}]


def read_scores(
    text: str, finish_reason: str | None, reasoning: str | None, messages: Sequence[ScoredMessage]
) -> dict[int, float] | Failure:
    """Message id → score for the listed messages the answer rated."""
    value = answer_field(text, finish_reason, reasoning, "scores")
    if isinstance(value, Failure):
        return value
    if not isinstance(value, Mapping):
        return Failure("not_json", 'The answer had no "scores" object.')
    by_number = {m.number: m.message_id for m in messages}
    out: dict[int, float] = {}
    for key, score in value.items():
        number = _number(key)
        if number in by_number and isinstance(score, int | float) and not isinstance(score, bool):
            out[by_number[number]] = float(score)
    return out


def centres(scores: Mapping[int, float], messages: Sequence[ScoredMessage]) -> dict[int, int]:
    """Scene id → the best-scored message's id (the earlier on a tie)."""
    best: dict[int, tuple[float, int]] = {}
    for m in messages:
        if m.message_id in scores:
            s = scores[m.message_id]
            if m.scene_id not in best or s > best[m.scene_id][0]:
                best[m.scene_id] = (s, m.message_id)
    return {sid: mid for sid, (_, mid) in best.items()}

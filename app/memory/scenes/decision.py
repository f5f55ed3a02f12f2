"""Recall by decision, the shell (issue 27): asks the chat's decision connection to pick the relevant
scenes and centre their excerpts, within the time limits, and keeps each result for Peek Prompt →
Advanced Memory activity. The rules are in core/decision.py.

Decided where the manual is silent:
- Only a reply asks (for_reply): Peek Prompt plans with normal recall and never calls a model; a new
  version of a reply reuses the scenes its first version recalled (prompt.py's kept snapshot).
- A missing or unusable decision connection: normal recall, said in the receipt, nothing asked.
- The time per question is measured from this chat's last MEASURED answered steps on the same model
  (seconds ÷ questions); before any, DEFAULT_SECONDS_PER_QUESTION.
- Activity rows are written in the turn's session and committed with the reply's start."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sqlmodel import Session, col, select

from app.connections.models import Connection
from app.connections.providers import complete_chat_blocking
from app.connections.providers.base import GenerationParams, ProviderConfig, ProviderError
from app.connections.service import provider_config
from app.memory.scenes.core import decision as rules
from app.memory.scenes.models import MemoryActivity
from app.memory.summaries.core.answers import Failure
from app.platform.services import Services
from app.prompt.sources import Turn

log = logging.getLogger(__name__)

MAX_ACTIVITY = 128  # results kept per chat
MEASURED = 10


@dataclass
class Decided:
    """What the decision model gave one turn."""

    chosen: list[int] | None = None  # scene ids, most relevant first; None: normal ranking
    centres: dict[int, int] = field(default_factory=dict)  # scene id → message id to centre on
    receipt: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return rules.MAX_TOTAL_S - (time.monotonic() - self.started)


def connection_config(
    session: Session, services: Services, connection_id: int | None
) -> ProviderConfig | None:
    if connection_id is None or (conn := session.get(Connection, connection_id)) is None:
        return None
    try:
        return provider_config(conn, services.keybox, timeout_s=rules.MAX_STEP_S)
    except ValueError:
        return None


def seconds_per_question(session: Session, chat_id: int, model: str) -> float:
    rows = session.exec(
        select(MemoryActivity.seconds, MemoryActivity.questions)
        .where(MemoryActivity.chat_id == chat_id, MemoryActivity.model == model, MemoryActivity.ok == True)  # noqa: E712
        .order_by(col(MemoryActivity.id).desc())
        .limit(MEASURED)
    ).all()
    measured = [s / q for s, q in rows if q > 0]
    return sum(measured) / len(measured) if measured else rules.DEFAULT_SECONDS_PER_QUESTION


def _ask(config: ProviderConfig, request: list[dict[str, str]], limit: float) -> tuple[object, float, str]:
    """(answer or Failure, seconds taken, why it failed or "")."""
    start = time.monotonic()
    try:
        done = complete_chat_blocking(
            replace(config, timeout_s=limit), request, GenerationParams(max_tokens=rules.ANSWER_TOKENS)
        )
    except ProviderError as err:
        took = time.monotonic() - start
        why = (
            f"timed out after {limit:.0f} s" if err.kind == "timeout" or took >= limit - 0.05 else err.message
        )
        return Failure("provider", why), took, why
    return done, time.monotonic() - start, ""


def pick(
    turn: Turn, services: Services, recaps: Sequence[rules.RecapForPick], query: str, decided: Decided
) -> None:
    """Step 1: the relevant scenes (decided.chosen), or normal ranking when it cannot be asked or fails."""
    session, chat_id = turn.session, turn.chat.id
    config = connection_config(session, services, turn.settings.adv_decision_connection_id)
    if config is None:
        decided.receipt.append(
            "Decision model: no decision connection chosen, so normal recall ranked the scenes."
        )
        return
    if not recaps:
        return
    per_q = seconds_per_question(session, chat_id, config.model)
    limit = rules.step_limit(per_q, len(recaps), decided.left())
    got, took, why = _ask(config, rules.pick_request(recaps, query), limit)
    chosen: list[int] | Failure
    if isinstance(got, Failure):
        chosen = got
    else:
        chosen = rules.read_pick(got.text or "", got.finish_reason, got.reasoning, recaps)  # type: ignore[attr-defined]
        why = chosen.reason if isinstance(chosen, Failure) else ""
    numbers = {r.scene_id: r.number for r in recaps}
    data = {
        "step": "pick",
        "preselected": [r.number for r in recaps],
        "limit_s": round(limit, 1),
    }
    if isinstance(chosen, Failure):
        data["fallback"] = f"{why}: normal ranking used"
        decided.receipt.append(f"Decision model {why}: normal recall ranked the scenes.")
        keep_activity(session, chat_id, config.model, took, len(recaps), False, data)
        return
    decided.chosen = chosen
    data["chosen"] = [numbers[s] for s in chosen]
    keep_activity(session, chat_id, config.model, took, len(recaps), True, data)
    picked = ", ".join(str(numbers[s]) for s in chosen) or "none"
    decided.receipt.append(
        f"Decision model picked scene(s) {picked} of {len(recaps)} pre-selected ({took:.1f} s)."
    )


def centre(
    turn: Turn, services: Services, messages: Sequence[rules.ScoredMessage], query: str, decided: Decided
) -> None:
    """Step 2: the best-matching message of each chosen scene (decided.centres); on failure the chosen
    scenes keep normal recall's excerpt, said in the receipt."""
    if not messages:
        return
    session, chat_id = turn.session, turn.chat.id
    config = connection_config(session, services, turn.settings.adv_decision_connection_id)
    if config is None:
        return
    per_q = seconds_per_question(session, chat_id, config.model)
    limit = rules.step_limit(per_q, len(messages), decided.left())
    if limit <= 0:
        decided.receipt.append("Decision model: no time left to centre the excerpts; normal excerpts used.")
        return
    got, took, why = _ask(config, rules.score_request(messages, query), limit)
    scores = (
        got
        if isinstance(got, Failure)
        else rules.read_scores(got.text or "", got.finish_reason, got.reasoning, messages)
    )  # type: ignore[attr-defined]
    data: dict = {"step": "centre", "scored": len(messages), "limit_s": round(limit, 1)}
    if isinstance(scores, Failure):
        why = why or scores.reason
        data["fallback"] = f"{why}: normal excerpts used"
        decided.receipt.append(f"Decision model {why} while centring the excerpts: normal excerpts used.")
        keep_activity(session, chat_id, config.model, took, len(messages), False, data)
        return
    decided.centres = rules.centres(scores, messages)
    data["scores"] = {str(m.number): scores[m.message_id] for m in messages if m.message_id in scores}
    data["centres"] = {str(k): v for k, v in decided.centres.items()}
    keep_activity(session, chat_id, config.model, took, len(messages), True, data)


def keep_activity(
    session: Session, chat_id: int, model: str, seconds: float, questions: int, ok: bool, data: dict
) -> None:
    session.add(
        MemoryActivity(
            chat_id=chat_id, model=model, seconds=round(seconds, 3), questions=questions, ok=ok, data=data
        )
    )
    session.flush()
    old = session.exec(
        select(MemoryActivity.id)
        .where(MemoryActivity.chat_id == chat_id)
        .order_by(col(MemoryActivity.id).desc())
        .offset(MAX_ACTIVITY)
    ).all()
    for activity_id in old:
        row = session.get(MemoryActivity, activity_id)
        if row is not None:
            session.delete(row)


def activity(session: Session, chat_id: int) -> list[MemoryActivity]:
    """The chat's kept results, newest first (Peek Prompt → Advanced Memory activity)."""
    return list(
        session.exec(
            select(MemoryActivity)
            .where(MemoryActivity.chat_id == chat_id)
            .order_by(col(MemoryActivity.id).desc())
        )
    )

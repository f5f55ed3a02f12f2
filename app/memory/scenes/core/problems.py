"""Advanced Memory's problems (issue 14, "Problems and Fix"), decided from plain values: which of a
chat's scenes are broken, what Fix does about each, and the key of the set (the notice is announced
once per set). Pure: fix.py reads the database and computes the fingerprints.

    classify(scenes, check, now=…) -> Problems (the list, the counts, the set key)

Kinds, one per scene (the first that applies, in this order):
- "no_messages"  every source message is hidden, failed or deleted: nothing to recap → your review.
- "changed"      the messages or their authors' names changed since the recap (fingerprint differs):
                 Fix writes it again. A hand-edited (manual) scene is "review" instead: never rewritten.
- "failed"       the recap failed (the reason is shown): Fix writes it.
- "unsummarised" closed, waiting longer than WAITING_TOO_LONG without a recap: Fix writes it.
- "check_who"    the helper did not say who was there: Fix asks again (a re-recap, the writer settles the
                 participants). One Fix could not decide (`UNDECIDED` kept as its reason) → your review:
                 the next Fix does not ask again (the manual).
- "unchecked"    in a group, written before Sugo checked who took part (a scene stored with the helper's
                 names as they came): Fix writes it again, and the writer settles the participants. A
                 hand-edited recap is never rewritten, so it is left as it is.
One chat-wide problem: the last scene check failed (SceneState.reason/failures) → Fix runs it again; when
its answer could not be read even when asked again, the user may also treat the batch as having no
scene end (issue 21).

Not problems: deleted summaries (they stay deleted), scenes being written, disabled scenes (the user
set them aside, which is also the manual's way out for a changed hand-edited scene), a scene whose
stored fingerprint is empty (imported, or edited by hand before any recap: no way to tell a change).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WAITING_TOO_LONG = timedelta(minutes=15)  # the job writes after each reply and the sweep every 5 minutes
UNDECIDED = "Fix could not tell who was there either; set the characters' access to this scene yourself."
CHECK = 0  # the scene id of the chat-wide "scene check failed" problem

SENTENCES = {
    "no_messages": "Every message of this scene is hidden or deleted; disable or delete its summary.",
    "changed": "Its messages or names changed since the recap was written.",
    "changed_manual": "Its messages changed since you edited the recap by hand; Fix never rewrites it: "
    "edit it, or disable it to keep it as a reference.",
    "failed": "The recap failed: {reason}",
    "unsummarised": "Closed, but its recap has not been written yet.",
    "check_who": "The helper did not say who was there.",
    "check_who_undecided": UNDECIDED,
    "unchecked": "Written before Sugo checked who was there: the characters may not recall it.",
    "check_failed": "{reason}",
}


@dataclass(frozen=True)
class SceneFacts:
    id: int
    number: int  # 1 = the chat's oldest scene
    state: str
    manual: bool
    check_who: bool
    enabled: bool
    fingerprint: str  # stored with the recap ("" unknown)
    current: str | None  # of its source messages now (None: none readable)
    reason: str = ""
    updated_at: datetime | None = None
    # In a group, its participants were stored before the writer's check (Scene.participants_checked).
    unchecked: bool = False


@dataclass(frozen=True)
class CheckFacts:
    reason: str = ""
    failures: int = 0
    unreadable: bool = False  # the helper's answer could not be read even when asked again


@dataclass(frozen=True)
class Problem:
    scene_id: int  # CHECK for the failed scene check
    number: int  # the scene's number (0 for the check)
    kind: str  # no_messages, changed, changed_manual, failed, unsummarised, check_who, check_who_undecided,
    # unchecked, check_failed
    sentence: str
    # check_failed on an answer that could not be read: besides Fix (which asks again), the user may treat
    # the batch as having no scene end (checks.skip_unreadable).
    can_skip_batch: bool = False

    @property
    def review(self) -> bool:
        """Fix leaves it to the user."""
        return self.kind in ("no_messages", "changed_manual", "check_who_undecided")


@dataclass(frozen=True)
class Problems:
    items: tuple[Problem, ...]

    @property
    def count(self) -> int:
        return len(self.items)

    @property
    def scenes(self) -> int:
        """How many scenes have a problem (the failed scene check is not a scene)."""
        return sum(1 for p in self.items if p.scene_id != CHECK)

    @property
    def fixable(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.items if not p.review)

    @property
    def review(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.items if p.review)

    @property
    def tokens(self) -> tuple[str, ...]:
        """One "scene:kind" per problem: a page announces a set only when it holds one not announced yet
        (a set that shrank while Fix works is not announced again)."""
        return tuple(f"{p.scene_id}:{p.kind}" for p in self.items)

    @property
    def key(self) -> str:
        """The set's key: the same problems give the same key (the notice is announced once per set);
        "" when there is none."""
        if not self.items:
            return ""
        text = ";".join(
            f"{p.scene_id}:{p.kind}" for p in sorted(self.items, key=lambda p: (p.scene_id, p.kind))
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def scene_problem(s: SceneFacts, *, now: datetime) -> Problem | None:
    """The scene's problem, or None."""
    if s.state in ("deleted", "writing") or not s.enabled:
        return None

    def problem(kind: str) -> Problem:
        return Problem(
            s.id, s.number, kind, SENTENCES[kind].format(reason=s.reason or "no reason was given.")
        )

    written = s.state == "written"
    if s.current is None:
        return problem("no_messages") if written or s.state == "failed" else None
    if written and s.fingerprint and s.fingerprint != s.current:
        return problem("changed_manual" if s.manual else "changed")
    if s.state == "failed":
        return problem("failed")
    if s.state == "waiting" and s.updated_at is not None and now - s.updated_at >= WAITING_TOO_LONG:
        return problem("unsummarised")
    if s.check_who and written:
        return problem("check_who_undecided" if s.manual or s.reason == UNDECIDED else "check_who")
    if s.unchecked and written and not s.manual:
        return problem("unchecked")
    return None


def classify(scenes: Sequence[SceneFacts], check: CheckFacts, *, now: datetime) -> Problems:
    """The chat's problems: the failed scene check first, then the scenes in order."""
    items: list[Problem] = []
    if check.reason and check.failures > 0:
        items.append(Problem(CHECK, 0, "check_failed", check.reason, can_skip_batch=check.unreadable))
    items += [
        p for s in sorted(scenes, key=lambda s: s.number) if (p := scene_problem(s, now=now)) is not None
    ]
    return Problems(tuple(items))


def end_sentence(fixed: int, review: Sequence[int]) -> str:
    """What Fix says when it ends: "Advanced Memory fixed N scenes" and the scenes to review."""
    text = f"Advanced Memory fixed {fixed} scene{'' if fixed == 1 else 's'}"
    if review:
        numbers = ", ".join(str(n) for n in sorted(set(review)))
        text += f"; need your review: scene{'' if len(set(review)) == 1 else 's'} {numbers}"
    return text + "."

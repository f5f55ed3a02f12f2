"""Which Roleplay messages summary entries cover, which ones reach the model, and summary scopes.
Pure functions.

Decisions:
- An entry covers the inclusive range of message ids `first_id..last_id`. A chat's order is its message
  ids (app/chats/service.py reads messages ordered by id), so a range stays right when messages inside it
  are deleted, where message numbers would shift. Callers pass messages in that order, without /refresh
  marks.
- The Recent message tail is the newest `tail` messages that can reach the model at all (not hidden
  from the AI); it is always sent.
- Older than the tail, a message leaves the prompt only when "Hide summarised messages" is on AND an
  active entry covers it. A message no active entry covers is always sent: dropping it would lose it.
  Older messages no entry covers at all are counted for the panel's "summarise them" button, which runs
  Backfill; a message covered only by an inactive entry is sent but not counted, because Backfill does not
  redo a range the user switched off (the user can switch it on again, or delete it to have it redone).
- Message numbers in scopes are 1-based positions in the chat as the user sees it, hidden ones included.
  A scope must hold at least one message the AI may read; hidden messages inside it are skipped when the
  summary is written.
- Discarded swipes are not an input: a message here is its id and flags; its text (the active swipe)
  is read by the caller only for the ids a scope selects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_TAIL = 10
MAX_TAIL = 100_000
DEFAULT_EVERY = 5
MIN_EVERY, MAX_EVERY = 1, 200
MAX_SCOPE_MESSAGES = 500  # one summary request; Backfill batches longer histories
DEFAULT_BATCH = 50  # Marinara's summaryContextSize


class ScopeError(ValueError):
    """A scope or setting the user gave that cannot be used; the message is a sentence for the UI."""


@dataclass(frozen=True)
class ChatMessage:
    id: int
    hidden: bool = False  # "Hide from AI": never sent, never summarised


@dataclass(frozen=True)
class SummaryRange:
    first_id: int
    last_id: int
    active: bool = True


@dataclass(frozen=True)
class Selection:
    sent_ids: tuple[int, ...]  # in chat order
    summarised_ids: tuple[int, ...]  # left out of the prompt because an active entry covers them
    uncovered_ids: tuple[int, ...]  # older than the tail, sent, covered by no entry: Backfill's work
    tail_ids: tuple[int, ...]

    @property
    def uncovered_count(self) -> int:
        return len(self.uncovered_ids)


def check_tail(tail: int) -> int:
    if isinstance(tail, bool) or not isinstance(tail, int) or not 0 <= tail <= MAX_TAIL:
        raise ScopeError(f"The Recent message tail must be a whole number from 0 to {MAX_TAIL:,}.")
    return tail


def check_every(every: int) -> int:
    if isinstance(every, bool) or not isinstance(every, int) or not MIN_EVERY <= every <= MAX_EVERY:
        raise ScopeError(f"Every must be a whole number of user messages from {MIN_EVERY} to {MAX_EVERY}.")
    return every


def covered(message_id: int, entries: Sequence[SummaryRange], *, active_only: bool = True) -> bool:
    return any(e.first_id <= message_id <= e.last_id for e in entries if e.active or not active_only)


def _covered_ids(messages: Sequence[ChatMessage], entries: Sequence[SummaryRange]) -> set[int]:
    """Ids an active entry covers; sorted interval sweep so 400 entries over 2,000 messages stay cheap."""
    spans = sorted((e.first_id, e.last_id) for e in entries if e.active and e.first_id <= e.last_id)
    ids = sorted(m.id for m in messages)
    out: set[int] = set()
    i = 0
    reach = None
    for mid in ids:
        while i < len(spans) and spans[i][0] <= mid:
            reach = spans[i][1] if reach is None else max(reach, spans[i][1])
            i += 1
        if reach is not None and mid <= reach:
            out.add(mid)
    return out


def select_messages(
    messages: Sequence[ChatMessage],
    entries: Sequence[SummaryRange],
    *,
    tail: int = DEFAULT_TAIL,
    hide_summarised: bool = False,
) -> Selection:
    """The messages (in chat order) that go to the model, and why the others do not."""
    check_tail(tail)
    readable = [m for m in messages if not m.hidden]
    cut = max(len(readable) - tail, 0)
    older, recent = readable[:cut], readable[cut:]
    active_ids = _covered_ids(older, entries)
    any_ids = _covered_ids(older, [SummaryRange(e.first_id, e.last_id) for e in entries])
    sent: list[int] = []
    summarised: list[int] = []
    for m in older:
        (summarised if hide_summarised and m.id in active_ids else sent).append(m.id)
    uncovered = [m.id for m in older if m.id not in any_ids]
    tail_ids = tuple(m.id for m in recent)
    return Selection(tuple(sent) + tail_ids, tuple(summarised), tuple(uncovered), tail_ids)


def summarised_on_page(
    page: Sequence[ChatMessage],
    entries: Sequence[SummaryRange],
    *,
    readable_after: int,
    tail: int = DEFAULT_TAIL,
) -> tuple[int, ...]:
    """select_messages(chat, entries, hide_summarised=True).summarised_ids among `page` alone: the chat
    view folds them. `page` is a run of consecutive messages of the chat in chat order (refresh marks
    left out), `readable_after` how many messages not hidden from the AI come after it. A page needs only
    that count: whether a message is in the Recent message tail is how many readable ones follow it, so
    a 10,000-message chat's page reads its own messages and one indexed count, never the whole chat."""
    check_tail(tail)
    active_ids = _covered_ids(page, entries)
    out: list[int] = []
    later = readable_after
    for m in reversed(page):
        if m.hidden:
            continue
        if later >= tail and m.id in active_ids:
            out.append(m.id)
        later += 1
    return tuple(reversed(out))


def merged_spans(entries: Sequence[SummaryRange], *, upto: int) -> list[tuple[int, int]]:
    """The id ranges any entry covers (active or not), overlapping ones merged, cut at `upto`, in order:
    what the panel counts covered messages over, as ranges rather than message by message."""
    spans = sorted((e.first_id, min(e.last_id, upto)) for e in entries if e.first_id <= min(e.last_id, upto))
    out: list[tuple[int, int]] = []
    for first, last in spans:
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def uncovered_gaps(breaks: Sequence[tuple[int, int]], *, upto: int) -> list[tuple[int, int]]:
    """The id ranges up to `upto` outside `breaks` (merged spans that cover a readable message, in order):
    each holds one run of uncovered readable messages, if any. A span covering only hidden messages is
    no break: uncovered_batches walks readable messages alone, so a run goes on across it."""
    out, start = [], 0
    for first, last in breaks:
        if first > start:
            out.append((start, first - 1))
        start = max(start, last + 1)
    if start <= upto:
        out.append((start, upto))
    return out


def _check_count(count: int, what: str) -> None:
    if count > MAX_SCOPE_MESSAGES:
        raise ScopeError(
            f"{what} holds {count:,} messages; one summary takes at most {MAX_SCOPE_MESSAGES}. "
            "Use Backfill Summary for longer stretches."
        )


def _span(messages: Sequence[ChatMessage], start: int, stop: int) -> tuple[int, int]:
    """The id range of messages[start:stop] if any of them may be read by the AI."""
    picked = messages[start:stop]
    if not any(not m.hidden for m in picked):
        raise ScopeError("Every message in that scope is hidden from the AI: there is nothing to summarise.")
    return picked[0].id, picked[-1].id


def scope_last(messages: Sequence[ChatMessage], count: int) -> tuple[int, int]:
    """Summary Scope "Last N": the id range of the newest `count` messages."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ScopeError("Last needs a number of messages of at least 1.")
    if not messages:
        raise ScopeError("This chat has no messages to summarise.")
    if count > len(messages):
        raise ScopeError(f"This chat has only {len(messages)} messages; choose at most {len(messages)}.")
    _check_count(count, "That scope")
    return _span(messages, len(messages) - count, len(messages))


def scope_range(messages: Sequence[ChatMessage], first: int, last: int) -> tuple[int, int]:
    """Summary Scope "Range a–b" (message numbers from 1, both included): the id range."""
    for n in (first, last):
        if isinstance(n, bool) or not isinstance(n, int):
            raise ScopeError("A range is two message numbers.")
    if not messages:
        raise ScopeError("This chat has no messages to summarise.")
    if first < 1 or last > len(messages):
        raise ScopeError(f"Message numbers run from 1 to {len(messages)}.")
    if first > last:
        raise ScopeError(f"The range starts after it ends ({first}–{last}); write the smaller number first.")
    _check_count(last - first + 1, f"Range {first}–{last}")
    return _span(messages, first - 1, last)


def summary_input_ids(messages: Sequence[ChatMessage], first_id: int, last_id: int) -> tuple[int, ...]:
    """The messages a summary of `first_id..last_id` is written from: readable ones, in order."""
    return tuple(m.id for m in messages if first_id <= m.id <= last_id and not m.hidden)


def uncovered_batches(
    messages: Sequence[ChatMessage],
    entries: Sequence[SummaryRange],
    *,
    tail: int = DEFAULT_TAIL,
    batch: int = DEFAULT_BATCH,
) -> list[tuple[int, int]]:
    """Backfill's work list: runs of readable messages older than the tail that no entry covers (active
    or not: an inactive entry was the user's choice, not a gap), cut into id ranges of at most `batch`
    messages, oldest first. A summarised id range is never offered twice."""
    check_tail(tail)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_SCOPE_MESSAGES:
        raise ScopeError(f"A Backfill batch is 1 to {MAX_SCOPE_MESSAGES} messages.")
    readable = [m for m in messages if not m.hidden]
    older = readable[: max(len(readable) - tail, 0)]
    every = [SummaryRange(e.first_id, e.last_id, True) for e in entries]
    done = _covered_ids(older, every)
    out: list[tuple[int, int]] = []
    run: list[int] = []
    for m in older:
        if m.id in done:
            run = []
            continue
        if not run or len(run) == batch:
            run = []
            out.append((m.id, m.id))
        run.append(m.id)
        out[-1] = (run[0], m.id)
    return out


def automatic_scope(
    messages: Sequence[ChatMessage], entries: Sequence[SummaryRange], *, batch: int = DEFAULT_BATCH
) -> tuple[int, int] | None:
    """What an automatic summary covers: the readable messages after the newest entry's end (active or
    not), the oldest `batch` of them if there are more; None when there is nothing new. The Recent message
    tail is summarised too (it stays in the prompt anyway), so entries keep up with the chat."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_SCOPE_MESSAGES:
        raise ScopeError(f"A summary batch is 1 to {MAX_SCOPE_MESSAGES} messages.")
    after = max((e.last_id for e in entries), default=None)
    new = [m.id for m in messages if not m.hidden and (after is None or m.id > after)][:batch]
    return (new[0], new[-1]) if new else None


def automatic_due(user_messages_since_last: int, every: int = DEFAULT_EVERY) -> bool:
    """Whether the "every N user messages" trigger fires, counting user messages since the last
    automatic summary."""
    check_every(every)
    return user_messages_since_last >= every

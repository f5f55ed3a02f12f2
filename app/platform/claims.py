"""Which chats a thread of this app is working on, one set per kind of background work (a summary,
Prepare, Fix, a scene check, a re-scan): the same chat never has two runs of a kind at once.

Decisions:
- A claim lives in this process, not in the database: a run that a restart cut short belongs to no one,
  and the row it left saying "running" is the sweep's or the user's to pick up.
- The claims belong to the app (`Services.claims`, one RunClaims per app), so a chat is named by its id
  alone: an app started again on the same data folder (a restart in the same process, as the tests do)
  has claims of its own and does not see the stopped app's runs as its own; two apps on two folders
  whose chat ids collide share none.
- A thread started with `start` gives the claim back when its work returns or raises, and at once when
  the thread cannot start; `holding` gives it back when the block that records the run fails. Its
  `then` runs after the claim is given back, in the same thread: work that waited for the chat (a
  Generate queued behind a Backfill) starts there, with no moment where neither holds it unseen.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class ChatClaims:
    def __init__(self) -> None:
        self._held: dict[int, object] = {}  # chat id -> the holder's token: see `start`
        self._lock = threading.Lock()

    def claim(self, chat_id: int) -> bool:
        """Take the chat; False when a thread works it."""
        with self._lock:
            if chat_id in self._held:
                return False
            self._held[chat_id] = object()
            return True

    def release(self, chat_id: int) -> None:
        self._release(chat_id, None)

    def _release(self, chat_id: int, token: object | None) -> None:
        with self._lock:
            if chat_id in self._held and (token is None or self._held[chat_id] is token):
                del self._held[chat_id]

    def held(self, chat_id: int) -> bool:
        with self._lock:
            return chat_id in self._held

    def chats(self) -> list[int]:
        """The chats a thread works now."""
        with self._lock:
            return sorted(self._held)

    @contextmanager
    def holding(self, chat_id: int) -> Iterator[None]:
        """The block records and starts the claimed work; if it raises, the claim is given back."""
        try:
            yield
        except BaseException:
            self.release(chat_id)
            raise

    def start(
        self,
        chat_id: int,
        work: Callable[..., Any],
        *args: Any,
        name: str,
        then: Callable[[], Any] | None = None,
    ) -> None:
        """Run `work(*args)` in a daemon thread holding the chat's claim (taken by the caller), given
        back when the work ends; then `then()`, if given. Only that claim: if the work gave it back early
        (to let the next run start as soon as its end shows) and a new run took the chat, the new run
        keeps it."""
        with self._lock:
            token = self._held.get(chat_id)

        def run() -> None:
            try:
                work(*args)
            finally:
                self._release(chat_id, token)
                if then is not None:
                    try:
                        then()
                    except Exception:  # the work is done; what waited is picked up again by its sweep
                        log.exception("starting what waited for chat %s failed", chat_id)

        with self.holding(chat_id):
            threading.Thread(target=run, name=name, daemon=True).start()


@dataclass
class RunClaims:
    """One app's claims (`Services.claims`), one ChatClaims per kind of run: the Chat Summary's (Generate,
    Backfill, automatic), the Conversation days' (the job, Backfill, Write now), Prepare existing
    history's, Fix's, Re-scan scenes', the scene check's (after a reply, and skipping an unreadable
    batch) and Updating continuity's."""

    summaries: ChatClaims = field(default_factory=ChatClaims)
    day_summaries: ChatClaims = field(default_factory=ChatClaims)
    prepare: ChatClaims = field(default_factory=ChatClaims)
    fix: ChatClaims = field(default_factory=ChatClaims)
    rescans: ChatClaims = field(default_factory=ChatClaims)
    scene_checks: ChatClaims = field(default_factory=ChatClaims)
    continuity: ChatClaims = field(default_factory=ChatClaims)

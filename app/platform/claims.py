"""Which chats a thread of this process is working on, one set per kind of background work (a summary,
Prepare, Fix, a scene check, a re-scan): the same chat never has two runs of a kind at once.

Decisions:
- A claim lives in this process, not in the database: a run that a restart cut short belongs to no one,
  and the row it left saying "running" is the sweep's or the user's to pick up.
- Keyed by the engine object, not its URL: an app started again on the same data folder (a restart in
  the same process, as the tests do) must not see the stopped app's runs as its own. Not by id(engine)
  either: an id is handed out again once its engine is gone.
- A thread started with `start` gives the claim back when its work returns or raises, and at once when
  the thread cannot start; `holding` gives it back when the block that records the run fails. Its
  `then` runs after the claim is given back, in the same thread: work that waited for the chat (a
  Generate queued behind a Backfill) starts there, with no moment where neither holds it unseen.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)


class ChatClaims:
    def __init__(self, key: Callable[[Engine], Hashable] = lambda engine: engine) -> None:
        self._key = key
        self._held: dict[tuple[Hashable, int], object] = {}  # the holder's token: see `start`
        self._lock = threading.Lock()

    def claim(self, engine: Engine, chat_id: int) -> bool:
        """Take the chat; False when a thread works it."""
        key = (self._key(engine), chat_id)
        with self._lock:
            if key in self._held:
                return False
            self._held[key] = object()
            return True

    def release(self, engine: Engine, chat_id: int) -> None:
        self._release((self._key(engine), chat_id), None)

    def _release(self, key: tuple[Hashable, int], token: object | None) -> None:
        with self._lock:
            if key in self._held and (token is None or self._held[key] is token):
                del self._held[key]

    def held(self, engine: Engine, chat_id: int) -> bool:
        with self._lock:
            return (self._key(engine), chat_id) in self._held

    def chats(self, engine: Engine) -> list[int]:
        """The chats of this database a thread works now."""
        key = self._key(engine)
        with self._lock:
            return sorted(chat_id for k, chat_id in self._held if k == key)

    @contextmanager
    def holding(self, engine: Engine, chat_id: int) -> Iterator[None]:
        """The block records and starts the claimed work; if it raises, the claim is given back."""
        try:
            yield
        except BaseException:
            self.release(engine, chat_id)
            raise

    def start(self, engine: Engine, chat_id: int, work: Callable[..., Any], *args: Any, name: str,
              then: Callable[[], Any] | None = None) -> None:  # fmt: skip
        """Run `work(*args)` in a daemon thread holding the chat's claim (taken by the caller), given
        back when the work ends; then `then()`, if given. Only that claim: if the work gave it back early
        (to let the next run start as soon as its end shows) and a new run took the chat, the new run
        keeps it."""
        key = (self._key(engine), chat_id)
        with self._lock:
            token = self._held.get(key)

        def run() -> None:
            try:
                work(*args)
            finally:
                self._release(key, token)
                if then is not None:
                    try:
                        then()
                    except Exception:  # the work is done; what waited is picked up again by its sweep
                        log.exception("starting what waited for chat %s failed", chat_id)

        with self.holding(engine, chat_id):
            threading.Thread(target=run, name=name, daemon=True).start()

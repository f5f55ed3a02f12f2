"""Which thread takes a second connection of a pool while it already holds one: the pattern that
starved the app's pool under load (a request holds its session's connection, then something it calls
opens a `Session(services.engine)` of its own and waits for another; a crowd of requests each holding
one and waiting for a second holds them all). Attached to an engine through its pool's checkout and
checkin events; only nesting within one thread counts, since a background thread holding its own
connection beside a request's is no nesting. A connection may be given back on another thread than
the one that took it (FastAPI closes a request's session on another worker thread), so each
connection is tracked to the thread that checked it out."""

from __future__ import annotations

import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import event
from sqlalchemy.engine import Engine

from tests.support.live import SERVER_THREAD


@dataclass(frozen=True)
class Nesting:
    """One checkout made by a thread that already held connections of the pool (`held`: one stack each)."""

    thread: str
    stack: str  # where the nested checkout was made
    held: tuple[str, ...]  # where each connection the thread held then was checked out

    def __str__(self) -> str:
        held = "\n".join(f"--- held since:\n{stack}" for stack in self.held)
        return f"thread {self.thread!r} took a connection while holding {len(self.held)}:\n{self.stack}{held}"


# The recorders attached to each engine. Its listeners are added once, when its LiveSugo is made, and
# never removed: SQLAlchemy iterates an event's listeners without a lock, so adding or removing one while
# another thread checks a connection out breaks that checkout ("deque mutated during iteration", found
# on an app's rebuild thread while a test attached and detached a recorder around each request).
_RECORDERS: weakref.WeakKeyDictionary[Engine, list[PoolNesting]] = weakref.WeakKeyDictionary()
_RECORDERS_LOCK = threading.Lock()


def watch(engine: Engine) -> None:
    """Forward `engine`'s pool checkouts and checkins to the recorders attached to it (call it before any
    other thread uses the engine; again, it does nothing)."""
    with _RECORDERS_LOCK:
        if engine in _RECORDERS:
            return
        _RECORDERS[engine] = []

    def checkout(dbapi_conn, record, proxy) -> None:
        for recorder in _attached(engine):
            recorder._checkout(dbapi_conn, record, proxy)

    def checkin(dbapi_conn, record) -> None:
        for recorder in _attached(engine):
            recorder._checkin(dbapi_conn, record)

    event.listen(engine, "checkout", checkout)
    event.listen(engine, "checkin", checkin)


def _attached(engine: Engine) -> tuple[PoolNesting, ...]:
    with _RECORDERS_LOCK:
        return tuple(_RECORDERS.get(engine, ()))


class PoolNesting:
    """Records every nested checkout on `engine`'s pool while attached (a context manager); with
    `threads`, only those of the threads whose name it accepts."""

    def __init__(self, engine: Engine, threads: Callable[[str], bool] | None = None) -> None:
        self.engine = engine
        self.threads = threads
        self.nestings: list[Nesting] = []
        self._lock = threading.Lock()
        self._owner: dict[int, int] = {}  # id(connection record) -> the thread that checked it out
        self._held: dict[int, dict[int, str]] = {}  # thread -> its records' ids -> where each was checked out

    def _checkout(self, _dbapi_conn, record, _proxy) -> None:
        thread = threading.get_ident()
        stack = "".join(traceback.format_stack()[:-1])  # less this listener's own frame
        with self._lock:
            held = self._held.setdefault(thread, {})
            name = threading.current_thread().name
            if held and (self.threads is None or self.threads(name)):
                self.nestings.append(Nesting(name, stack, tuple(held.values())))
            held[id(record)] = stack
            self._owner[id(record)] = thread

    def _checkin(self, _dbapi_conn, record) -> None:
        with self._lock:
            thread = self._owner.pop(id(record), None)
            if thread is not None:
                self._held.get(thread, {}).pop(id(record), None)

    def clear(self) -> None:
        with self._lock:
            self.nestings.clear()

    def report(self) -> str:
        return "\n\n".join(str(n) for n in self.nestings)

    def __enter__(self) -> PoolNesting:
        watch(self.engine)  # a LiveSugo's engine is watched from its start already
        with _RECORDERS_LOCK:
            _RECORDERS[self.engine].append(self)
        return self

    def __exit__(self, *exc) -> None:
        with _RECORDERS_LOCK:
            _RECORDERS[self.engine].remove(self)


def request_threads(name: str) -> bool:
    """The threads a live Sugo (tests/support/live.py) answers requests on: the worker threads of
    AnyIO's pool (a plain `def` route) and the server's own thread (an `async def` route, on the
    event loop); not the threads the app starts for background work, each named for its work."""
    return name == "AnyIO worker thread" or name.startswith(SERVER_THREAD)


@contextmanager
def no_nested_checkout(
    engine: Engine, what: str = "", threads: Callable[[str], bool] | None = None
) -> Iterator[PoolNesting]:
    """Fail when a thread (of those `threads` accepts) takes a second connection of `engine`'s pool
    within the block, with the stack of each such checkout and of the connections it held."""
    with PoolNesting(engine, threads) as nesting:
        yield nesting
    assert not nesting.nestings, f"{what}: a thread held two connections of the pool\n\n{nesting.report()}"

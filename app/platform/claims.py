"""Which chats are being worked on, one set per kind of background work (a summary, Prepare, Fix, a
scene check, a re-scan): the same chat never has two runs of a kind at once, across every Sugo
server sharing the database.

Decisions:
- A claim is a row of `run_claim` (kind, chat), taken with one INSERT … ON CONFLICT DO NOTHING: the
  database decides between two threads, or two servers, that want the same chat at once. The same
  code runs on SQLite and PostgreSQL.
- A claim names the app instance that holds it (`holder`, new at every start) and the server it runs
  on (`server`, SUGO_SERVER_NAME: stable across restarts). Each instance refreshes its claims'
  `heartbeat_at` every HEARTBEAT_S; a claim not refreshed for STALE_AFTER belongs to a server that
  died, and the next claim of that chat takes it over, so another server resumes the run.
- At start an instance drops the claims its server's previous life left (on SQLite, every claim: one
  process owns the file), so a restarted server resumes its own runs at once instead of waiting for
  them to go stale. A run a shutdown cut short keeps its claim until then (`keep_runs_for_others`):
  a server stopped for good leaves its runs to the live servers, which resume them once the claim is
  stale (app/platform/jobs.py `look_after_dead_servers`).
- The claims belong to the app (`Services.claims`), so a chat is named by its id alone: two apps on
  two databases whose chat ids collide share none.
- A thread started with `start` gives the claim back when its work returns or raises, and at once when
  the thread cannot start; `holding` gives it back when the block that records the run fails. Its
  `then` runs after the claim is given back, in the same thread: work that waited for the chat (a
  Generate queued behind a Backfill) starts there, with no moment where neither holds it unseen.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Select, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Field, SQLModel, select

from app.platform.timeutil import utcnow

log = logging.getLogger(__name__)

HEARTBEAT_S = 10.0
STALE_AFTER = timedelta(seconds=60)
KINDS = ("summaries", "day_summaries", "prepare", "fix", "rescans", "scene_checks", "continuity", "rebuilds")
REPLIES = "replies"  # the reply being written in a chat (app/generation/reply.py's Generations)
# A scene whose recap is being written (app/memory/scenes/writer.py's HeldScenes): for this kind the
# row's chat_id column holds the scene's id.
SCENE_RECAPS = "scene_recaps"
# A reminder being delivered (app/tools/tasks/firing.py): the row's chat_id column holds the task's id.
TASK_DELIVERIES = "task_deliveries"


class RunClaim(SQLModel, table=True):
    """One chat being worked on by one kind of run, on one server."""

    __tablename__ = "run_claim"

    kind: str = Field(primary_key=True)
    chat_id: int = Field(primary_key=True)
    token: str  # this claim's own mark: an old thread's end never releases a newer claim
    holder: str = Field(index=True)  # the app instance holding it
    server: str  # SUGO_SERVER_NAME of that instance
    heartbeat_at: datetime
    # Stop asked from another server for the run this claim holds (a reply being written there).
    stop_requested: bool = False


class ClaimTable:
    """The run_claim rows as one app instance reads and writes them."""

    def __init__(
        self,
        engine: Engine,
        *,
        server: str,
        now: Callable[[], datetime] = utcnow,
        stale_after: timedelta | None = None,
    ) -> None:
        self.engine = engine
        self.server = server
        self.holder = uuid.uuid4().hex
        self._clock = now
        # Read when the table is made (not when this module is): a test shortens it for one server.
        self._stale_after = stale_after if stale_after is not None else STALE_AFTER
        self._stop = threading.Event()
        self._beating: threading.Thread | None = None
        # Set when the app shuts down (`keep_runs_for_others`): a run's thread cut short then leaves its
        # claim to go stale instead of giving it back (see ChatClaims.start).
        self.closing = False

    def _now(self) -> datetime:
        # Stored as UTC without a zone on both databases (the column's type), so times compare as written.
        return self._clock().astimezone(UTC).replace(tzinfo=None)

    def take(self, kind: str, chat_id: int, *, over_own: bool = False) -> str | None:
        """Claim the chat for a run of `kind`: this claim's token, or None when a live claim holds it.
        With `over_own`, a claim this instance already holds is taken over with a new token: for a
        caller that knows no run of its own is at work any more (a reply whose end the browser has
        seen, its claim not yet given back)."""
        with self.engine.begin() as conn:
            return self.take_in(conn, kind, chat_id, over_own=over_own)

    def take_in(self, conn: Connection, kind: str, chat_id: int, *, over_own: bool = False) -> str | None:
        """`take` inside the caller's transaction: the claim commits with the work that needs it and
        goes with it when that work is refused (a reply's turn for a chat that does not exist leaves
        the database as it found it). On PostgreSQL a second server's claim of the same chat waits
        for this transaction, then finds the row."""
        now = self._now()
        token = uuid.uuid4().hex
        conn.execute(
            text("DELETE FROM run_claim WHERE kind = :kind AND chat_id = :chat AND heartbeat_at < :stale"),
            {"kind": kind, "chat": chat_id, "stale": now - self._stale_after},
        )
        taken = conn.execute(
            text(
                "INSERT INTO run_claim (kind, chat_id, token, holder, server, heartbeat_at, stop_requested) "
                "VALUES (:kind, :chat, :token, :holder, :server, :now, :no) ON CONFLICT (kind, chat_id) "
                + (
                    "DO UPDATE SET token = excluded.token, heartbeat_at = excluded.heartbeat_at, "
                    "stop_requested = excluded.stop_requested WHERE run_claim.holder = excluded.holder"
                    if over_own
                    else "DO NOTHING"
                )
            ),
            {
                "kind": kind,
                "chat": chat_id,
                "token": token,
                "holder": self.holder,
                "server": self.server,
                "now": now,
                "no": False,
            },
        ).rowcount
        return token if taken == 1 else None

    def give_back(self, kind: str, chat_id: int, token: str | None = None) -> None:
        """Release this instance's claim of the chat (only the claim `token` names, when given)."""
        sql = "DELETE FROM run_claim WHERE kind = :kind AND chat_id = :chat AND holder = :holder"
        params: dict[str, Any] = {"kind": kind, "chat": chat_id, "holder": self.holder}
        if token is not None:
            sql += " AND token = :token"
            params["token"] = token
        with self.engine.begin() as conn:
            conn.execute(text(sql), params)

    def token(self, kind: str, chat_id: int) -> str | None:
        """This instance's token for the chat's claim, if it holds it."""
        with self.engine.connect() as conn:
            return conn.execute(
                text(
                    "SELECT token FROM run_claim WHERE kind = :kind AND chat_id = :chat AND holder = :holder"
                ),
                {"kind": kind, "chat": chat_id, "holder": self.holder},
            ).scalar()

    def chats(self, kind: str) -> list[int]:
        """The chats a live claim of `kind` holds, on any server."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT chat_id FROM run_claim WHERE kind = :kind AND heartbeat_at >= :stale ORDER BY chat_id"
                ),
                {"kind": kind, "stale": self._now() - self._stale_after},
            )
            return [row[0] for row in rows]

    def held(self, kind: str, chat_id: int) -> bool:
        with self.engine.connect() as conn:
            return (
                conn.execute(
                    text(
                        "SELECT count(*) FROM run_claim "
                        "WHERE kind = :kind AND chat_id = :chat AND heartbeat_at >= :stale"
                    ),
                    {"kind": kind, "chat": chat_id, "stale": self._now() - self._stale_after},
                ).scalar_one()
                > 0
            )

    def live_ids(self, kind: str) -> Select:
        """The ids of `kind`'s live claims, on any server, as a subquery: a statement that reads them in
        the same snapshot as the rows it changes (a claim taken between two statements is never missed)."""
        # The time is bound as text, as everywhere here: the column's type wants zoned datetimes, the
        # table stores UTC without a zone on both databases.
        fresh = text("run_claim.heartbeat_at >= :stale").bindparams(stale=self._now() - self._stale_after)
        return select(RunClaim.chat_id).where(RunClaim.kind == kind, fresh)  # type: ignore[call-overload]

    def stale(self) -> list[tuple[str, int, str]]:
        """(kind, chat, token) of every claim no server refreshed for the stale time: what a server that
        died left behind."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT kind, chat_id, token FROM run_claim WHERE heartbeat_at < :stale"),
                {"stale": self._now() - self._stale_after},
            )
            return [(row[0], row[1], row[2]) for row in rows]

    def drop_stale(self, claims: list[tuple[str, int, str]]) -> int:
        """Delete those of `claims` still stale (one refreshed or taken over meanwhile stays); how many."""
        dropped = 0
        with self.engine.begin() as conn:
            for kind, chat_id, token in claims:
                dropped += conn.execute(
                    text(
                        "DELETE FROM run_claim WHERE kind = :kind AND chat_id = :chat AND token = :token "
                        "AND heartbeat_at < :stale"
                    ),
                    {"kind": kind, "chat": chat_id, "token": token, "stale": self._now() - self._stale_after},
                ).rowcount
        return dropped

    def holds(self, kind: str, chat_id: int, token: str) -> bool:
        """Whether the claim `token` names is in the table (a read: nothing written to find out)."""
        with self.engine.connect() as conn:
            found = conn.execute(
                text("SELECT 1 FROM run_claim WHERE kind = :kind AND chat_id = :chat AND token = :token"),
                {"kind": kind, "chat": chat_id, "token": token},
            ).first()
        return found is not None

    def live_claim(self, kind: str, chat_id: int) -> tuple[str, str] | None:
        """The holder and token of the chat's live claim of `kind`, on any server; None when none holds it."""
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT holder, token FROM run_claim "
                    "WHERE kind = :kind AND chat_id = :chat AND heartbeat_at >= :stale"
                ),
                {"kind": kind, "chat": chat_id, "stale": self._now() - self._stale_after},
            ).first()
        return (row[0], row[1]) if row is not None else None

    def held_elsewhere(self, kind: str, chat_id: int) -> bool:
        """Whether another app instance (another server) holds the chat's live claim of `kind`."""
        claim = self.live_claim(kind, chat_id)
        return claim is not None and claim[0] != self.holder

    def request_stop(self, kind: str, chat_id: int) -> bool:
        """Ask whichever server holds the chat's live claim to stop that run; False when none holds it."""
        with self.engine.begin() as conn:
            return (
                conn.execute(
                    text(
                        "UPDATE run_claim SET stop_requested = :yes "
                        "WHERE kind = :kind AND chat_id = :chat AND heartbeat_at >= :stale"
                    ),
                    {"yes": True, "kind": kind, "chat": chat_id, "stale": self._now() - self._stale_after},
                ).rowcount
                > 0
            )

    def stop_requested(self, kind: str, chat_id: int, token: str) -> bool:
        """Whether Stop was asked (on any server) for the run holding this claim."""
        with self.engine.connect() as conn:
            return bool(
                conn.execute(
                    text(
                        "SELECT stop_requested FROM run_claim WHERE kind = :kind AND chat_id = :chat AND token = :token"
                    ),
                    {"kind": kind, "chat": chat_id, "token": token},
                ).scalar()
            )

    def beat(self) -> int:
        """Mark this instance's claims alive now; how many it holds."""
        with self.engine.begin() as conn:
            return conn.execute(
                text("UPDATE run_claim SET heartbeat_at = :now WHERE holder = :holder"),
                {"now": self._now(), "holder": self.holder},
            ).rowcount

    def forget_previous_life(self) -> int:
        """Drop the claims this server's earlier start left (every claim on SQLite, which one process owns)."""
        with self.engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                return conn.execute(text("DELETE FROM run_claim")).rowcount
            return conn.execute(
                text("DELETE FROM run_claim WHERE server = :server AND holder != :holder"),
                {"server": self.server, "holder": self.holder},
            ).rowcount

    def start_heartbeat(self, every_s: float = HEARTBEAT_S) -> None:
        def run() -> None:
            while not self._stop.wait(every_s):
                try:
                    self.beat()
                except Exception:  # a busy or unreachable database: the next beat tries again
                    log.warning("could not refresh this server's run claims", exc_info=True)

        self._stop.clear()
        self._beating = threading.Thread(target=run, name="run-claims-heartbeat", daemon=True)
        self._beating.start()

    def keep_runs_for_others(self) -> None:
        """The app is shutting down: the runs it cuts short keep their claims, which stop being
        refreshed and go stale, so the live servers' look for dead servers' work resumes them (a
        server stopped for good leaves nothing "running" for ever); this server's next start drops
        them and resumes its runs at once. Replies still give theirs back (a stopped reply is kept as
        it stands; nothing resumes it, and its chat must take the next one)."""
        self.closing = True

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._beating is not None:
            self._beating.join(5)
            self._beating = None


class ChatClaims:
    """The claims of one kind of run."""

    def __init__(self, table: ClaimTable, kind: str) -> None:
        self._table = table
        self.kind = kind

    def claim(self, chat_id: int) -> bool:
        """Take the chat; False when a run of this kind works it (here or on another server)."""
        return self._table.take(self.kind, chat_id) is not None

    def release(self, chat_id: int) -> None:
        self._table.give_back(self.kind, chat_id)

    def held(self, chat_id: int) -> bool:
        return self._table.held(self.kind, chat_id)

    def chats(self) -> list[int]:
        """The chats a run of this kind works now."""
        return self._table.chats(self.kind)

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
        token = self._table.token(self.kind, chat_id)

        def run() -> None:
            try:
                work(*args)
            finally:
                try:
                    if token is not None and not self._table.closing:
                        self._table.give_back(self.kind, chat_id, token)
                except Exception:  # left to go stale; the next claim takes it over
                    log.exception("giving back the %s claim of chat %s failed", self.kind, chat_id)
                if then is not None:
                    try:
                        then()
                    except Exception:  # the work is done; what waited is picked up again by its sweep
                        log.exception("starting what waited for chat %s failed", chat_id)

        with self.holding(chat_id):
            threading.Thread(target=run, name=name, daemon=True).start()


class RunClaims:
    """One app's claims (`Services.claims`), one ChatClaims per kind of run: the Chat Summary's (Generate,
    Backfill, automatic), the Conversation days' (the job, Backfill, Write now), Prepare existing
    history's, Fix's, Re-scan scenes', the scene check's (after a reply, and skipping an unreadable
    batch), Updating continuity's and Memory Recall's Rebuild all."""

    def __init__(self, table: ClaimTable) -> None:
        self.table = table
        self.summaries = ChatClaims(table, "summaries")
        self.day_summaries = ChatClaims(table, "day_summaries")
        self.prepare = ChatClaims(table, "prepare")
        self.fix = ChatClaims(table, "fix")
        self.rescans = ChatClaims(table, "rescans")
        self.scene_checks = ChatClaims(table, "scene_checks")
        self.continuity = ChatClaims(table, "continuity")
        self.rebuilds = ChatClaims(
            table, "rebuilds"
        )  # Memory Recall's Rebuild all (app/memory/recall/jobs.py)

    def kinds(self) -> list[ChatClaims]:
        return [getattr(self, kind) for kind in KINDS]

"""The one object holding what lives as long as the app: the engine, the key box, the caches, the
recall index, the thread pools, the prompt sources, the replies being written (and the background work
waiting for them to end), the chats each kind of background run works, Backfill and Re-scan progress,
the scenes whose recap is being written and the scheduler.

`create_app` builds it and keeps it on `app.state.services`; routes take it through `ServicesDep`,
and jobs and services receive it (or the part they need) as an argument. Nothing of this lives in
module globals, so two apps in one process (two data folders) share nothing.

This module sits at the bottom of the layers: it names the types of the domains' parts for the reader
and the type checker only, and imports none of them at run time (its own folder's it imports)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.platform.claims import RunClaims
from app.platform.clock import Clock
from app.platform.foreground import Foreground
from app.platform.queue import JobQueue
from app.platform.settings import Settings

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from sqlalchemy.engine import Engine

    from app.connections.crypto import KeyBox
    from app.generation.reply import Generations
    from app.lore.prompting import CompiledBooks
    from app.memory.days import runs, write
    from app.memory.recall.runtime import RecallRuntime
    from app.memory.scenes import rescans, writer
    from app.memory.summaries.prompting import SummaryBlocks
    from app.prompt.sources import PromptSources
    from app.tools.registry import ToolRegistry
    from app.web.auth import LoginThrottle, SessionSigner  # LoginThrottle lives in app.web.throttle


@dataclass
class Services:
    settings: Settings
    engine: Engine
    keybox: KeyBox
    lorebooks: CompiledBooks  # lorebooks' entries and compiled matchers, per book version
    summary_blocks: SummaryBlocks  # each chat's Chat Summary entries as the prompt sends them, per change
    recall: RecallRuntime  # the sign-bit index, the query threads, the running rebuilds
    sources: PromptSources
    generations: Generations  # the replies being written now
    foreground: Foreground  # whether a reply is being written: background work waits for it to end
    claims: RunClaims  # the chats a thread of this app works, per kind of run (summaries, Prepare, Fix, ...)
    day_backfills: runs.DayBackfills  # each Conversation chat's latest day Backfill, its progress
    rescan_statuses: rescans.RescanStatuses  # each chat's last Re-scan scenes, its progress or outcome
    held_scenes: writer.HeldScenes  # the scenes whose recap a thread of this app is writing now
    tools: ToolRegistry  # the built-in tools; MCP tools join per turn from their servers' saved discoveries
    clock: Clock = field(default_factory=Clock)  # "now" for tasks and reminders; tests move it
    # Group chats' talkativeness rolls and random picks (app/chats/turn_taking.py); tests seed it.
    turn_random: random.Random = field(default_factory=random.Random)
    session_signer: SessionSigner | None = None  # login sessions, with SUGO_PASSWORD
    login_throttle: LoginThrottle | None = None  # wrong passwords per client, with SUGO_PASSWORD
    scheduler: AsyncIOScheduler | None = None  # set while the app runs (its lifespan)
    # Where background jobs run: in process on SQLite, procrastinate's queue on PostgreSQL (app/platform/queue.py).
    queue: JobQueue | None = None
    # Conversation chats' Write now runs, the latest per chat (app/memory/days/write.py).
    summary_writes: dict[int, write.WriteRun] = field(default_factory=dict)

    def close(self) -> None:
        """Let go of the threads and connections (the app's lifespan ends)."""
        self.recall.close()
        self.engine.dispose()
        self.claims.table.engine.dispose()

"""What Memory Recall keeps while the app runs: the sign-bit index, the newest queries' vectors,
the threads a search runs its passes on, the memory syncs running, the rebuilds (read from the database), the built-in
models the data uses. One per app (app/platform/services.py), never a module global."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.memory.recall.core.sources import DEFAULT_BUILTIN
from app.memory.recall.embedders import BuiltinModels, QueryVectors, VectorSizes
from app.memory.recall.embedding import builtin_models_in_use
from app.memory.recall.index import SignIndex
from app.memory.recall.jobs import ChatSyncs, Rebuilds

log = logging.getLogger(__name__)


def _query_threads() -> ThreadPoolExecutor:
    # A search takes two (its vector and word passes); a new message being embedded early, a third.
    return ThreadPoolExecutor(max_workers=3, thread_name_prefix="recall-query")


@dataclass
class RecallRuntime:
    # The app's database: the rebuilds are rows of it (None: a runtime without one, in a unit test).
    engine: Engine | None = None
    index: SignIndex = field(default_factory=SignIndex)
    query_vectors: QueryVectors = field(default_factory=QueryVectors)
    queries: ThreadPoolExecutor = field(default_factory=_query_threads)
    rebuilds: Rebuilds = field(default_factory=Rebuilds)
    syncs: ChatSyncs = field(default_factory=ChatSyncs)  # one memory sync per chat at a time
    models: BuiltinModels = field(default_factory=BuiltinModels)
    sizes: VectorSizes = field(default_factory=VectorSizes)  # the vector size each embedding server gave

    def __post_init__(self) -> None:
        if self.rebuilds.engine is None:
            self.rebuilds.engine = self.engine

    def load_models(self, engine: Engine) -> None:
        """At start, in the background: work out which built-in models the data uses and load them,
        so no request waits for that (a search that comes first waits a while, then ranks by words)."""
        threading.Thread(
            target=self._load_models, args=(engine,), name="load built-in models", daemon=True
        ).start()

    def _load_models(self, engine: Engine) -> None:
        try:
            with Session(engine) as session:
                names = builtin_models_in_use(session)
        except Exception:  # a broken row must not leave the health check saying "loading" for good
            log.exception("could not tell which built-in models the chats use; loading the default one")
            names = {DEFAULT_BUILTIN}
        self.models.start(names)

    def close(self) -> None:
        self.index.close()
        self.queries.shutdown(wait=False, cancel_futures=True)

"""What Memory Recall keeps while the app runs: the sign-bit index, the newest queries' vectors,
the threads a search runs its passes on, the running rebuilds and memory syncs. One per app
(app/services.py), never a module global."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from app.memory.recall.embedders import QueryVectors
from app.memory.recall.index import SignIndex
from app.memory.recall.jobs import ChatSyncs, Rebuilds


def _query_threads() -> ThreadPoolExecutor:
    # A search takes two (its vector and word passes); a new message being embedded early, a third.
    return ThreadPoolExecutor(max_workers=3, thread_name_prefix="recall-query")


@dataclass
class RecallRuntime:
    index: SignIndex = field(default_factory=SignIndex)
    query_vectors: QueryVectors = field(default_factory=QueryVectors)
    queries: ThreadPoolExecutor = field(default_factory=_query_threads)
    rebuilds: Rebuilds = field(default_factory=Rebuilds)
    syncs: ChatSyncs = field(default_factory=ChatSyncs)  # one memory sync per chat at a time

    def close(self) -> None:
        self.index.close()
        self.queries.shutdown(wait=False, cancel_futures=True)

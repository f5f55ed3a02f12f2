"""Memory Recall as a prompt source: recalled memories just above the newest turns, the embedding
job after every reply, the periodic sweep, and its part of Chat Settings."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from sqlmodel import Session

from app.chats.core.window import HistoryMessage
from app.chats.history import unseen_message_ids
from app.chats.models import Chat
from app.chats.settings import read_settings
from app.memory.recall.core.lexical import DENSE_WEIGHT, NEIGHBOUR_SHARE
from app.memory.recall.core.sources import BUILTIN_MODELS
from app.memory.recall.embedding import embed_query_early, embedder_for_chat, embedding_choice
from app.memory.recall.jobs import JOBS, resume_cut_short, schedule_embed_chat
from app.memory.recall.service import finish_recall, start_recall
from app.platform import forms
from app.platform.jobs import RESUME, Job, RunKind
from app.platform.services import Services
from app.prompt.core.builder import DynamicBlock
from app.prompt.core.tokens import count_tokens
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn

OFF_NOTE = "Memory Recall is off for this chat (Chat Settings → Memory Recall); memories are still kept."
ADVANCED_NOTE = (
    "Memory Recall: Advanced Memory Recall recalls for this chat, so standard recall inserts nothing."
)
SHORT_QUERY_WORDS = 4  # a shorter message searches with the one before it


def recall_query(messages: Sequence[HistoryMessage]) -> str:
    """The newest user message, with the message before it when it is very short ("and then?")."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            text = messages[i].content
            if len(text.split()) < SHORT_QUERY_WORDS and i > 0:
                text = f"{messages[i - 1].content}\n{text}"
            return text
    return ""


class RecallSource(PromptSource):
    name = "recall"
    kinds = ("recalled_memories",)
    label = "Memory Recall"

    def begin(self, turn: Turn) -> bool:
        """Start the search on the recall threads; once the query is embedded and the sign bits are
        scanned, its SQLite work overlaps with the other sources' work."""
        if not turn.settings.recall_enabled(turn.chat.mode):
            return False
        services = turn.services
        recent = turn.history.recent
        query = recall_query(turn.history.messages)
        # The embedder is picked on the vector pass's thread, so the word pass starts at once. Memories
        # are made whatever the window: those of messages the prompt holds already are left out.
        pending = turn.scratch[self.name] = start_recall(
            turn.session.get_bind(),
            turn.chat.id,
            query,
            None,
            bits=services.recall.index,
            threads=services.recall.queries,
            vectors=services.recall.query_vectors,
            choose_embedder=partial(
                embedder_for_chat, chat_id=turn.chat.id, keybox=services.keybox, sizes=services.recall.sizes
            ),
            window_start_id=recent[0].id if recent else None,
        )
        if pending is not None and services.recall.query_vectors.ready(query):
            # The sign-bit scan is numpy steps that each need the GIL back: beside the other sources'
            # Python work it would crawl, so with the query's vector known it runs now, while this
            # thread waits (the word pass runs meanwhile); the SQLite work left overlaps with theirs.
            # A query still being embedded (a new message: 15-20 ms of the model, which lets go of the
            # GIL for its whole pass) is not waited for: the other sources do their work meanwhile,
            # and the scan comes after it.
            pending.scanned.result()
        return True

    def contribute(self, turn: Turn) -> Contribution:
        if turn.settings.advanced_memory_on(turn.chat.mode):
            return Contribution(note=ADVANCED_NOTE)
        if not turn.settings.recall_enabled(turn.chat.mode):
            return Contribution(note=OFF_NOTE)
        if self.name not in turn.scratch:
            self.begin(turn)
        recent = turn.history.recent
        result = finish_recall(
            turn.session,
            turn.scratch.pop(self.name),
            context_size=turn.context_size,
            window_start_id=recent[0].id if recent else None,
            count=count_tokens,
            # In a group, a memory holding a message the speaker cannot see stays out of its prompt.
            unseen=unseen_message_ids(turn.session, turn.chat.id, turn.viewer)
            if turn.viewer
            else frozenset(),
            since=turn.viewer.start_id if turn.viewer else None,
        )
        blocks = (
            (DynamicBlock("recalled_memories", "Recalled memories", result.block),) if result.block else ()
        )
        return Contribution(dynamic=blocks, note=result.note)

    def expect(self, services: Services, session: Session, chat: Chat, text: str) -> None:
        """Embed the new message now, on the recall threads, while it is stored and the turn is read:
        it will be the query (unless it is too short to stand alone)."""
        if (
            not read_settings(chat.settings).recall_enabled(chat.mode)
            or len(text.split()) < SHORT_QUERY_WORDS
        ):
            return
        embed_query_early(services, session, chat.id, text)

    def after_reply(self, services: Services, chat_id: int) -> None:
        # Memories are kept whether or not recall is on for the chat: turning it on later finds them.
        schedule_embed_chat(services, chat_id)

    def messages_changed(self, services: Services, chat_id: int) -> None:
        # Recall already leaves out a chunk whose messages changed; this drops it from the store
        # and the viewer, and rebuilds it from the new text, without waiting for a reply.
        schedule_embed_chat(services, chat_id)

    def chat_added(self, services: Services, chat_id: int) -> None:
        # A long import is what the user searches first: waiting for the sweep would leave it
        # without memories for up to ten minutes.
        schedule_embed_chat(services, chat_id)

    def jobs(self) -> Sequence[Job]:
        return JOBS

    def runs(self) -> Sequence[RunKind]:
        # A rebuild the user asked for goes on from the last memory it embedded (jobs.resume_cut_short).
        return (RunKind("Memory Recall rebuild", "rebuild_run", RESUME, resume_cut_short),)

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection:
        return SettingsSection(
            "memory/_recall_settings.html",
            {
                "embedding": embedding_choice(session, chat, automatic=True),
                "builtin_models": BUILTIN_MODELS,
                "dense_weight": DENSE_WEIGHT,
                "neighbour_share": NEIGHBOUR_SHARE,
            },
        )

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        if not forms.text(form, "memory_recall_shown"):
            return {}
        return {
            "memory_recall": forms.checkbox(form, "memory_recall"),
            "memory_chunking_paused": forms.checkbox(form, "memory_chunking_paused"),
            "builtin_embedding": forms.text(form, "builtin_embedding") or None,
            "recall_dense_weight": forms.optional_number(form, "recall_dense_weight"),
            "recall_neighbour_share": forms.optional_number(form, "recall_neighbour_share"),
        }

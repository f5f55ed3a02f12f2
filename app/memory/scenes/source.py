"""Advanced Memory Recall as a prompt source: after each reply of a chat with it on, the scene check and
the recaps (jobs.py), and after any change to its messages the recaps of the scenes it changed
(rewrites.py); on each turn, the current window (from the stored "new start" on), the Chat
Summary constants that fit, the current scene's source excerpt when it does not fit, and the Recalled
Scenes block, planned by window.plan_memory (prompt.py); and its Chat Settings section with Prepare
existing history (settings_form.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import partial
from typing import Any

from sqlmodel import Session

from app.chats.models import Chat
from app.chats.service import chat_characters, user_name
from app.chats.settings import ChatSettings, read_settings
from app.memory.recall.embedding import embed_query_early, embedder_for_chat
from app.memory.recall.service import start_search
from app.memory.scenes import fix, prepare, prompt, recollections, rescans, service, settings_form, visibility
from app.memory.scenes.core import recalled
from app.memory.scenes.jobs import JOBS, schedule_processing
from app.memory.scenes.rewrites import REWRITE_JOB, schedule_rewrites
from app.memory.scenes.writer import release_stale
from app.platform.jobs import CLOSE, RESUME, Job, RunKind
from app.platform.services import Services
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn

# What a restart leaves is settled at start in this order (app/platform/jobs.py): the recaps it cut short go back to
# waiting first, so Prepare (resumed next) and the sweep find them; Fix and Re-scan are closed with a sentence.
RUNS = (
    RunKind("Scene recaps", "scene", RESUME, release_stale),
    RunKind("Prepare existing history", "scene_run", RESUME, prepare.resume_cut_short),
    RunKind("Fix", "scene_run", CLOSE, fix.close_cut_short, reason=fix.RESTARTED),
    RunKind("Re-scan scenes", "scene_run", CLOSE, rescans.close_cut_short, reason=rescans.RESTARTED),
)


class AdvancedMemorySource(PromptSource):
    name = "scenes"
    kinds = ("chat_summary", "current_scene_summary", "recalled_scenes")
    label = "Advanced Memory"

    def begin(self, turn: Turn) -> bool:
        """Start ranking the chat's memories for the scenes on the recall threads; contribute last, once
        the other sources' blocks are known (they count against the ceiling)."""
        if not turn.settings.advanced_memory_on(turn.chat.mode):
            return False
        query = recalled.scene_query(
            [recalled.QueryMessage(m.role, m.name, m.content) for m in turn.history.messages],
            turn.speaker.name,
            ignore=(turn.speaker.name, turn.user_name),
        )
        services = turn.services
        pending = turn.scratch[self.name] = start_search(
            turn.session.get_bind(),
            turn.chat.id,
            query,
            None,
            bits=services.recall.index,
            threads=services.recall.queries,
            vectors=services.recall.query_vectors,
            wait_for_model=False,
            choose_embedder=partial(
                embedder_for_chat, chat_id=turn.chat.id, keybox=services.keybox, sizes=services.recall.sizes
            ),
            # Memories are made inside the window too (every 5 messages): those of the scene window's
            # messages name no earlier scene, so they are left out before the candidates are picked and
            # take no place of an older scene's.
            window_start_id=prompt.window_start(turn.session, turn.chat.id),
        )
        if pending is not None and services.recall.query_vectors.ready(query):
            # As Memory Recall does (its source says why): with the query's vector known, the sign-bit
            # scan runs now, alone; a query still being embedded lets the other sources work meanwhile.
            pending.scanned.result()
        return True

    def expect(self, services: Services, session: Session, chat: Chat, text: str) -> None:
        """Embed the scene query the new message will make, while it is stored: the user's words since
        the character last spoke, which after the character's reply are the new message alone. Only
        for one character (a group's next speaker is chosen with the turn); when the guess misses (two
        messages in a row), the turn embeds its own query as before."""
        if not read_settings(chat.settings).advanced_memory_on(chat.mode):
            return
        characters = chat_characters(session, chat.id)
        if len(characters) != 1:
            return
        speaker, user = characters[0].name, user_name(session, chat)
        query = recalled.scene_query(
            [recalled.QueryMessage("user", user, text)], speaker, ignore=(speaker, user)
        )
        if query:
            embed_query_early(services, session, chat.id, query)

    def contribute(self, turn: Turn) -> Contribution | None:
        if not turn.settings.advanced_memory_on(turn.chat.mode):
            return None
        if self.name not in turn.scratch:
            self.begin(turn)
        planned = prompt.plan_prompt(turn, turn.scratch.pop(self.name, None))
        turn.scratch[self.name + ".left_out"] = planned.left_out
        return planned.contribution

    def history_filter(self, turn: Turn) -> Collection[int]:
        return turn.scratch.pop(self.name + ".left_out", ())

    def history_limit(self, session: Session, chat: Chat, settings: ChatSettings) -> int | None:
        if not settings.advanced_memory_on(chat.mode):
            return None
        return prompt.window_limit(session, chat)

    def before_reply(self, services: Services, chat_id: int) -> None:
        # Decide who sees new messages (turn-by-turn groups with the option on): the user's message
        # before the first reply, each reply before the next member answers.
        visibility.decide_new_messages(services, chat_id)

    def after_reply(self, services: Services, chat_id: int) -> None:
        schedule_processing(services, chat_id)
        # A new version or a Continue of a scene's last reply changed that scene: its recap follows.
        schedule_rewrites(services, chat_id)

    def settings_saved(self, services: Services, chat_id: int) -> None:
        # Character recollections turned on in a prepared chat are written at once, scene by scene.
        with Session(services.engine) as session:
            if recollections.on(session.get(Chat, chat_id)):
                schedule_processing(services, chat_id)

    def messages_changed(self, services: Services, chat_id: int) -> None:
        # An edit, hide, delete or another version picked: the recaps of the scenes it changed follow
        # once the changes settle (rewrites.py), without waiting for Fix.
        schedule_rewrites(services, chat_id)

    def jobs(self) -> Sequence[Job]:
        return (*JOBS, REWRITE_JOB)

    def runs(self) -> Sequence[RunKind]:
        return RUNS

    def chat_branched(self, session: Session, source: Chat, branch: Chat) -> None:
        service.copy_to_branch(session, source.id, branch.id)

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection | None:
        return settings_form.settings_section(session, chat, services)

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        return settings_form.read_settings_form(session, chat, form)

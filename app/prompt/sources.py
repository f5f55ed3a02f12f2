"""The seam every prompt source plugs into: what a source may provide, and the ordered registry.

A prompt source is anything that feeds the prompt: Memory Recall, lorebooks, the character's note,
the context note, time awareness, and the memory features still to come. Each is a `PromptSource`
registered in one place (`app/sources.py`), in the order the prompt is built; built-ins use these
hooks exactly as a new feature would (in the spirit of Datasette's hookspecs.py). A new source is
its own folder plus one registration line; the builder never grows a branch for it.

Hooks, each optional (the base class does nothing):
- `begin(turn)`: start slow work for this turn (e.g. embed the query on a thread) before any
  source contributes, so it overlaps with the others; a source that returns True contributes after
  the others (its blocks keep their place), which then do their work while its own runs.
- `contribute(turn)`: blocks and notes for this turn's prompt.
- `history_filter(turn)`: ids of history messages the source takes out of this prompt (e.g. those
  a summary stands in for); asked right after `contribute`. A source that fails takes none out.
- `history_limit(session, chat, settings)`: a source that manages the history window itself (Advanced
  Memory) asks for more of the newest messages to be read than the recent-message limit; it then
  takes out, through `history_filter`, those it does not send. The largest request wins.
- `expect(services, session, chat, text)`: the user's new message is about to be stored and a
  reply asked for: start work that needs only its text (e.g. embed it), before the turn is built.
- `after_reply(services, chat_id)`: react once a reply is written (schedule background work);
  the reply never waits for it.
- `messages_changed(services, chat_id)`: messages already written were edited, hidden, swiped or
  deleted (and committed): bring what was built from them in step (schedule background work).
- `chat_added(services, chat_id)`: a chat arrived with messages already written (an import or a
  branch, committed): build from them now rather than after its first reply.
- `chat_deleted(services, chat_id)`: the chat and its rows are gone (committed): remove what the
  source keeps outside the database for it (a file).
- `jobs()`: background jobs to register with the scheduler when the app starts.
- `runs()`: the kinds of runs the source keeps in the database, each resumed or closed at start
  (app/platform/jobs.py, `settle_runs`).
- `settings_section(session, chat, services)`: the source's part of Chat Settings.
- `read_settings_form(session, chat, form)`: read that part back from a submitted form.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session

from app.characters.models import Character
from app.chats.core.audience import Viewer
from app.chats.history import History
from app.chats.models import Chat
from app.chats.settings import ChatSettings
from app.connections.models import Connection
from app.personas.models import Persona
from app.platform.db import contained
from app.platform.jobs import Job, RunKind
from app.platform.services import Services
from app.prompt.core.arrangement import available_markers
from app.prompt.core.builder import DepthNote, DynamicBlock, Purpose

log = logging.getLogger(__name__)


@dataclass
class Turn:
    """What a source may read for one turn: plain values, plus the session to read more."""

    session: Session
    services: Services
    chat: Chat
    settings: ChatSettings
    characters: list[Character]
    speaker: Character
    persona: Persona | None
    user_name: str
    history: History
    before_id: int | None  # the reply being regenerated; None for the next reply
    context_size: int
    seed: int  # one per reply version: a swipe rolls anew, the same swipe rolls the same
    # The chat's macro variables, changed in place by macros in entries and prompts; the prompt
    # service keeps them only after a real reply.
    variables: dict
    # A real reply is being asked for (not Peek Prompt): a source may keep what its work leaves
    # (e.g. the lorebook scan's timed effects), in this session, committed with the turn.
    for_reply: bool = False
    # Per-source scratch space for this turn, e.g. what `begin` started for `contribute` to finish.
    scratch: dict[str, Any] = field(default_factory=dict)
    # What the sources that contributed before this one gave (a source contributing last, its `begin`
    # having said True, sees all the others': e.g. to count the tokens the rest of the prompt takes).
    contributed: list[Contribution] = field(default_factory=list)
    # Milliseconds each source took on this turn (its history_limit, begin, contribute and
    # history_filter together), by name: the price of a source, for Peek Prompt and the bench.
    timings: dict[str, float] = field(default_factory=dict)
    # The reply's connection (None: none set up), what the prompt is for, and tools this turn must
    # leave out (a reminder's own turn sets no new reminders).
    connection: Connection | None = None
    purpose: Purpose = "reply"
    excluded_tools: frozenset[str] = frozenset()
    # Set by the tools source in its `begin`, before any source contributes: the tools declared to the
    # model this turn ({name, description, parameters}), why each other tool is missing, and what the
    # `{…_tool}` macros and `{{if tool:…}}` blocks read (app/prompt/core/macros.py).
    tool_declarations: tuple[dict, ...] = ()
    tools_missing: dict[str, str] = field(default_factory=dict)
    tool_view: Any = None
    # In a group chat, whose eyes the prompt sees through (app/chats/core/audience.py): a source that
    # brings back old messages (recalled memories) leaves out what the speaker cannot see.
    viewer: Viewer | None = None


@dataclass(frozen=True)
class Contribution:
    """A source's part of one prompt. Fixed blocks join the cached system part (their kind places
    them, app/prompt/core/layout.py); dynamic blocks go just above the newest turns; depth notes sit
    among the recent messages. `note` tells Peek Prompt what the source did, or why not."""

    fixed: Sequence[DynamicBlock] = ()
    dynamic: Sequence[DynamicBlock] = ()
    depth_notes: Sequence[DepthNote] = ()
    note: str | None = None
    # Short lines shown under the reply this prompt is for (Advanced Memory's memory receipt).
    receipt: Sequence[str] = ()


@dataclass(frozen=True)
class SettingsSection:
    """A source's part of Chat Settings: a template (rendered inside the settings form, with
    `section` holding `context`) and the values it shows."""

    template: str
    context: Mapping[str, Any] = field(default_factory=dict)


class PromptSource:
    """Base class of a prompt source; override the hooks it uses."""

    name: str = ""  # short and unique: "recall", "lore"
    label: str = ""  # for people: "Memory Recall"
    # The layout kinds (app/prompt/core/layout.py) of the blocks and notes it contributes: each is a
    # marker a preset can place (app/prompt/core/arrangement.py).
    kinds: tuple[str, ...] = ()

    def begin(self, turn: Turn) -> bool | None:
        """Start slow work for this turn before any source contributes; True to contribute last."""
        return None

    def contribute(self, turn: Turn) -> Contribution | None:
        """Blocks and notes for this turn's prompt; None when the source has nothing to say."""
        return None

    def history_filter(self, turn: Turn) -> Collection[int]:
        """Ids of history messages this source takes out of this turn's prompt; called after `contribute`."""
        return ()

    def history_limit(self, session: Session, chat: Chat, settings: ChatSettings) -> int | None:
        """How many of the newest messages to read into the history when this source manages the
        window itself; None leaves the chat's recent-message limit."""
        return None

    def expect(self, services: Services, session: Session, chat: Chat, text: str) -> None:
        """The user's new message is about to be stored: start work needing only its text; return at once."""

    def before_reply(self, services: Services, chat_id: int) -> None:
        """A reply is about to be built, on its worker thread: settle what its prompt must know first
        (a group's who-sees-what decisions). May ask a model, within a bounded time; the reply waits."""

    def after_reply(self, services: Services, chat_id: int) -> None:
        """React once a reply is written (schedule background work); must return at once."""

    def messages_changed(self, services: Services, chat_id: int) -> None:
        """Messages were edited, hidden, swiped or deleted: re-sync what was built from them
        (schedule background work); must return at once."""

    def chat_added(self, services: Services, chat_id: int) -> None:
        """A chat arrived with its messages written (imported or branched): build from them
        (schedule background work); must return at once."""

    def chat_deleted(self, services: Services, chat_id: int) -> None:
        """The chat was deleted (committed): remove what the source keeps for it outside the database."""

    def settings_saved(self, services: Services, chat_id: int) -> None:
        """Chat Settings were saved (committed): start what they ask for (schedule background work);
        must return at once."""

    def jobs(self) -> Sequence[Job]:
        """Background jobs to register with the scheduler when the app starts."""
        return ()

    def runs(self) -> Sequence[RunKind]:
        """The kinds of runs this source keeps in the database, in the order they settle at start."""
        return ()

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection | None:
        """The source's part of Chat Settings, or None."""
        return None

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        """ChatSettings values read from the submitted Chat Settings form."""
        # Blank fields are left out, so the model's defaults apply; what lives elsewhere (attached
        # lorebooks) is saved here, in the request's transaction.
        return {}

    def export_chat_metadata(self, session: Session, chat: Chat) -> dict[str, Any]:
        """Keys this source adds to an exported chat file's chat_metadata."""
        return {}

    def import_chat_metadata(
        self, session: Session, chat: Chat, metadata: Mapping[str, Any], line_ids: Sequence[int]
    ) -> list[str]:
        """Read back an imported file's chat_metadata; `line_ids` are the new messages' ids in the file's
        order. Returns what the user should know; bad data is left out with a note, never raised."""
        return []

    def summary_count(self, session: Session, chat: Chat) -> int:
        """How many summaries this source keeps for the chat (an import says how many arrived)."""
        return 0

    def chat_branched(self, session: Session, source: Chat, branch: Chat) -> None:
        """`branch` got copies of `source`'s messages up to the branch point, in order: copy what
        belongs to them."""


@dataclass(frozen=True)
class Gathered:
    """Every source's contribution to one prompt, in registry order."""

    fixed: tuple[DynamicBlock, ...]
    dynamic: tuple[DynamicBlock, ...]
    depth_notes: tuple[DepthNote, ...]
    notes: tuple[str, ...]
    warnings: tuple[str, ...] = ()  # the sources that failed
    left_out: frozenset[int] = frozenset()  # history messages the sources took out
    receipt: tuple[str, ...] = ()  # lines for under the reply
    timings: tuple[tuple[str, float], ...] = ()  # (source name, ms) in registry order


class PromptSources:
    """The registry: the app's prompt sources in the order the prompt is built."""

    def __init__(self, sources: Sequence[PromptSource] = ()) -> None:
        self._sources: list[PromptSource] = []
        for source in sources:
            self.register(source)

    def register(self, source: PromptSource, *, before: str | None = None) -> None:
        """Add a source, last or just before the one named `before`."""
        if not source.name or any(s.name == source.name for s in self._sources):
            raise ValueError(f"A prompt source needs a unique name (got {source.name!r}).")
        at = next((i for i, s in enumerate(self._sources) if s.name == before), len(self._sources))
        self._sources.insert(at, source)

    def __iter__(self) -> Iterator[PromptSource]:
        return iter(list(self._sources))

    def markers(self) -> dict[str, str]:
        """Every part a preset can place: Sugo's own and each registered source's, with its label."""
        return available_markers(kind for source in self._sources for kind in source.kinds)

    def names(self) -> list[str]:
        return [s.name for s in self._sources]

    def gather(self, turn: Turn) -> Gathered:
        """Begin, then contribute, source by source; those whose work is running (their `begin`
        said True) contribute last, so the others' work overlaps with theirs. Contributions keep the
        registry's order. A source that fails is left out and named in the notes; it never fails the
        prompt."""
        failed: dict[str, str] = {}
        running: set[str] = set()
        spent = turn.timings
        for source in self:
            started = time.perf_counter()
            try:
                with contained(turn.session):
                    if source.begin(turn):
                        running.add(source.name)
            except Exception as err:
                failed[source.name] = _failure(source, turn, err)
            _add_ms(spent, source.name, started)
        parts: dict[str, Contribution | None] = {}
        taken: dict[str, Collection[int]] = {}
        for source in sorted(self, key=lambda s: s.name in running):  # stable: registry order otherwise
            if source.name in failed:
                continue
            # A source whose `begin` started work on a thread pays here for the wait on it, not for
            # the others' work it overlapped with.
            started = time.perf_counter()
            try:
                with contained(turn.session):
                    parts[source.name] = source.contribute(turn)
                    taken[source.name] = source.history_filter(turn)
                if parts[source.name] is not None:
                    turn.contributed.append(parts[source.name])
            except Exception as err:
                failed[source.name] = _failure(source, turn, err)
            _add_ms(spent, source.name, started)
        fixed: list[DynamicBlock] = []
        dynamic: list[DynamicBlock] = []
        depth_notes: list[DepthNote] = []
        notes: list[str] = []
        receipt: list[str] = []
        warnings: list[str] = []
        left_out: set[int] = set()
        for source in self:
            if source.name in failed:
                warnings.append(failed[source.name])
                continue
            left_out.update(taken.get(source.name, ()))
            part = parts.get(source.name)
            if part is None:
                continue
            fixed.extend(part.fixed)
            dynamic.extend(part.dynamic)
            depth_notes.extend(part.depth_notes)
            if part.note:
                notes.append(part.note)
            receipt.extend(part.receipt)
        return Gathered(
            tuple(fixed),
            tuple(dynamic),
            tuple(depth_notes),
            tuple(notes),
            tuple(warnings),
            frozenset(left_out),
            tuple(receipt),
            tuple((source.name, spent.get(source.name, 0.0)) for source in self),
        )

    def history_limit(
        self, session: Session, chat: Chat, settings: ChatSettings, *, timings: dict[str, float] | None = None
    ) -> int | None:
        """The largest number of newest messages a source asks to read (None: none asks). Each
        source's time is added to `timings` when given (the turn's price list)."""
        asked = []
        for source in self:
            started = time.perf_counter()
            try:
                with contained(session):
                    limit = source.history_limit(session, chat, settings)
            except Exception:  # the chat's own limit still gives a prompt
                log.exception("%s: history limit failed in chat %s", source.name, chat.id)
                continue
            finally:
                if timings is not None:
                    _add_ms(timings, source.name, started)
            if limit is not None:
                asked.append(limit)
        return max(asked, default=None)

    def export_chat_metadata(self, session: Session, chat: Chat) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        for source in self:
            meta.update(source.export_chat_metadata(session, chat))
        return meta

    def import_chat_metadata(
        self, session: Session, chat: Chat, metadata: Mapping[str, Any], line_ids: Sequence[int]
    ) -> list[str]:
        return [
            note for source in self for note in source.import_chat_metadata(session, chat, metadata, line_ids)
        ]

    def summary_count(self, session: Session, chat: Chat) -> int:
        return sum(source.summary_count(session, chat) for source in self)

    def chat_branched(self, session: Session, source: Chat, branch: Chat) -> None:
        for part in self:
            part.chat_branched(session, source, branch)

    def expect(self, services: Services, session: Session, chat: Chat, text: str) -> None:
        for source in self:
            try:
                source.expect(services, session, chat, text)
            except Exception:  # an early start is only a head start: the turn does the work anyway
                log.exception("%s: early work failed in chat %s", source.name, chat.id)

    def before_reply(self, services: Services, chat_id: int) -> None:
        for source in self:
            try:
                source.before_reply(services, chat_id)
            except Exception:  # the reply goes on with what is stored
                log.exception("%s: before-reply work failed in chat %s", source.name, chat_id)

    def after_reply(self, services: Services, chat_id: int) -> None:
        for source in self:
            try:
                source.after_reply(services, chat_id)
            except Exception:  # background work must never fail a reply that was written
                log.exception("%s: after-reply work failed in chat %s", source.name, chat_id)

    def messages_changed(self, services: Services, chat_id: int) -> None:
        for source in self:
            try:
                source.messages_changed(services, chat_id)
            except Exception:  # the change is saved; the sweep catches up with what failed here
                log.exception("%s: re-sync after a message change failed in chat %s", source.name, chat_id)

    def settings_saved(self, services: Services, chat_id: int) -> None:
        for source in self:
            try:
                source.settings_saved(services, chat_id)
            except Exception:  # the settings are saved; the sweep catches up with what failed here
                log.exception("%s: work after saving settings failed in chat %s", source.name, chat_id)

    def chat_added(self, services: Services, chat_id: int) -> None:
        for source in self:
            try:
                source.chat_added(services, chat_id)
            except Exception:  # the chat is saved; the sweep catches up with what failed here
                log.exception("%s: work for a new chat failed in chat %s", source.name, chat_id)

    def chat_deleted(self, services: Services, chat_id: int) -> None:
        for source in self:
            try:
                source.chat_deleted(services, chat_id)
            except Exception:  # the chat is deleted; what is left over is the start-up pass's to clear
                log.exception("%s: clearing up after deleted chat %s failed", source.name, chat_id)

    def jobs(self) -> list[Job]:
        return [job for source in self for job in source.jobs()]

    def runs(self) -> list[RunKind]:
        return [kind for source in self for kind in source.runs()]

    def settings_sections(self, session: Session, chat: Chat, services: Services) -> list[SettingsSection]:
        sections = (source.settings_section(session, chat, services) for source in self)
        return [s for s in sections if s is not None]

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for source in self:
            values.update(source.read_settings_form(session, chat, form))
        return values


def _add_ms(timings: dict[str, float], name: str, started: float) -> None:
    timings[name] = timings.get(name, 0.0) + (time.perf_counter() - started) * 1000


def _failure(source: PromptSource, turn: Turn, err: Exception) -> str:
    log.exception("prompt source %s failed in chat %s", source.name, turn.chat.id)
    # The error's own text can hold SQL or paths: the log has it, Peek Prompt names the source.
    return f"{source.label or source.name} failed and was left out of this prompt (the server log has the details)."

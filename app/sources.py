"""The prompt sources, registered in the order the prompt is built (app/prompt/sources.py says
what a source may provide). A new one is its own folder plus one line here."""

from __future__ import annotations

from app.expressions.source import ExpressionsSource
from app.game.source import GameSource
from app.generation.reply import start as start_reply
from app.lore.source import LoreSource
from app.memory.chat_notes.source import ChatNotesSource
from app.memory.days.source import DaySummarySource
from app.memory.recall.source import RecallSource
from app.memory.scenes.source import AdvancedMemorySource
from app.memory.summaries.source import SummarySource
from app.prompt.notes_and_time import CharacterNoteSource, ContextNoteSource, TimeAwarenessSource
from app.prompt.sources import PromptSources
from app.tools.documents.source import DocumentsSource
from app.tools.memories.source import LongTermMemorySource, ShortTermMemorySource
from app.tools.source import ToolsSource
from app.tools.tasks.source import TaskSource
from app.tools.user_info.source import ParticipantInfoSource


def default_sources() -> PromptSources:
    return PromptSources(
        [
            ToolsSource(),
            GameSource(),
            RecallSource(),
            LoreSource(),
            SummarySource(),
            DaySummarySource(),
            AdvancedMemorySource(),
            CharacterNoteSource(),
            ContextNoteSource(),
            TimeAwarenessSource(),
            ParticipantInfoSource(),
            DocumentsSource(),
            TaskSource(start_reply),
            LongTermMemorySource(),
            ShortTermMemorySource(),
            ChatNotesSource(),
            ExpressionsSource(),
        ]
    )

"""Every table, imported in one place for Alembic's target_metadata."""

from sqlmodel import SQLModel

from app.backgrounds.models import Background
from app.characters.models import Character
from app.chats.attachments import Attachment
from app.chats.models import Chat, ChatCharacter, Message
from app.connections.models import AppDefault, Connection
from app.images.models import Image
from app.lore.models import Lorebook, LorebookEntry, LorebookLink
from app.memory.chat_notes.models import ChatMemory
from app.memory.days.models import DayFailure, DaySummary, WeekSummary
from app.memory.recall.models import MemoryChunk, MemoryVector
from app.memory.recall.rebuild_runs import RebuildRun
from app.memory.scenes.models import MemoryActivity, Scene, SceneRecapPart, SceneRecollection, SceneState
from app.memory.summaries.models import SummaryEntry, SummaryJob, SummaryRun, SummaryTemplate
from app.personas.models import Persona
from app.platform import modelbase as _modelbase  # noqa: F401  (naming convention first)
from app.platform.claims import RunClaim
from app.platform.shared_secrets import SharedSecret
from app.presets.models import PromptPreset
from app.tools.mcp.models import McpServer
from app.tools.memories.models import LongTermMemory, ShortTermMemory
from app.tools.tasks.models import Task
from app.tools.user_info.models import UserAddress
from app.web.throttle import LoginFailure

metadata = SQLModel.metadata

__all__ = [
    "AppDefault",
    "Background",
    "Attachment",
    "Character",
    "Chat",
    "ChatMemory",
    "ChatCharacter",
    "Connection",
    "Image",
    "Lorebook",
    "LorebookEntry",
    "LorebookLink",
    "LoginFailure",
    "McpServer",
    "MemoryChunk",
    "MemoryVector",
    "Message",
    "Persona",
    "PromptPreset",
    "RebuildRun",
    "RunClaim",
    "SharedSecret",
    "SummaryEntry",
    "SummaryJob",
    "SummaryRun",
    "SummaryTemplate",
    "DayFailure",
    "DaySummary",
    "WeekSummary",
    "Scene",
    "SceneRecapPart",
    "SceneRecollection",
    "MemoryActivity",
    "SceneState",
    "UserAddress",
    "Task",
    "LongTermMemory",
    "ShortTermMemory",
    "metadata",
]

"""Advanced Memory Recall as a prompt source. So far its background part only: after each reply of a
chat with Advanced Memory on, the scene check and the recaps (jobs.py). Its prompt part (the window
restart at the ceiling, Recalled Scenes, the receipt) and its Chat Settings section come next (issue
14); until then the setting is not offered and nothing reaches the prompt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlmodel import Session

from app.chats.models import Chat
from app.jobs import Job
from app.memory.scenes import settings_form
from app.memory.scenes.jobs import JOBS, schedule_processing
from app.prompt.sources import PromptSource, SettingsSection
from app.services import Services


class AdvancedMemorySource(PromptSource):
    name = "scenes"
    label = "Advanced Memory"

    def after_reply(self, services: Services, chat_id: int) -> None:
        schedule_processing(services, chat_id)

    def jobs(self) -> Sequence[Job]:
        return JOBS

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection | None:
        return settings_form.settings_section(session, chat, services)

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        return settings_form.read_settings_form(session, chat, form)

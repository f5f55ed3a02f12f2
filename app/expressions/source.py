"""Expression images' part of the prompt and of Chat Settings (issue 29).

When the chat has expression images on and the speaker has some, a note at depth 0 asks the model to
end its reply with `[expression: name]`, naming the expressions the speaker has pictures for: asking
for one it has no picture of would change nothing on screen. The page and the history never show the
tag (app/characters/core/expressions.py says where it is read). Off, or without pictures, the source
adds nothing: the prompt is the same, byte for byte, as without it."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from app.characters.core.expressions import EXPRESSIONS
from app.chats.models import Chat
from app.platform import forms
from app.platform.services import Services
from app.prompt.core.builder import DepthNote
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn


def expression_request(names: list[str]) -> str:
    return (
        "End your reply with a tag naming the expression on your face at its end, on a line of its "
        f"own: [expression: name], where name is one of: {', '.join(names)}. The tag is never shown."
    )


class ExpressionsSource(PromptSource):
    name = "expressions"
    kinds = ("expression_request",)
    label = "Expression images"

    def contribute(self, turn: Turn) -> Contribution | None:
        if not turn.settings.expressions or turn.purpose != "reply":
            return None
        pictured = turn.speaker.expressions or {}
        names = [n for n in EXPRESSIONS if n in pictured]  # in SillyTavern's order, whatever the upload order
        if not names:
            return Contribution(note=f"{turn.speaker.name} has no expression images: no tag asked for.")
        note = DepthNote(
            expression_request(names), 0, "system", kind="expression_request", label="Expression tag request"
        )
        return Contribution(depth_notes=(note,))

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection:
        return SettingsSection("expressions/_settings.html")

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        return {"expressions": forms.checkbox(form, "expressions")}

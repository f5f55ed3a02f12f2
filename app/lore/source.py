"""Lorebooks as a prompt source: constant entries in the cached system part, keyword-matched ones
above the newest turns, at-depth ones among the recent messages; and Chat Settings → Lorebooks."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from app.chats import service as chats
from app.chats.history import message_count
from app.chats.models import Chat
from app.lore import service
from app.lore.prompting import lore_for_prompt, record_scan
from app.lore.report import limit_notice, skipped_notice
from app.platform import forms
from app.platform.modelbase import parse_row_id
from app.platform.services import Services
from app.prompt.core.tokens import count_tokens
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn


class LoreSource(PromptSource):
    name = "lore"
    kinds = (
        "lore_before_char",
        "constant_lore",
        "lore_before_examples",
        "lore_after_examples",
        "keyword_lore",
        "lore_at_depth",
    )
    label = "Lorebooks"

    def contribute(self, turn: Turn) -> Contribution | None:
        visible = [m for m in turn.history.messages if not m.hidden]
        outcome = lore_for_prompt(
            turn.session,
            turn.chat,
            compiled_books=turn.services.lorebooks,
            messages=[f"{m.name}: {m.content}" for m in visible],
            message_count=lambda: message_count(turn.session, turn.chat.id, turn.before_id),
            # In a group each member's own lorebook is scanned on its own turn (as SillyTavern does):
            # one character's secrets in its book are not another's prompt.
            character_ids=[turn.speaker.id],
            persona_id=turn.persona.id if turn.persona else None,
            char=turn.speaker.name,
            user=turn.user_name,
            seed=turn.seed,
            chat_budget=turn.settings.lore_token_budget,
            count=count_tokens,
            variables=turn.variables,
            tools=turn.tool_view,
        )
        if turn.for_reply:
            record_scan(turn.session, turn.chat, outcome)
        if outcome is None:
            return None
        return Contribution(
            fixed=outcome.fixed, dynamic=outcome.dynamic, depth_notes=outcome.depth_notes, note=outcome.note
        )

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection:
        snap = chat.lore_last_scan or {}
        # Per book: the entries sent, then those left out because another entry sends their text.
        by_book: dict[str, dict[str, list]] = {}
        for item in snap.get("active", []):
            by_book.setdefault(item["book"], {"active": [], "once": []})["active"].append(item)
        for item in snap.get("rejected", []):
            if item.get("same_as") is not None:
                by_book.setdefault(item["book"], {"active": [], "once": []})["once"].append(item)
        sent_once = sum(len(b["once"]) for b in by_book.values())
        persona = chats.chat_persona(session, chat)
        rows = service.chat_books(
            session,
            chat.id,
            [(c.id, c.name) for c in chats.chat_characters(session, chat.id)],
            (persona.id, persona.name) if persona else None,
        )
        return SettingsSection(
            "lore/_chat_settings.html",
            {
                "lorebooks": rows,
                "scan": snap,
                "active": by_book,
                "sent_once": sent_once,
                "notice": skipped_notice(snap) if snap else None,
                "limit_notice": limit_notice(snap) if snap else None,
            },
        )

    def read_settings_form(self, session: Session, chat: Chat, form: Any) -> dict[str, Any]:
        if forms.text(form, "lorebooks_shown"):
            ids = [
                i
                for v in form.getlist("lorebook_ids")
                if isinstance(v, str) and (i := parse_row_id(v)) is not None
            ]
            service.set_chat_books(session, chat.id, ids)
        budget = forms.optional_number(form, "lore_token_budget", int)
        return {} if budget is None else {"lore_token_budget": budget}

"""Chat Settings → Advanced Memory Recall (issue 14), for Roleplay chats: the manual's settings (the
switch, the context ceiling and the memory budget, the helper model, recalled scenes, the moving
context, the scene check interval) and the Prepare existing history panel.

    settings_section(session, chat, services) -> the section (None outside Roleplay)
    read_settings_form(session, chat, form)   -> the ChatSettings values, each checked with a sentence
    prepare_context(session, services, chat)  -> what the Prepare panel shows (routes.py polls it)

Decisions:
- A form without the section (`advanced_memory_shown` missing: a Conversation chat, an older page)
  keeps the stored values: Chat Settings saves the settings whole, so leaving them out would reset them.
- A bad value refuses the whole form with one sentence naming the field; nothing is saved.
- The budget must fit under the ceiling; changing the ceiling never changes the budget (the manual).
- Blank numbers are refused rather than read as the default: a field cleared by mistake should not
  silently put back 65,000.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlmodel import Session, func, select

from app.chats.models import SCENE_MODES, Chat
from app.chats.service import chat_characters, chat_connection
from app.chats.settings import read_settings
from app.connections.service import list_connections
from app.memory.scenes import prepare, recollections, rescans
from app.memory.scenes.continuity import updating
from app.memory.scenes.messages import has_readable_message, helper_config, helper_connection
from app.memory.scenes.models import Scene, SceneState
from app.platform import forms
from app.platform.core.errors import UserError
from app.platform.services import Services
from app.prompt.sources import SettingsSection

PANEL = "scenes/_prepare.html"

# name: (label, unit, lowest, highest); the limits are ChatSettings' own.
NUMBERS: dict[str, tuple[str, str, int, int]] = {
    "adv_max_context": ("Maximum allowed context before compression", "tokens", 1024, 10_000_000),
    "adv_budget": ("Summary and recall budget", "tokens", 64, 131_072),
    "adv_max_scenes": ("Maximum recalled scenes", "scenes", 0, 50),
    "adv_excerpt_min": ("Moving context minimum", "messages", 0, 50),
    "adv_excerpt_max": ("Moving context maximum", "messages", 0, 50),
    "adv_check_interval": ("Standalone scene check interval", "messages", 1, 100),
}
KEYS = (
    "advanced_memory",
    "adv_helper_connection_id",
    "adv_decide_visibility",
    "adv_recollections",
    "adv_decision",
    "adv_decision_connection_id",
    *NUMBERS,
)
MAX_DIGITS = 12  # longer than any allowed value: refused before int() reads it


def recommended_budget(max_context: int) -> int:
    """The manual's advice: at least 10% of the ceiling (never above the budget's own limit)."""
    return min(max(max_context // 10, NUMBERS["adv_budget"][2]), NUMBERS["adv_budget"][3])


def settings_section(session: Session, chat: Chat, services: Services) -> SettingsSection | None:
    """The section, for Roleplay and Game chats."""
    if chat.mode not in SCENE_MODES:
        return None
    s = read_settings(chat.settings)
    own = chat_connection(session, chat)
    state = session.get(SceneState, chat.id)
    return SettingsSection(
        "scenes/_settings.html",
        {
            "connections": list_connections(session),
            "default_connection": own,
            "recommended": recommended_budget(s.adv_max_context),
            "limits": NUMBERS,
            "prepare": prepare_context(session, services, chat),
            "continuity": {
                "updating": updating(services, chat.id),
                "reason": state.continuity_reason if state else "",
            },
            "rescan": rescans.rescan_context(session, services, chat),
            # Decide who sees new messages: turn-by-turn group chats only.
            "turn_group": chat.mode == "roleplay"
            and len(chat_characters(session, chat.id)) > 1
            and not s.group_merged,
            # Character recollections: (scenes done, written scenes) while the option is on.
            "recollections": recollections.progress(session, chat.id) if s.adv_recollections else None,
        },
    )


def prepare_context(session: Session, services: Services, chat: Chat) -> dict[str, Any]:
    """The Prepare existing history panel: the chat's newest run, the helper it calls (or why none can
    be called), whether there is anything to prepare, and the scenes so far by state."""
    problem = ""
    try:
        helper_config(session, services, chat)
    except UserError as err:
        problem = str(err)
    # The run before the counts: each read sees what is committed at that moment, and the run says
    # "done" only after its last recap is stored; counted first, a recap stored between the two reads
    # showed as "3 scenes, 2 recaps written" under a finished run, which the panel stops refreshing.
    run = prepare.latest_run(session, chat.id)
    counts = dict(
        session.exec(
            select(Scene.state, func.count()).where(Scene.chat_id == chat.id).group_by(Scene.state)
        ).all()
    )
    return {
        "chat": chat,
        "run": run,
        "working": prepare.working(services, chat.id),
        "helper": helper_connection(session, chat),
        "helper_problem": problem,
        "has_messages": has_readable_message(session, chat.id),
        "enabled": read_settings(chat.settings).advanced_memory,
        "scenes": sum(n for state, n in counts.items() if state != "deleted"),
        "written": counts.get("written", 0),
    }


def read_settings_form(session: Session, chat: Chat, form: Any) -> dict[str, Any]:
    """The section's values from the submitted form; a form without the section keeps the stored ones."""
    if not forms.text(form, "advanced_memory_shown"):
        stored = read_settings(chat.settings)
        return {key: getattr(stored, key) for key in KEYS}
    values: dict[str, Any] = {name: _number(form, name) for name in NUMBERS}
    check_values(values)
    values["advanced_memory"] = forms.checkbox(form, "advanced_memory")
    values["adv_helper_connection_id"] = _helper(session, form)
    values["adv_recollections"] = (
        forms.checkbox(form, "adv_recollections")
        if forms.text(form, "adv_recollections_shown")
        else read_settings(chat.settings).adv_recollections
    )
    values["adv_decision"] = forms.checkbox(form, "adv_decision")
    values["adv_decision_connection_id"] = _connection(session, form, "adv_decision_connection_id")
    if values["adv_decision"] and values["adv_decision_connection_id"] is None:
        raise UserError("Use Decision model: choose its Memory Decision connection, or turn it off.")
    values["adv_decide_visibility"] = (
        forms.checkbox(form, "adv_decide_visibility")
        if forms.text(form, "adv_decide_visibility_shown")
        else read_settings(chat.settings).adv_decide_visibility
    )
    return values


def check_values(values: Mapping[str, int]) -> None:
    """The rules between fields: the budget under the ceiling, the moving context's min under its max."""
    budget, ceiling = values["adv_budget"], values["adv_max_context"]
    if budget > ceiling:
        raise UserError(
            f"Summary and recall budget: {budget:,} tokens is more than the Maximum allowed context "
            f"before compression ({ceiling:,}). Lower the budget or raise the maximum."
        )
    low, high = values["adv_excerpt_min"], values["adv_excerpt_max"]
    if low > high:
        raise UserError(
            f"Moving context: the minimum ({low}) is more than the maximum ({high}) messages per excerpt."
        )


def _number(form: Any, name: str) -> int:
    label, unit, low, high = NUMBERS[name]
    raw = forms.text(form, name).strip()
    if len(raw) > MAX_DIGITS or not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        shown = f"“{raw[:MAX_DIGITS]}{'…' if len(raw) > MAX_DIGITS else ''}”" if raw else "Empty"
        raise UserError(f"{label}: {shown} is not a whole number of {unit} from {low:,} to {high:,}.")
    return int(raw)


def _helper(session: Session, form: Any) -> int | None:
    return _connection(session, form, "adv_helper_connection_id", "Helper model")


def _connection(
    session: Session, form: Any, name: str, label: str = "Memory Decision connection"
) -> int | None:
    raw = forms.text(form, name).strip()
    if not raw:
        return None
    if (
        not (raw.isascii() and raw.isdigit())
        or len(raw) > MAX_DIGITS
        or int(raw) not in {c.id for c in list_connections(session)}
    ):
        raise UserError(f"{label}: that connection no longer exists; choose another.")
    return int(raw)

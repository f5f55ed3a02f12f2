"""Summary Prompt templates, and the one every Roleplay chat uses (Chat Settings → Chat Summary).

Decisions:
- Templates and the choice are global: choosing one in any Roleplay chat changes the Summary Prompt
  of every Roleplay chat. The choice is one app-wide key (AppDefault "summary_template_id"): a
  template's id, "" for the Default, or DELETED once the chosen template was deleted.
- The built-in Default is not a row and cannot be edited or deleted: its text is the code's
  (prompts.ROLEPLAY_ENTRY_PROMPT), so a newer Sugo improves it; Duplicate it to change it.
- Names are unique ignoring case, and "Default" is taken by the built-in one.
- Deleting the chosen template puts every chat on the Default, and the panel says so until another is
  chosen. The key then says DELETED rather than keeping the id, which SQLite may give a new template.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import Session, select

from app.connections.models import AppDefault
from app.memory.summaries.core.prompts import ROLEPLAY_ENTRY_PROMPT
from app.memory.summaries.models import SummaryTemplate
from app.platform.core.errors import NotFound, UserError
from app.platform.core.names import refuse_control_characters
from app.platform.timeutil import utcnow

DEFAULT_NAME = "Default"
MAX_NAME = 100
MAX_TEXT = 20_000
MAX_TEMPLATES = 200
CHOSEN_KEY = "summary_template_id"
DELETED = "deleted"


@dataclass(frozen=True)
class ChosenPrompt:
    """The prompt summaries use: the template, or the Default (`missing` when the chosen one was
    deleted)."""

    template: SummaryTemplate | None
    missing: bool = False

    @property
    def text(self) -> str:
        return self.template.text if self.template is not None else ROLEPLAY_ENTRY_PROMPT

    @property
    def name(self) -> str:
        return self.template.name if self.template is not None else DEFAULT_NAME


def list_templates(session: Session) -> list[SummaryTemplate]:
    """The user's templates by name (the Default is not among them)."""
    return list(
        session.exec(
            select(SummaryTemplate).order_by(func.lower(SummaryTemplate.name), SummaryTemplate.id)
        ).all()
    )


def get_template(session: Session, template_id: int) -> SummaryTemplate:
    template = session.get(SummaryTemplate, template_id)
    if template is None:
        raise NotFound(f"Summary prompt template {template_id} does not exist (it may have been deleted).")
    return template


def chosen_prompt_default() -> ChosenPrompt:
    return ChosenPrompt(None)


def prompt_for(session: Session, template_id: int | None) -> ChosenPrompt:
    """Template `template_id` (None: the Default; one that no longer exists: the Default, `missing`)."""
    if template_id is None:
        return ChosenPrompt(None)
    template = session.get(SummaryTemplate, template_id)
    return ChosenPrompt(template, missing=template is None)


def chosen_value(session: Session) -> str:
    """The stored choice as it is kept: a template's id, "" (the Default) or DELETED."""
    row = session.get(AppDefault, CHOSEN_KEY)
    return row.value if row is not None else ""


def chosen_prompt(session: Session) -> ChosenPrompt:
    """The Summary Prompt every Roleplay chat uses now."""
    value = chosen_value(session)
    if value == DELETED:
        return ChosenPrompt(None, missing=True)
    return prompt_for(session, int(value) if value.isascii() and value.isdigit() else None)


def _store_choice(session: Session, value: str) -> None:
    row = session.get(AppDefault, CHOSEN_KEY) or AppDefault(key=CHOSEN_KEY)
    row.value = value
    session.add(row)
    session.flush()


def choose_template(session: Session, template_id: int | None) -> ChosenPrompt:
    """Make template `template_id` (None: the Default) the Summary Prompt of every Roleplay chat."""
    template = None if template_id is None else get_template(session, template_id)
    _store_choice(session, "" if template is None else str(template.id))
    return ChosenPrompt(template)


def _name(session: Session, name: str | None, *, current_id: int | None = None) -> str:
    name = " ".join(refuse_control_characters(name or "", "A template name").split())
    if not name:
        raise UserError("Give the template a name.")
    if len(name) > MAX_NAME:
        raise UserError(f"The template name is {len(name)} characters long; the limit is {MAX_NAME}.")
    if name.casefold() == DEFAULT_NAME.casefold():
        raise UserError(f"“{DEFAULT_NAME}” is the built-in template's name; choose another.")
    # Compared here, not in SQL: SQLite's lower() folds ASCII letters only, and there are at most MAX_TEMPLATES.
    clash = next((t for t in list_templates(session) if t.name.casefold() == name.casefold()), None)
    if clash is not None and clash.id != current_id:
        raise UserError(f"A template named “{clash.name}” already exists; choose another name.")
    return name


def _text(text: str | None) -> str:
    text = (text or "").strip()
    if not text:
        raise UserError("Write the template's prompt: it cannot be empty.")
    if len(text) > MAX_TEXT:
        raise UserError(f"The template's prompt is {len(text):,} characters long; the limit is {MAX_TEXT:,}.")
    return text


def create_template(session: Session, *, name: str | None, text: str | None) -> SummaryTemplate:
    name, text = _name(session, name), _text(text)
    count = session.connection().exec_driver_sql("SELECT count(*) FROM summary_template").scalar_one()
    if count >= MAX_TEMPLATES:
        raise UserError(
            f"There are already {MAX_TEMPLATES} summary prompt templates, the limit. Delete one first."
        )
    template = SummaryTemplate(name=name, text=text)
    session.add(template)
    session.flush()
    return template


def update_template(
    session: Session, template_id: int, *, name: str | None = None, text: str | None = None
) -> SummaryTemplate:
    """Rename it and/or change its prompt (None leaves a field as it is)."""
    template = get_template(session, template_id)
    if name is not None:
        template.name = _name(session, name, current_id=template.id)
    if text is not None:
        template.text = _text(text)
    template.updated_at = utcnow()
    session.add(template)
    session.flush()
    return template


def duplicate_template(session: Session, template_id: int | None) -> SummaryTemplate:
    """A copy named "<name> (copy)" ("(copy 2)", … when taken); None duplicates the Default."""
    source = (
        chosen_prompt_default() if template_id is None else ChosenPrompt(get_template(session, template_id))
    )
    name = copy_name(source.name, {t.name for t in list_templates(session)})
    return create_template(session, name=name, text=source.text)


def copy_name(name: str, taken: Collection[str]) -> str:
    """ "<name> (copy)", else "(copy 2)", "(copy 3)", … : the first free one (ignoring case), within
    MAX_NAME characters."""
    used = {t.casefold() for t in taken}
    base = name[: MAX_NAME - len(" (copy 999)")].rstrip()
    candidate, n = f"{base} (copy)", 2
    while candidate.casefold() in used:
        candidate, n = f"{base} (copy {n})", n + 1
    return candidate


def delete_template(session: Session, template_id: int) -> None:
    """Delete it; when it was the chosen one, every chat goes back to the Default (and is told so)."""
    session.delete(get_template(session, template_id))
    if chosen_value(session) == str(template_id):
        _store_choice(session, DELETED)
    session.flush()

"""Settings → Tools & Permissions: the permission switches (one per capability, each listing the tools
it gates, read from the registry), the round cap, Deliberate Tool Mode and its custom triggers."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field, field_validator
from sqlmodel import Session

from app.platform.core.errors import UserError
from app.tools.registry import PERMISSIONS, ToolRegistry
from app.tools.settings import ROUND_CAP_RANGE, ToolSettings, load_tool_settings, save_tool_settings

MAX_TRIGGERS_PER_FAMILY = 30
MAX_TRIGGER_CHARS = 60


class ToolSettingsIn(BaseModel):
    """What the page (or the API) changes; a field left out stays as it was."""

    permissions: dict[str, bool] | None = None
    round_cap: int | None = Field(default=None, ge=ROUND_CAP_RANGE[0], le=ROUND_CAP_RANGE[1])
    deliberate: bool | None = None
    custom_triggers: dict[str, list[str]] | None = None

    @field_validator("permissions")
    @classmethod
    def _known_permissions(cls, value: dict[str, bool] | None) -> dict[str, bool] | None:
        unknown = sorted(set(value or {}) - set(PERMISSIONS))
        if unknown:
            raise ValueError(f"unknown permission(s): {', '.join(unknown)}")
        return value

    @field_validator("custom_triggers")
    @classmethod
    def _tidy_triggers(cls, value: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        if value is None:
            return None
        tidy: dict[str, list[str]] = {}
        for family, phrases in value.items():
            kept = list(dict.fromkeys(" ".join(p.split()).lower() for p in phrases if p.strip()))
            if len(kept) > MAX_TRIGGERS_PER_FAMILY:
                raise ValueError(f"at most {MAX_TRIGGERS_PER_FAMILY} trigger phrases per tool family")
            if any(len(p) > MAX_TRIGGER_CHARS for p in kept):
                raise ValueError(f"a trigger phrase has at most {MAX_TRIGGER_CHARS} characters")
            if kept:
                tidy[family] = kept
        return tidy


@dataclass(frozen=True)
class PermissionRow:
    key: str
    label: str
    on: bool
    default: bool
    tools: tuple[str, ...]  # the tools this switch gates (their labels)


def permission_rows(registry: ToolRegistry, settings: ToolSettings) -> list[PermissionRow]:
    rows = []
    for key, (label, default) in PERMISSIONS.items():
        tools = tuple(t.label or t.name for t in registry if t.permission == key)
        rows.append(PermissionRow(key, label, settings.allowed(key), default, tools))
    return rows


def trigger_families(registry: ToolRegistry) -> list[str]:
    """The tool families a custom trigger phrase can name, in registry order."""
    return list(dict.fromkeys(t.family for t in registry if t.family))


def update_tool_settings(session: Session, data: ToolSettingsIn, registry: ToolRegistry) -> ToolSettings:
    settings = load_tool_settings(session)
    if data.permissions is not None:
        settings.permissions = {**settings.permissions, **data.permissions}
    if data.round_cap is not None:
        settings.round_cap = data.round_cap
    if data.deliberate is not None:
        settings.deliberate = data.deliberate
    if data.custom_triggers is not None:
        families = set(trigger_families(registry))
        unknown = sorted(set(data.custom_triggers) - families)
        if unknown:
            raise UserError(
                f"No tool family is named {', '.join(unknown)}; the families are {', '.join(sorted(families))}."
            )
        settings.custom_triggers = data.custom_triggers
    save_tool_settings(session, settings)
    session.commit()
    return settings

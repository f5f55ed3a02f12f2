"""JSON twins of Settings → Tools & Permissions."""

from __future__ import annotations

from fastapi import APIRouter

from app.tools.permissions.service import ToolSettingsIn, permission_rows, update_tool_settings
from app.tools.settings import load_tool_settings
from app.web.deps import ServicesDep, SessionDep

router = APIRouter(prefix="/api/settings/tools", tags=["tools"])


def _read(services, settings) -> dict:
    return {
        "permissions": {row.key: row.on for row in permission_rows(services.tools, settings)},
        "round_cap": settings.round_cap,
        "deliberate": settings.deliberate,
        "custom_triggers": settings.custom_triggers,
        "tools": [
            {"name": t.name, "label": t.label, "permission": t.permission, "family": t.family}
            for t in services.tools
        ],
    }


@router.get("")
def read_tool_settings(session: SessionDep, services: ServicesDep) -> dict:
    """The permission switches, the round cap and Deliberate Tool Mode (secrets are never included)."""
    return _read(services, load_tool_settings(session))


@router.post("")
def change_tool_settings(data: ToolSettingsIn, session: SessionDep, services: ServicesDep) -> dict:
    """Change the fields given; the others stay."""
    return _read(services, update_tool_settings(session, data, services.tools))

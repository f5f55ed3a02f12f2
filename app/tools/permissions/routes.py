"""Settings → Tools & Permissions (the page; its JSON twin is api.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError

from app.platform import forms
from app.platform.core.errors import UserError
from app.tools.permissions.service import (
    ToolSettingsIn,
    permission_rows,
    trigger_families,
    update_tool_settings,
)
from app.tools.registry import PERMISSIONS
from app.tools.settings import ROUND_CAP_RANGE, load_tool_settings
from app.web.deps import ServicesDep, SessionDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)


def _ctx(session, services, **extra) -> dict:
    settings = load_tool_settings(session)
    return {
        "settings": settings,
        "rows": permission_rows(services.tools, settings),
        "families": trigger_families(services.tools),
        "round_cap_range": ROUND_CAP_RANGE,
        **extra,
    }


@router.get("/settings")
def settings_home() -> RedirectResponse:
    return RedirectResponse("/settings/tools", status_code=303)


@router.get("/settings/tools")
def tool_settings_page(request: Request, session: SessionDep, services: ServicesDep) -> HTMLResponse:
    return render(request, "tools/settings.html", _ctx(session, services))


@router.post("/settings/tools")
async def save_tool_settings_page(
    request: Request, session: SessionDep, services: ServicesDep, hx: HxRequest
) -> HTMLResponse:
    form = await request.form()
    round_cap = forms.optional_number(form, "round_cap", int)
    low, high = ROUND_CAP_RANGE
    if round_cap is not None and not low <= round_cap <= high:
        raise UserError(f"Tool rounds per reply must be between {low} and {high} (got {round_cap}).")
    try:
        data = ToolSettingsIn(
            permissions={key: forms.checkbox(form, f"perm_{key}") for key in PERMISSIONS},
            round_cap=round_cap,
            deliberate=forms.checkbox(form, "deliberate"),
            custom_triggers={
                family: forms.text(form, f"triggers_{family}").splitlines()
                for family in trigger_families(services.tools)
            },
        )
    except ValidationError as err:
        raise forms.invalid(err) from err
    try:
        update_tool_settings(session, data, services.tools)
    except UserError:
        session.rollback()
        raise
    ctx = _ctx(session, services, saved=True)
    if hx:
        return render_blocks(request, "tools/settings.html", ctx, ["settings_form"])
    return render(request, "tools/settings.html", ctx)

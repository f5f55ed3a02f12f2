"""Settings → MCP Servers: the list (saved data only), add, Discover now, enable/disable, remove with a
confirmation step. Each row is its own fragment (templates/tools/mcp_row.html), so every answer lands
where the user clicked."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from app.platform import forms
from app.platform.timeutil import utcnow
from app.tools.mcp import service
from app.tools.mcp.core.rules import SERVER_TYPES
from app.web.deps import FormDep, KeyBoxDep, ServicesDep, SessionDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)
PAGE = "tools/mcp.html"
ROW = "tools/mcp_row.html"


def _page_context(session, **extra) -> dict:
    return {
        "servers": [service.to_read(s) for s in service.list_servers(session)],
        "server_types": SERVER_TYPES,
        "now": utcnow(),
        "discovered_line": service.discovered_line,
        **extra,
    }


def _row(request: Request, session: Session, server: service.McpServerRead, **extra) -> HTMLResponse:
    """The row for HTMX; a plain request (a link opened in a new tab, no script) gets the whole page,
    read on the request's session (a second connection of the pool, taken while the request holds
    one, is what starves the pool under a crowd of requests)."""
    if request.headers.get("HX-Request") != "true":
        return render(request, PAGE, _page_context(session))
    ctx = {"s": server, "now": utcnow(), "discovered_line": service.discovered_line, **extra}
    return render(request, ROW, ctx)


@router.get("/settings/mcp")
def show_mcp_servers(request: Request, session: SessionDep) -> HTMLResponse:
    """The MCP servers, as saved (no server is contacted)."""
    return render(request, PAGE, _page_context(session))


@router.post("/settings/mcp")
def add_mcp_server_page(
    request: Request, form: FormDep, session: SessionDep, keybox: KeyBoxDep, hx: HxRequest
) -> HTMLResponse:
    """Add a server; the form comes back emptied with a line saying what was added, and the list with it."""
    data = forms.parse(
        service.McpServerIn,
        name=forms.text(form, "name"),
        url=forms.text(form, "url"),
        token=forms.text(form, "token"),
        server_type=forms.text(form, "server_type", "general"),
    )
    server = service.add_server(session, keybox, data)
    ctx = _page_context(session, added=server.name)
    if not hx:
        return render(request, PAGE, ctx)
    return render_blocks(request, PAGE, ctx, ("mcp_add",), oob=("mcp_servers",))


@router.get("/settings/mcp/{server_id}")
def show_mcp_server_row(server_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """One server's row (after "Keep it")."""
    return _row(request, session, service.to_read(service.get_server(session, server_id)))


@router.get("/settings/mcp/{server_id}/discovering")
def start_discovery_row(server_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The row saying the server is being asked; it posts the discovery itself as it lands."""
    return _row(request, session, service.to_read(service.get_server(session, server_id)), discovering=True)


@router.post("/settings/mcp/{server_id}/discover")
async def discover_mcp_server_page(server_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Ask the server for its tools now; the row comes back with what was found or why not."""
    outcome = await service.discover(services, server_id)
    with Session(services.engine) as session:
        return _row(
            request, session, service.to_read(service.get_server(session, server_id)), outcome=outcome
        )


@router.post("/settings/mcp/{server_id}/enable")
def enable_mcp_server_page(server_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Let characters use this server's tools again."""
    return _row(request, session, service.to_read(service.set_enabled(session, server_id, True)))


@router.post("/settings/mcp/{server_id}/disable")
def disable_mcp_server_page(server_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Keep the server but offer none of its tools."""
    return _row(request, session, service.to_read(service.set_enabled(session, server_id, False)))


@router.get("/settings/mcp/{server_id}/remove")
def confirm_remove_row(server_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The row asking to confirm the removal."""
    return _row(
        request, session, service.to_read(service.get_server(session, server_id)), confirm_remove=True
    )


@router.post("/settings/mcp/{server_id}/delete")
def remove_mcp_server_page(server_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Remove the server (after the confirmation step); its row becomes a line saying so."""
    name = service.get_server(session, server_id).name
    service.remove_server(session, server_id)
    if request.headers.get("HX-Request") != "true":
        return render(request, PAGE, _page_context(session))
    return render(request, ROW, {"removed": name, "removed_id": server_id})

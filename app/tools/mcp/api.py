"""The JSON twins of Settings → MCP Servers (the same service calls). Tokens are never returned."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel
from sqlmodel import Session

from app.tools.mcp import service
from app.web.deps import KeyBoxDep, ServicesDep, SessionDep

router = APIRouter(prefix="/api/mcp-servers", tags=["mcp servers"])


class DiscoveryOut(BaseModel):
    ok: bool
    message: str
    server: service.McpServerRead


@router.get("", response_model=list[service.McpServerRead])
def list_mcp_servers(session: SessionDep) -> list[service.McpServerRead]:
    """The MCP servers as saved (no server is contacted); the token only as `has_token`."""
    return [service.to_read(s) for s in service.list_servers(session)]


@router.post("", response_model=service.McpServerRead, status_code=201)
def add_mcp_server(
    data: service.McpServerIn, session: SessionDep, keybox: KeyBoxDep
) -> service.McpServerRead:
    """Add a server (at most 20); nothing is contacted until a discovery."""
    return service.to_read(service.add_server(session, keybox, data))


@router.get("/{server_id}", response_model=service.McpServerRead)
def show_mcp_server(server_id: int, session: SessionDep) -> service.McpServerRead:
    """One server, as saved."""
    return service.to_read(service.get_server(session, server_id))


@router.post("/{server_id}/discover", response_model=DiscoveryOut)
async def discover_mcp_server(server_id: int, services: ServicesDep) -> DiscoveryOut:
    """Ask the server for its tools now (15 s at most); a failure keeps the last snapshot."""
    outcome = await service.discover(services, server_id)
    with Session(services.engine) as session:
        server = service.to_read(service.get_server(session, server_id))
    return DiscoveryOut(ok=outcome.ok, message=outcome.message, server=server)


@router.post("/{server_id}/enable", response_model=service.McpServerRead)
def enable_mcp_server(server_id: int, session: SessionDep) -> service.McpServerRead:
    """Offer this server's tools to characters."""
    return service.to_read(service.set_enabled(session, server_id, True))


@router.post("/{server_id}/disable", response_model=service.McpServerRead)
def disable_mcp_server(server_id: int, session: SessionDep) -> service.McpServerRead:
    """Keep the server but offer none of its tools."""
    return service.to_read(service.set_enabled(session, server_id, False))


@router.delete("/{server_id}", status_code=204)
def remove_mcp_server(server_id: int, session: SessionDep) -> None:
    """Forget the server, its token and its tools."""
    service.remove_server(session, server_id)

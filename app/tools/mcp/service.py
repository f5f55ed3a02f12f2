"""MCP servers: add, enable, disable, remove; discover a server's tools; call one.

Decisions:
- Adding saves and contacts nothing: the row says "Discovery unknown" until Discover now (the page and
  the API only ever read saved data; only Discover now and a tool call reach the server).
- A discovery that fails keeps the last snapshot (the tools stay usable if the server comes back) and
  records the error; one that succeeds replaces the snapshot and clears the error.
- Network waits hold no database session: discover reads the row in one short session, asks the
  server, and writes the outcome in another (a SQLite write lock held for 15 s would stall Sugo).
- Limits: DISCOVERY_TIMEOUT_S (15 s) for connect + list, CALL_TIMEOUT_S (30 s) for connect + call +
  close; module constants a test may lower, as the callers pass them through.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import func
from sqlmodel import Session, select

from app.platform.core.errors import NotFound, UserError
from app.platform.timeutil import as_utc, utcnow
from app.tools.mcp import connect
from app.tools.mcp.core import rules
from app.tools.mcp.models import McpServer
from app.tools.registry import MAX_RESULT_CHARS, ToolError

log = logging.getLogger(__name__)

DISCOVERY_TIMEOUT_S = 15.0
CALL_TIMEOUT_S = 30.0


class McpServerIn(BaseModel):
    name: str = Field(max_length=rules.MAX_NAME_CHARS, description="Letters, digits and hyphens; unique.")
    url: str = Field(max_length=rules.MAX_URL_CHARS, description="The Streamable HTTP endpoint.")
    token: str = Field(
        default="",
        max_length=rules.MAX_TOKEN_CHARS,
        description="Sent as Authorization: Bearer; never shown.",
    )
    server_type: str = Field(default="general", description='"general", "web_search" or "url_fetch"')


class McpToolRead(BaseModel):
    name: str
    description: str


class McpServerRead(BaseModel):
    """A server as pages and the API show it: the token only as `has_token`."""

    id: int
    name: str
    url: str
    has_token: bool
    server_type: str
    type_label: str
    enabled: bool
    discovery: str  # "unknown" | "none" | "tools"
    tools: list[McpToolRead] | None
    discovered_at: datetime | None
    last_error: str | None


def to_read(server: McpServer) -> McpServerRead:
    tools = server.discovered_tools
    return McpServerRead(
        id=server.id or 0,
        name=server.name,
        url=server.url,
        has_token=bool(server.token_sealed),
        server_type=server.server_type,
        type_label=rules.SERVER_TYPES.get(server.server_type, server.server_type),
        enabled=server.enabled,
        discovery="unknown" if tools is None else ("tools" if tools else "none"),
        tools=None
        if tools is None
        else [McpToolRead(name=t.get("name", ""), description=t.get("description", "")) for t in tools],
        discovered_at=as_utc(server.discovered_at) if server.discovered_at else None,
        last_error=server.last_error,
    )


def list_servers(session: Session) -> list[McpServer]:
    return list(session.exec(select(McpServer).order_by(func.lower(McpServer.name))).all())


def get_server(session: Session, server_id: int) -> McpServer:
    server = session.get(McpServer, server_id)
    if server is None:
        raise NotFound("That MCP server is not there (removed?).")
    return server


def add_server(session: Session, keybox, data: McpServerIn) -> McpServer:
    """Save a new server (its token sealed); nothing is contacted."""
    name = rules.check_name(data.name)
    url = rules.check_url_form(data.url)
    token = rules.check_token(data.token)
    server_type = rules.check_type(data.server_type)
    count = session.exec(select(func.count()).select_from(McpServer)).one()
    if count >= rules.MAX_SERVERS:
        raise UserError(f"Sugo keeps at most {rules.MAX_SERVERS} MCP servers; remove one first.")
    clash = session.exec(select(McpServer).where(func.lower(McpServer.name) == name.lower())).first()
    if clash is not None:
        raise UserError(f"There is already an MCP server named {clash.name}; choose another name.")
    server = McpServer(
        name=name,
        url=url,
        token_sealed=keybox.seal(token) if token else None,
        server_type=server_type,
    )
    session.add(server)
    session.flush()
    return server


def set_enabled(session: Session, server_id: int, enabled: bool) -> McpServer:
    server = get_server(session, server_id)
    server.enabled = enabled
    server.updated_at = utcnow()
    session.add(server)
    session.flush()
    return server


def remove_server(session: Session, server_id: int) -> None:
    """Forget a server: its token and its tools go with it."""
    session.delete(get_server(session, server_id))
    session.flush()


def _endpoint(server: McpServer, keybox) -> connect.Endpoint:
    token = keybox.unseal(server.token_sealed) if server.token_sealed else None
    return connect.Endpoint(name=server.name, url=server.url, token=token)


@dataclass(frozen=True)
class DiscoveryOutcome:
    ok: bool
    message: str  # for the row and the API: what was found, or why not


async def discover(services, server_id: int, *, timeout_s: float | None = None) -> DiscoveryOutcome:
    """Ask the server for its tools and save what is kept (or the error, keeping the last snapshot)."""
    with Session(services.engine) as session:
        server = get_server(session, server_id)
        endpoint = _endpoint(server, services.keybox)
    limit = DISCOVERY_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        listed = await connect.list_tools(endpoint, timeout_s=limit, allow=services.settings.fetch_allow)
    except connect.McpFailure as err:
        message = rules.short_error(str(err))
        _save(services, server_id, error=message)
        return DiscoveryOutcome(False, message)
    snapshot = rules.keep_tools((t.name, t.description, t.input_schema) for t in listed)
    _save(services, server_id, tools=[t.as_json() for t in snapshot.tools])
    found = len(snapshot.tools)
    message = f"Found {found} tool{'s' if found != 1 else ''}." if found else "The server offers no tools."
    if snapshot.left_out:
        message += f" Left out: {rules.short_error(', '.join(snapshot.left_out))}."
    return DiscoveryOutcome(True, message)


def _save(
    services, server_id: int, *, tools: list[dict[str, Any]] | None = None, error: str | None = None
) -> None:
    with Session(services.engine) as session:
        server = session.get(McpServer, server_id)
        if server is None:  # removed while its discovery ran
            return
        now = utcnow()
        if error is None:
            server.discovered_tools = tools
            server.discovered_at = now
            server.last_error = None
        else:
            server.last_error = error
        server.updated_at = now
        session.add(server)
        session.commit()


@dataclass(frozen=True)
class CallTarget:
    """What a registry tool needs to reach its server: read once when the turn's tools are built."""

    server_id: int
    server_name: str
    url: str
    token_sealed: str | None
    tool_name: str


async def call(
    target: CallTarget,
    arguments: dict[str, Any],
    *,
    keybox,
    allow: Collection[str],
    timeout_s: float | None = None,
) -> str:
    """The tool's text content (text parts joined), cut at MAX_RESULT_CHARS. A server error, its
    isError answer, a refused address or the time limit raise ToolError with a sentence."""
    token = keybox.unseal(target.token_sealed) if target.token_sealed else None
    endpoint = connect.Endpoint(name=target.server_name, url=target.url, token=token)
    limit = CALL_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        result = await connect.call_tool(endpoint, target.tool_name, arguments, timeout_s=limit, allow=allow)
    except connect.McpFailure as err:
        raise ToolError(rules.short_error(str(err))) from None
    parts = [
        rules.Part(kind=getattr(p, "type", "content"), text=getattr(p, "text", "") or "")
        for p in result.content
    ]
    text = rules.result_text(parts, result.structured_content, limit=MAX_RESULT_CHARS)
    if result.is_error:
        raise ToolError(f"The MCP server {target.server_name} answered with an error: {text}")
    return text


def discovered_line(server: McpServerRead, now: datetime) -> str:
    """ "Tools: a, b, c — discovered 2 minutes ago", "None discovered" or "Discovery unknown"."""
    if server.discovery == "unknown":
        return "Discovery unknown"
    when = f"discovered {rules.ago(server.discovered_at, now)}" if server.discovered_at else "discovered"
    if server.discovery == "none":
        return f"None discovered — {when}"
    return f"Tools: {', '.join(t.name for t in server.tools or [])} — {when}"

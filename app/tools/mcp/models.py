"""The MCP servers the user added (Settings → MCP Servers)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column
from sqlmodel import Field, SQLModel

from app.platform.timeutil import utcnow


class McpServer(SQLModel, table=True):
    """One MCP server reached over Streamable HTTP. The token is sealed with the key box like a
    connection's API key and never sent back. `discovered_tools` is the last successful discovery's
    snapshot ([{name, description, input_schema}]), or None while no discovery has succeeded
    ("Discovery unknown"); a failed discovery keeps it and records `last_error`."""

    __tablename__ = "mcp_server"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)  # letters, digits, hyphens; unique without regard to case (service)
    url: str
    token_sealed: str | None = None
    server_type: str = "general"  # "general" | "web_search" | "url_fetch"
    enabled: bool = True
    discovered_tools: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    discovered_at: datetime | None = None
    last_error: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

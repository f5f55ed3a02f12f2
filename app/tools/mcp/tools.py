"""The enabled MCP servers' discovered tools as registry `Tool`s, built from saved data only (no server
is contacted to build them; a call contacts its server).

Each tool is `mcp_<server>__<tool>` (app/tools/mcp/core/rules.py), its source "mcp:<server>", its
family "mcp" for a General purpose server and "web_search"/"url_fetch" for a server that takes the
place of that built-in, no permission switch (adding and enabling the server is the user's consent).
"""

from __future__ import annotations

import copy
import logging
from typing import Any, ClassVar

from jsonschema import exceptions as schema_errors
from jsonschema import validators
from pydantic import BaseModel, ConfigDict, model_validator
from sqlmodel import Session, select

from app.tools.mcp import service
from app.tools.mcp.core import rules
from app.tools.mcp.models import McpServer
from app.tools.registry import Tool, ToolContext, ToolResult

log = logging.getLogger(__name__)

# The loop's own cut for one call: the service's limit plus a little for closing the connection, so
# the service's clearer "did not answer within 30 s" is what the model normally reads.
CLOSE_GRACE_S = 2.0


class ServerSchemaArgs(BaseModel):
    """Arguments for an MCP tool, described and checked by the server's own JSON schema.

    Why not a pydantic model built from the schema: registry `Tool.args` must be a pydantic model
    class (its JSON schema is what providers are sent, its validation what checks the model's
    arguments), but a server's schema can use any JSON Schema keyword (oneOf, patternProperties,
    $defs/$ref, formats…) that a generated model would drop or mistranslate. So a subclass per tool
    returns the server's schema as is from `model_json_schema()` and validates with `jsonschema`
    against that same schema; the checked arguments are kept as extra fields and sent on unchanged
    (`model_dump()`)."""

    model_config = ConfigDict(extra="allow")
    server_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    _validator: ClassVar[Any] = None

    @model_validator(mode="before")
    @classmethod
    def _check_against_server_schema(cls, data: Any) -> Any:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ValueError("the arguments must be a JSON object")
        try:
            error = schema_errors.best_match(cls._validator.iter_errors(data))
        except Exception:  # noqa: BLE001  a schema jsonschema cannot apply (an unresolvable $ref…)
            # The server checks what it gets; refusing here would make the tool uncallable.
            log.warning("an MCP tool's argument schema could not be applied; the arguments go unchecked")
            return data
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise ValueError(f"{where + ': ' if where else ''}{error.message}"[:500])
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(cls.server_schema)


def args_model(function_name: str, schema: dict[str, Any]) -> type[ServerSchemaArgs]:
    """A ServerSchemaArgs subclass for one tool. A schema the validator cannot read accepts any object
    (the server still checks what it gets)."""
    try:
        validator_class = validators.validator_for(schema)
        validator_class.check_schema(schema)
        validator = validator_class(schema)
    except (schema_errors.SchemaError, TypeError):
        validator = validators.Draft202012Validator({"type": "object"})
    return type(
        f"Args_{function_name}",
        (ServerSchemaArgs,),
        {"server_schema": copy.deepcopy(schema), "_validator": validator, "__module__": __name__},
    )


def _handler(target: service.CallTarget, timeout_s: float):
    async def run(ctx: ToolContext, args: ServerSchemaArgs) -> ToolResult:
        text = await service.call(
            target,
            args.model_dump(),
            keybox=ctx.services.keybox,
            allow=ctx.services.settings.fetch_allow,
            timeout_s=timeout_s,
        )
        return ToolResult(text=text, notice=f"Used {target.tool_name} on MCP server {target.server_name}")

    return run


def mcp_tools(session: Session, services: Any, *, timeout_s: float | None = None) -> list[Tool]:
    """One Tool per discovered tool of each enabled server, its name unique among them and the built-ins
    (`services.tools`). `timeout_s`: the call limit (CALL_TIMEOUT_S unless a test lowers it)."""
    limit = service.CALL_TIMEOUT_S if timeout_s is None else timeout_s
    servers = session.exec(select(McpServer).where(McpServer.enabled == True).order_by(McpServer.id)).all()  # noqa: E712
    taken: set[str] = {tool.name for tool in services.tools}
    tools: list[Tool] = []
    for server in servers:
        family = rules.FAMILY_OF_TYPE.get(server.server_type, "mcp")
        for found in server.discovered_tools or []:
            tool_name = str(found.get("name", ""))
            schema = found.get("input_schema")
            if not tool_name or not isinstance(schema, dict):
                continue
            function_name = rules.tool_function_name(server.name, tool_name, taken)
            target = service.CallTarget(
                server_id=server.id or 0,
                server_name=server.name,
                url=server.url,
                token_sealed=server.token_sealed,
                tool_name=tool_name,
            )
            description = str(found.get("description") or "").strip()
            tools.append(
                Tool(
                    name=function_name,
                    description=f"[MCP server {server.name}] {description or tool_name}",
                    args=args_model(function_name, schema),
                    run=_handler(target, limit),
                    permission=None,
                    macro=None,
                    family=family,
                    label=f"{tool_name} ({server.name})",
                    timeout_s=limit + CLOSE_GRACE_S,
                    source=f"mcp:{server.name}",
                )
            )
    return tools

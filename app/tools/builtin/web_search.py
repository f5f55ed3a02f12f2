"""web_search(query, category): one tool over the engine chain (app/tools/web/engines.py): Brave with
an API key, a SearXNG the owner runs, DuckDuckGo without a key; the first that gives results wins.
Results: title, URL and snippet, at most 10. When every engine fails, the model is told why each did."""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session

from app.tools.registry import Tool, ToolContext, ToolError, ToolResult
from app.tools.web.core.hits import format_hits
from app.tools.web.engines import ENGINE_TIMEOUT_S, SearchFailed, search_chain
from app.tools.web.service import engine_setup

MAX_QUERY_CHARS = 400


class WebSearchArgs(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to search the web for")
    category: Literal["general", "news", "images", "videos"] = Field(
        "general", description="general (default), news, images or videos"
    )


def _setup(ctx: ToolContext):
    with Session(ctx.services.engine) as session:
        return engine_setup(session, ctx.services)


async def search_web(ctx: ToolContext, args: WebSearchArgs) -> ToolResult:
    setup = await asyncio.to_thread(_setup, ctx)
    try:
        outcome = await search_chain(args.query, args.category, setup)
    except SearchFailed as err:
        raise ToolError(str(err)) from None
    return ToolResult(
        text=format_hits(args.query, outcome.engine, outcome.hits, outcome.failures),
        notice=f"Searched the web ({outcome.engine}) for “{args.query[:80]}”",
    )


TOOLS = [
    Tool(
        name="web_search",
        description=(
            "Search the web. Returns up to 10 results, each a title, a URL and a snippet; "
            "read a result in full with the page-reading tool when it is offered."
        ),
        args=WebSearchArgs,
        run=search_web,
        permission="web_search",
        macro="web_search_tool",
        family="web_search",
        label="Search the web",
        # Three engines, each cut at ENGINE_TIMEOUT_S, plus a little for the settings read.
        timeout_s=3 * (ENGINE_TIMEOUT_S + 2) + 2,
    )
]

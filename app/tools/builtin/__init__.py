"""The built-in tools, one module each; `builtin_tools()` is the list the registry starts from."""

from __future__ import annotations

from app.tools.builtin import (
    capabilities,
    documents,
    fetch_url,
    memories,
    messages,
    tasks,
    user_info,
    web_search,
)
from app.tools.registry import Tool


def builtin_tools() -> list[Tool]:
    # Each module exposes TOOLS (a list of Tool); adding a tool is one line here.
    modules: list = [capabilities, memories, tasks, documents, messages, user_info, web_search, fetch_url]
    return [tool for module in modules for tool in module.TOOLS]

"""The built-in tools, one module each; `builtin_tools()` is the list the registry starts from."""

from __future__ import annotations

from app.tools.builtin import memories
from app.tools.registry import Tool


def builtin_tools() -> list[Tool]:
    # Each module exposes TOOLS (a list of Tool); adding a tool is one line here.
    modules: list = [memories]
    return [tool for module in modules for tool in module.TOOLS]

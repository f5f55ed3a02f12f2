"""MCP servers' pure rules (app/tools/mcp/core/rules.py)."""

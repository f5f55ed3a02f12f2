"""MCP servers: the user adds them (Settings → MCP Servers); their discovered tools join the registry."""

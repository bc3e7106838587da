"""Installing into a Claude Code project: the hooks in ``.claude/settings.json``, the MCP server and agent
definitions."""

"""The MCP server (``ralph-ledger mcp``): its tools' arguments and results (``schemas``), what each tool does
on the loop (``tools``) and the stdio server on the official SDK (``server``)."""

"""``ralph-ledger mcp``: the loop's tools for agents, an MCP server on stdin / stdout
(``ledger.mcp.server``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from ledger.core.home import Home


def cmd_mcp(home: Home, args: argparse.Namespace) -> None:
    """Serve the tools until the client closes stdin; loops run on the project holding the working
    directory (its ``ralph.toml``, its files) and are recorded in ``home``."""
    from ledger.core.project import project_root
    from ledger.mcp.server import serve

    serve(home, Path(project_root(str(Path.cwd().absolute()))))

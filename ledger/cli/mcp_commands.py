"""``ralph-ledger mcp``: the loop's tools for agents, an MCP server on stdin / stdout
(``ledger.drivers.mcp.server``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

TTY_HINT = (
    "ralph-ledger mcp: an MCP server on stdin / stdout, for an agent to start "
    "(claude mcp add --scope project ralph-ledger -- ralph-ledger mcp); Ctrl-C ends it"
)

if TYPE_CHECKING:
    import argparse

    from ledger.core.home import Home


def cmd_mcp(home: Home, args: argparse.Namespace) -> None:
    """Serve the tools until the client closes stdin; loops run on the project holding the working
    directory (its ``ralph.toml``, its files) and are recorded in ``home``."""
    import sys

    from ledger.core.project import project_root
    from ledger.drivers.mcp.server import serve

    if sys.stdin is not None and sys.stdin.isatty():  # a person, not an agent: say what this is
        print(TTY_HINT, file=sys.stderr, flush=True)
    serve(home, Path(project_root(str(Path.cwd().absolute()))))

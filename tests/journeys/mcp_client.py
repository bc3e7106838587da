"""An agent's side of ``ralph-ledger mcp``: the installed server started by the official SDK's stdio
client, its tool calls answered as (error?, result)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import TextContent

from tests.journeys.conftest import clean_env, script


@dataclass(frozen=True)
class Answer:
    """One tool call's answer: its structured result, or its error sentence."""

    error: str | None
    data: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        assert self.error is None, f"the call was refused: {self.error}"
        return self.data[key]


class Agent:
    """A connected MCP client, as an agent holds it."""

    def __init__(self, session: ClientSession, pid_file: Path) -> None:
        self.session = session
        self.pid_file = pid_file

    @property
    def server_pid(self) -> int:
        """The server process's id."""
        return int(self.pid_file.read_text())

    async def call(self, tool: str, /, **arguments: Any) -> Answer:
        """Call ``tool``; an error answer carries its one text line."""
        result = await self.session.call_tool(tool, arguments)
        if result.is_error:
            texts = [c.text for c in result.content if isinstance(c, TextContent)]
            return Answer(texts[0] if texts else "", {})
        return Answer(None, dict(result.structured_content or {}))


@contextlib.asynccontextmanager
async def connect(project: Path, env: Mapping[str, str] | None = None) -> AsyncIterator[Agent]:
    """Start ``ralph-ledger mcp`` in ``project`` (through ``sh``, which records its pid then execs
    it) and yield the initialised client; its stderr is kept in ``project/../mcp-stderr.log``."""
    fd, name = tempfile.mkstemp(prefix="mcp-pid-", dir=project.parent)
    os.close(fd)
    pid_file = Path(name)
    params = StdioServerParameters(
        command="/bin/sh",
        args=["-c", f'echo $$ > "{pid_file}"; exec "{script("ralph-ledger")}" mcp'],
        cwd=str(project),
        env=dict(env if env is not None else clean_env()),
    )
    with (project.parent / "mcp-stderr.log").open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield Agent(session, pid_file)

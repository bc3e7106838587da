"""``ralph-ledger mcp``: the loop's tools served over stdio with the official MCP SDK.

stdout carries only protocol messages; every line of log goes to stderr. Calls run one at a time in a
worker thread (validation rules may take minutes), so the server keeps answering pings meanwhile. A
refused call is an MCP tool error of one sentence (``is_error``), and the server goes on serving.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import anyio.to_thread
import msgspec
from mcp.server import MCPServer
from mcp_types import CallToolResult, TextContent, Tool

from ledger.core.errors import printable
from ledger.core.home import Home
from ledger.core.processes import watching
from ledger.drivers.mcp.schemas import SERVER_NAME, TOOLS, json_schema
from ledger.loop.validate.completion import describe_error

INSTRUCTIONS = (
    "Iteration loops recorded in a ledger. Call iteration_start once per task, then for each "
    "iteration: work, iteration_validate with your output (emit <promise>COMPLETE</promise> when "
    "done), and act on its completionSignal: COMPLETE -> iteration_complete, CONTINUE -> "
    "iteration_next (use its feedback), BLOCKED or ESCALATE -> stop and report. After an "
    "interruption, checkpoint_resume gives the iteration and your saved agentContext."
)


def log(line: str) -> None:
    """One line of the server's log, on stderr."""
    print(f"ralph-ledger mcp: {printable(line)}", file=sys.stderr, flush=True)


class LoopServer(MCPServer[Any]):
    """The MCP server: tools listed from ``ledger.drivers.mcp.schemas``, calls run by
    ``ledger.drivers.mcp.tools``."""

    def __init__(self, home: Home, project: Path) -> None:
        super().__init__(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
        self.home, self.project = home, project
        self._tools: Any = None  # ledger.drivers.mcp.tools.Tools, made by the first call
        self._lock = threading.Lock()
        self._listed = [
            Tool(
                name=name,
                description=description,
                input_schema=json_schema(args),
                output_schema=json_schema(result),
            )
            for name, (args, result, description) in TOOLS.items()
        ]
        self._threads = [threading.Thread(target=self._warm, daemon=True)]  # the engine loads meanwhile
        self._threads[0].start()

    def _warm(self) -> None:
        """Import the engine (DuckDB among it) ahead of the first call."""
        try:
            import ledger.drivers.mcp.tools  # noqa: F401
        except Exception as exc:  # reported again, as a tool error, by the first call
            log(f"cannot load the loop engine: {describe_error(exc)}")

    async def list_tools(self) -> list[Tool]:
        """Every tool with its JSON schemas."""
        return self._listed

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> CallToolResult:
        """Run one tool in a worker thread; a refused call answers ``is_error`` with one sentence.
        Once the answer is on its way, the task's journal is synced and its state read ahead."""
        result = await anyio.to_thread.run_sync(self._call, name, arguments)
        task = arguments.get("taskId") if isinstance(arguments, dict) else None
        if isinstance(task, str) and self._tools is not None:
            settle = threading.Thread(target=self._settle, args=(task,), daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [settle]
            settle.start()
        return result

    def finish(self) -> None:
        """Wait for the threads still at work (an import, a journal's sync): DuckDB must not be
        mid-query when the interpreter exits."""
        for thread in self._threads:
            thread.join()

    def _settle(self, task_id: str) -> None:
        with self._lock:
            try:
                self._tools.settle(task_id)
            except Exception as exc:  # a read ahead that fails is only a cache missed
                log(f"reading task {task_id!r} ahead failed: {describe_error(exc)}")

    def _call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        with self._lock:
            try:
                from ledger.drivers.mcp.tools import ToolCallError, Tools

                if self._tools is None:
                    self._tools = Tools(self.home, self.project)
                try:
                    result = self._tools.call(name, arguments)
                except ToolCallError as exc:
                    log(str(exc))
                    return _error(str(exc))
            except Exception as exc:
                said = f"{name}: internal error, nothing more was recorded: {describe_error(exc)}"
                log(said)
                return _error(said)
        data = msgspec.to_builtins(result)
        text = msgspec.json.encode(data).decode()
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def serve(home: Home, project: Path) -> None:
    """Serve the tools on stdin / stdout until the client closes them; the rules' processes die
    with the server (``ledger.core.processes``)."""
    server = LoopServer(home, project)
    with watching():
        try:
            server.run("stdio")
        finally:
            server.finish()

"""Contract: the MCP server ``ralph-ledger init claude-code --agent NAME`` registers in ``.mcp.json``,
loaded by the real Claude Code 2.1.328 (``claude -p``, no approval or ``--mcp-config`` needed: a
project's ``.mcp.json`` is loaded in print mode) with a ``PATH`` that does not hold the venv, as
Claude Code started from a desktop or another shell has it (issue 22, defect 5).

The mock model calls the server's tools by the names the client gives them
(``mcp__ralph-ledger__<tool>``, listed to the model as deferred tools): start, validate with a
COMPLETE promise, complete. The ledger must hold the loop, completed at iteration 1."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ledger.drivers.mcp.schemas import TOOLS
from tests.clients.claude_code_client import CAPTURES, command, env
from tests.clients.conftest import VENV_BIN
from tests.clients.mocks.anthropic import AnthropicAPI
from tests.clients.mocks.base import Reply, Script, ToolCall, Usage
from tests.clients.test_claude_code_run import project

pytestmark = pytest.mark.clients

PREFIX = "mcp__ralph-ledger__"
NO_VENV = "/usr/bin:/bin"


def test_the_registered_server_serves_its_tools_to_the_real_client(client_bin: Path, tmp_path: Path) -> None:
    work = project(tmp_path / "project")
    init = subprocess.run(
        [str(VENV_BIN / "ralph-ledger"), "init", "claude-code", "--agent", "me"],
        cwd=work,
        env={"PATH": NO_VENV, "HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert init.returncode == 0, init.stderr
    said = "wrote f1.txt <promise>COMPLETE</promise>"
    turns = [
        Reply(
            tool_calls=(
                ToolCall(PREFIX + "iteration_start", {"taskId": "t1", "task": "Write f1.txt", "agent": "me"}),
            ),
            usage=Usage(input=101, output=11),
        ),
        Reply(
            tool_calls=(
                ToolCall(
                    PREFIX + "iteration_validate", {"taskId": "t1", "agentOutput": said, "toolCount": 1}
                ),
            ),
            usage=Usage(input=202, output=22),
        ),
        Reply(
            tool_calls=(ToolCall(PREFIX + "iteration_complete", {"taskId": "t1"}),),
            usage=Usage(input=303, output=33),
        ),
        Reply(text="The loop is complete.", usage=Usage(input=404, output=44)),
    ]
    tools = ",".join(
        PREFIX + name for name in ("iteration_start", "iteration_validate", "iteration_complete")
    )
    with AnthropicAPI(Script(turns)) as api:
        client_env = {**env(tmp_path / "home", api.url), "PATH": NO_VENV}
        proc = subprocess.run(
            command(client_bin / "claude", "stream-json", tools),
            input="Work the task with the ralph-ledger tools.",
            env=client_env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    init_line = next(x for x in lines if x.get("subtype") == "init")  # hook lines may come first
    assert {"name": "ralph-ledger", "source": "project"}.items() <= init_line["mcp_servers"][0].items()
    # every tool of the server, as the client lists them to the model (deferred, one per line)
    body = json.dumps(api.bodies()[-1])
    assert set(re.findall(r"\\n" + re.escape(PREFIX) + r"(\w+)", body)) == set(TOOLS)
    results = [
        block
        for x in lines
        if x["type"] == "user"
        for block in x["message"]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert [r.get("is_error", False) for r in results] == [False] * 3, results
    answers: list[dict[str, Any]] = [json.loads(r["content"]) for r in results]
    assert answers[0]["iterationNumber"] == 1
    assert (answers[1]["completionSignal"], answers[1]["detectedPromise"]) == ("COMPLETE", "COMPLETE")
    assert answers[2]["totalIterations"] == 1
    sessions = subprocess.run(
        [str(VENV_BIN / "ralph-ledger"), "sessions", "--json"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    (row,) = json.loads(sessions.stdout)
    assert (row["session_id"], row["status"], row["iteration"], row["last_signal"]) == (
        "t1",
        "complete",
        1,
        "COMPLETE",
    )
    if os.environ.get("RALPH_CAPTURE"):  # save the capture (README-run.md)
        (CAPTURES / "mcp-stream-json.jsonl").write_text(proc.stdout)

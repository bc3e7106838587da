"""Journeys: bad calls to ``ralph-ledger mcp`` (one sentence each, nothing recorded, the server serves
on), its stdout (protocol only) and its tools' schemas (a snapshot: a change is a reviewed change)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
from syrupy.assertion import SnapshotAssertion

from tests.journeys.conftest import Project, clean_env, script
from tests.journeys.mcp_client import connect

CHECKS = '[[rules]]\ntype = "file_exists"\nname = "readme"\npath = "README.md"\n'

BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("iteration_validate", {"taskId": "nobody"}, "iteration_validate: no session 'nobody' in "),
    ("iteration_next", {"taskId": "fresh"}, "iteration_next: no session 'fresh'"),
    ("iteration_validate", {"agentOutput": "x"}, "iteration_validate: taskId: missing required key"),
    ("iteration_start", {"taskId": "t", "maxIterations": "five"}, "iteration_start: maxIterations: expected"),
    ("iteration_start", {"taskId": "t", "maxIterations": 0}, "iteration_start: maxIterations: expected"),
    ("iteration_validate", {"taskid": "loop"}, "iteration_validate: "),
    ("iteration_validate", {"taskId": "loop", "agentOutput": "x" * 1_000_001}, "agentOutput: expected"),
    ("iteration_validate", {"taskId": "loop", "filesModified": ["../../etc/passwd"]}, "outside the project"),
    ("iteration_validate", {"taskId": "loop", "filesModified": "a.py"}, "filesModified: expected"),
    ("iteration_validate", {"taskId": "../loop"}, "invalid session id '../loop'"),
    ("iteration_start", {"taskId": "t", "validationRules": ["tests"]}, "no rule named 'tests' in "),
    (
        "iteration_start",
        {"taskId": "t", "validationRules": [{"type": "command", "name": "x", "shell": "rm -rf ~"}]},
        "validationRules[0]: expected",
    ),
    ("iteration_complete", {"taskId": "loop"}, "did not validate as COMPLETE"),
    (
        "hook_register",
        {"taskId": "loop", "hookType": "shell"},
        "hookType: expected one of 'default', 'validation', 'promise', got 'shell'",
    ),
    ("checkpoint_resume", {"taskId": "loop", "checkpointId": "loop-cp9"}, "loop-cp9"),
    ("iteration_launch", {"taskId": "loop"}, "unknown tool 'iteration_launch'"),
]


def test_each_bad_call_is_one_sentence_records_nothing_and_the_server_serves_on(project: Project) -> None:
    project.write("ralph.toml", CHECKS)
    journal = project.home / "journals" / "loop.jsonl"
    answers: list[tuple[str, str | None]] = []

    async def journey() -> None:
        async with connect(project.dir) as agent:
            await agent.call("iteration_start", taskId="loop", validationRules=["readme"])
            before = journal.read_bytes()
            for tool, arguments, _ in BAD_CALLS:
                answers.append((tool, (await agent.call(tool, **arguments)).error))
                assert journal.read_bytes() == before, f"{tool} {arguments} recorded something"
            assert not (project.home / "journals" / "t.jsonl").exists()
            done = await agent.call(
                "iteration_validate", taskId="loop", agentOutput="<promise>COMPLETE</promise>"
            )
            assert done["completionSignal"] == "COMPLETE"  # the server served on
            await agent.call("iteration_complete", taskId="loop")
            after = [
                (await agent.call(tool, taskId="loop", **extra)).error
                for tool, extra in [
                    ("iteration_validate", {"agentOutput": "more"}),
                    ("iteration_next", {}),
                    ("iteration_complete", {}),
                    ("checkpoint_create", {}),
                    ("hook_register", {"hookType": "default"}),
                ]
            ]
            assert all(e is not None and "complete" in e for e in after), after

    anyio.run(journey)
    for (tool, arguments, expected), (_, error) in zip(BAD_CALLS, answers, strict=True):
        assert error is not None, f"{tool} {arguments} was not refused"
        assert expected in error, (tool, arguments, error)
        assert "\n" not in error and "Traceback" not in error, error
        assert len(error) < 400, error
    log = (project.dir.parent / "mcp-stderr.log").read_text()
    assert "Traceback" not in log
    assert all(line.startswith("ralph-ledger mcp: ") for line in log.splitlines()), log


def _rpc(n: int, method: str, params: dict[str, Any] | None = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if n:
        message["id"] = n
    if params is not None:
        message["params"] = params
    return json.dumps(message) + "\n"


def test_stdout_carries_only_protocol_messages_and_the_log_goes_to_stderr(project: Project) -> None:
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    calls = [
        _rpc(1, "initialize", hello),
        _rpc(0, "notifications/initialized"),
        _rpc(2, "tools/list"),
        _rpc(3, "tools/call", {"name": "iteration_next", "arguments": {"taskId": "none"}}),
        _rpc(4, "tools/call", {"name": "iteration_start", "arguments": {"taskId": "raw", "task": "t"}}),
    ]
    proc = subprocess.Popen(
        [script("ralph-ledger"), "mcp"],
        cwd=project.dir,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(calls))
    proc.stdin.flush()
    lines = [proc.stdout.readline() for _ in range(4)]  # four requests: four answers, then the client leaves
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    rest, stderr = proc.stdout.read(), proc.stderr.read() if proc.stderr else ""
    assert rest == ""
    replies = [json.loads(line) for line in lines]
    assert all(r["jsonrpc"] == "2.0" for r in replies)
    by_id = {r["id"]: r["result"] for r in replies if "id" in r}
    assert len(by_id[2]["tools"]) == 13
    assert by_id[3]["isError"] is True
    assert by_id[4]["structuredContent"]["iterationNumber"] == 1
    assert stderr.splitlines() == [
        f"ralph-ledger mcp: iteration_next: no session 'none' in {project.home}; "
        "`ralph-ledger sessions` lists them"
    ]


def test_tools_list_gives_every_tool_its_schemas(project: Project, snapshot: SnapshotAssertion) -> None:
    listed: list[dict[str, Any]] = []

    async def journey() -> None:
        async with connect(project.dir) as agent:
            tools = (await agent.session.list_tools()).tools
            listed.extend(t.model_dump(mode="json", exclude_none=True, by_alias=True) for t in tools)

    anyio.run(journey)
    names = [t["name"] for t in listed]
    assert names == [
        "iteration_start",
        "iteration_validate",
        "iteration_next",
        "iteration_complete",
        "iteration_status",
        "checkpoint_create",
        "checkpoint_resume",
        "checkpoint_list",
        "hook_register",
        "hook_evaluate",
        "hook_list",
        "hook_clear",
        "validate_completion",
    ]
    for tool in listed:
        assert tool["inputSchema"]["type"] == "object"
        assert "taskId" in tool["inputSchema"]["required"]
        assert tool["outputSchema"]["type"] == "object"
    assert listed == snapshot


def test_started_in_a_terminal_it_says_what_it_is_and_ctrl_c_ends_it(project: Project) -> None:
    import os
    import pty
    import signal
    import time

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [script("ralph-ledger"), "mcp"],
        cwd=project.dir,
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    os.close(follower)
    assert proc.stderr is not None
    hint = proc.stderr.readline()
    assert hint.startswith("ralph-ledger mcp: an MCP server on stdin / stdout, for an agent to start")
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 130
    assert proc.stderr.read() == "ralph-ledger: interrupted\n"
    os.close(leader)

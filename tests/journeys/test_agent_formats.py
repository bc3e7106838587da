"""Journeys of ``ralph-ledger run`` with agents that speak their own output format: a scripted
``claude``, ``codex``, ``gemini``, ``opencode`` or ``cursor-agent`` replays that agent's sample
(``tests/fixtures/agents``); the format is detected from the command line, the tokens, cost, model
and tool calls recorded are those computed from the sample, and only a promise in the agent's final
text completes the loop (a promise in the echoed prompt or in the agent's reasoning does not)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.drivers.runner.formats import command_model
from ledger.drivers.runner.formats.report import AgentReport
from tests.journeys.conftest import Project
from tests.unit.test_agent_formats import (
    CLAUDE,
    CODEX,
    CURSOR,
    GEMINI_DOCS,
    OPENCODE,
    expected_claude,
    expected_codex,
    expected_cursor,
    expected_gemini,
    expected_opencode,
)

PROMISE = "<promise>COMPLETE</promise>"

REPLAY = """\
import json, pathlib, sys
state, sample, fmt = pathlib.Path(sys.argv[-3]), pathlib.Path(sys.argv[-2]), sys.argv[-1]
sys.stdin.read()
counter = state / "count"
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
events = [json.loads(line) for line in sample.read_text().splitlines()]
PROMISE = "<promise>COMPLETE</promise>"
DECOY = {  # the promise where it is not the agent's answer: the echoed prompt, its reasoning
    "claude": {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t0", "content": "PROMPT.md: say " + PROMISE}]}},
    "codex": {"type": "item.completed", "item": {"id": "item_decoy", "type": "reasoning",
              "text": "I must not print " + PROMISE + " yet"}},
    "gemini": {"type": "message", "role": "user", "content": "Say " + PROMISE + " when done"},
    "opencode": {"type": "reasoning", "timestamp": 1, "sessionID": "ses_decoy", "part": {
                 "id": "prt_decoy", "type": "reasoning", "text": "I must not print " + PROMISE + " yet"}},
    "cursor": {"type": "user", "message": {"role": "user", "content": [
               {"type": "text", "text": "Say " + PROMISE + " when done"}]}},
}[fmt]
if n == 1:
    events.insert(1, DECOY)
else:  # the second run's answer ends with the promise
    if fmt == "claude":
        final = [e for e in events if e["type"] == "result"][-1]
        final["result"] += "\\n" + PROMISE
    elif fmt == "codex":
        final = [e for e in events if e.get("item", {}).get("type") == "agent_message"][-1]
        final["item"]["text"] += "\\n" + PROMISE
    elif fmt == "opencode":
        final = [e for e in events if e["type"] == "text"][-1]
        final["part"]["text"] += "\\n" + PROMISE
    elif fmt == "cursor":
        final = [e for e in events if e["type"] == "result"][-1]
        final["result"] += "\\n" + PROMISE
    else:
        final = [e for e in events if e["type"] == "message" and e["role"] == "assistant"][-1]
        final["content"] += "\\n" + PROMISE
for event in events:
    print(json.dumps(event), flush=True)
"""
"""A stand-in agent: it replays a real sample; its second run's final text ends with the promise."""

CASES: list[tuple[str, list[str], Path, Callable[[Path], AgentReport]]] = [
    ("claude", ["-p", "--output-format", "stream-json", "--verbose"], CLAUDE, expected_claude),
    ("codex", ["exec", "--json", "--sandbox", "workspace-write"], CODEX, expected_codex),
    ("gemini", ["--output-format", "stream-json", "--yolo"], GEMINI_DOCS, expected_gemini),
    (
        "opencode",
        ["run", "--format", "json", "--model", "anthropic/claude-sonnet-4"],
        OPENCODE,
        expected_opencode,
    ),
    ("cursor-agent", ["-p", "--force", "--output-format", "stream-json"], CURSOR, expected_cursor),
]


@pytest.mark.parametrize(("program", "args", "sample", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_replayed_agent_is_read_in_its_own_format(
    project: Project,
    tmp_path: Path,
    program: str,
    args: list[str],
    sample: Path,
    expected: Callable[[Path], AgentReport],
) -> None:
    agent = tmp_path / "bin" / program
    agent.parent.mkdir()
    agent.write_text(f"#!{sys.executable}\n{REPLAY}")
    agent.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    project.write("PROMPT.md", f"Fix the bug, then say {PROMISE}.\n")
    command = [str(agent), *args, str(state), str(sample), program.removesuffix("-agent")]
    proc = project.cli("run", "--session", "s1", "--prompt", "PROMPT.md", "--", *command, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = project.journal("s1")
    turns: list[dict[str, Any]] = [e for e in events if e["type"] == "agent_turn"]
    want = expected(sample)
    tokens = {
        "input": want.tokens.input,
        "output": want.tokens.output,
        "cache_read": want.tokens.cache_read,
        "cache_creation": want.tokens.cache_creation,
    }
    assert [t["iteration"] for t in turns] == [1, 2]  # the decoy promise did not complete run 1
    assert all({k: t["tokens"].get(k, 0) for k in tokens} == tokens for t in turns)
    assert [t["tool_count"] for t in turns] == [want.tool_count] * 2
    assert [t["files_modified"] for t in turns] == [list(want.files_modified)] * 2
    model = want.model or command_model([program, *args])  # the output's, else the command's
    assert [(t.get("model", ""), t.get("cost_usd")) for t in turns] == [(model, want.cost_usd)] * 2
    assert PROMISE in turns[1]["output_excerpt"] and want.text in turns[1]["output_excerpt"]
    promised = [e["iteration"] for e in events if e["type"] == "promise_detected"]
    assert promised == [2]
    assert [e["status"] for e in project.sessions() if e["session_id"] == "s1"] == ["complete"]


def test_a_named_format_wins_over_detection(project: Project, tmp_path: Path) -> None:
    """A program detection does not know, told ``--agent-format codex``, is read as Codex."""
    agent = tmp_path / "my-agent"
    agent.write_text(f"#!{sys.executable}\n{REPLAY}")
    agent.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    project.write("PROMPT.md", "Fix the bug.\n")
    command = [str(agent), str(state), str(CODEX), "codex"]
    proc = project.cli(
        "run", "--session", "s1", "--prompt", "PROMPT.md", "--agent-format", "codex", "--", *command
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    turns = [e for e in project.journal("s1") if e["type"] == "agent_turn"]
    assert [t["tokens"]["cache_read"] for t in turns] == [json.loads(CODEX.read_text().splitlines()[-1])[
        "usage"]["cached_input_tokens"]] * 2  # fmt: skip


def test_a_bad_format_name_is_a_usage_error(project: Project) -> None:
    proc = project.cli("run", "--agent-format", "cursor-agent", "--", "true")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'cursor-agent'" in lines[0]
    names = ("amp", "claude", "codex", "copilot", "cursor", "gemini", "opencode", "text")
    assert all(name in lines[0] for name in names)

"""Journey: ``ralph-ledger init claude-code --agent NAME`` in a fresh project: the MCP server
registered in ``.mcp.json`` beside the user's own servers, ``.claude/agents/NAME.md`` written, both
left as they are by a second run, the agent file read back by the engine's one frontmatter parser,
and the slips a user makes (a bad name, a clashing server, a broken file) each one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ledger.loop.config.loop_config import agent_config, find_config, load_agent
from tests.journeys.conftest import BIN, Project, clean_env, script

RALPH_TOML = """\
[[rules]]
name = "tests"
type = "command"
argv = ["python3", "-c", "pass"]

[[rules]]
name = "lint"
type = "content_pattern"
pattern = "clean"
"""


def test_init_with_an_agent_registers_the_server_and_writes_the_agent(project: Project) -> None:
    project.write("ralph.toml", RALPH_TOML)
    theirs = {"command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "t"}}
    project.write(".mcp.json", json.dumps({"mcpServers": {"theirs": theirs}}))
    proc = project.cli("init", "claude-code", "--agent", "me")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    mcp_path, agent_path = project.dir / ".mcp.json", project.dir / ".claude" / "agents" / "me.md"
    assert (
        f"registered: MCP server '{script('ralph-ledger')} mcp' as 'ralph-ledger' in {mcp_path}"
        in proc.stdout
    )
    assert f"written: agent 'me' in {agent_path}" in proc.stdout
    assert (project.dir / ".claude" / "settings.json").is_file()  # the Stop hook, as without --agent
    assert json.loads(mcp_path.read_text()) == {
        "mcpServers": {
            "theirs": theirs,
            "ralph-ledger": {"type": "stdio", "command": script("ralph-ledger"), "args": ["mcp"]},
        }
    }
    base = find_config(project.dir)
    config = load_agent(agent_path, base)
    assert config.agent == "me"
    assert config.max_iterations == 15  # me's default (docs/design/iteration-limits.md)
    assert config.completion_promises == ["COMPLETE", "BLOCKED"]
    assert [r["name"] for r in config.rules] == ["tests", "lint"]
    assert agent_config(project.dir, "me", base) == config

    before = (mcp_path.read_bytes(), agent_path.read_bytes(), mcp_path.stat().st_mtime_ns)
    again = project.cli("init", "claude-code", "--agent", "me")
    assert again.returncode == 0, again.stderr
    assert "already registered: MCP server" in again.stdout
    assert "already written: agent 'me'" in again.stdout
    assert (mcp_path.read_bytes(), agent_path.read_bytes(), mcp_path.stat().st_mtime_ns) == before


def test_init_with_an_agent_takes_its_limit_and_promises(project: Project) -> None:
    proc = project.cli(
        "init", "claude-code", "--agent", "qa_2", "--max-iterations", "4",
        "--completion-promise", "ALL GREEN", "--completion-promise", "<promise>STUCK</promise>",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    config = load_agent(project.dir / ".claude" / "agents" / "qa_2.md")
    assert (config.agent, config.max_iterations) == ("qa_2", 4)
    assert config.completion_promises == ["ALL GREEN", "STUCK"]
    assert config.rules == []  # no ralph.toml: no rules to name


def _nothing_written(project: Project) -> bool:
    return not (project.dir / ".claude").exists() and not (project.dir / ".mcp.json").exists()


def test_a_typod_agent_name_is_a_usage_error_in_one_line(project: Project) -> None:
    for name in ("../me", "m e", "me.md"):
        proc = project.cli("init", "claude-code", "--agent", name)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
        assert "--agent" in proc.stderr and "expected a name of letters, digits" in proc.stderr
        assert proc.stdout == ""
        assert _nothing_written(project)
    proc = project.cli("init", "claude-code", "--max-iterations", "3")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "need --agent NAME" in proc.stderr and _nothing_written(project)


def test_a_clashing_server_or_a_broken_file_changes_nothing(project: Project) -> None:
    mcp_path = project.dir / ".mcp.json"
    cases = {
        json.dumps({"mcpServers": {"ralph-ledger": {"command": "elsewhere"}}}): (
            "mcpServers.ralph-ledger: already holds a different server"
        ),
        '{"mcpServers": {"a": 1,}}': "not valid JSON",
        "[]": "expected a JSON object, got a list",
    }
    for text, expected in cases.items():
        mcp_path.write_text(text)
        proc = project.cli("init", "claude-code", "--agent", "me")
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith(f"ralph-ledger init: {mcp_path}: ") and expected in proc.stderr
        assert mcp_path.read_text() == text
        assert not (project.dir / ".claude").exists()  # not even the Stop hook: checked first


def test_an_agent_file_of_the_users_own_is_never_overwritten(project: Project) -> None:
    mine = project.write(".claude/agents/me.md", "---\nname: me\n---\nMy own agent.\n")
    proc = project.cli("init", "claude-code", "--agent", "me")
    assert proc.returncode == 1
    why = "already exists and differs, left as is (remove it to write it again)"
    assert proc.stderr == f"ralph-ledger init: {mine}: {why}\n"
    assert mine.read_text() == "---\nname: me\n---\nMy own agent.\n"
    assert not (project.dir / ".mcp.json").exists()


AGENT_FILE = """\
---
name: me
description: a test agent
iteration:
  enabled: true
  maxIterations: 3
  completionPromises: ["<promise>DONE</promise>"]
  validationRules: [ok]
---
Work.
"""


def test_loop_start_with_an_agent_runs_on_its_definition(project: Project, tmp_path: Path) -> None:
    """``loop start --agent me``: the hook's loop takes me.md's limit, promises and rule names (the
    failing rule it does not name is not run), and the ledger records the loop as me's."""
    ok, bad = f"[{sys.executable!r}, '-c', '']", f"[{sys.executable!r}, '-c', 'raise SystemExit(1)']"
    project.write(
        "ralph.toml",
        f"[[rules]]\nname = 'ok'\ntype = 'command'\nargv = {ok}\n\n"
        f"[[rules]]\nname = 'bad'\ntype = 'command'\nargv = {bad}\n",
    )
    project.write(".claude/agents/me.md", AGENT_FILE)
    proc = project.cli("loop", "start", "Fix it", "--agent", "me")
    assert proc.returncode == 0, proc.stderr
    agent_file = project.dir / ".claude" / "agents" / "me.md"
    assert f"agent 'me' from {agent_file}: at most 3 iterations, rules: ok" in proc.stdout
    transcript = tmp_path / "t.jsonl"
    message = {
        "id": "m1",
        "role": "assistant",
        "content": [{"type": "text", "text": "<promise>DONE</promise>"}],
    }
    transcript.write_text(json.dumps({"type": "assistant", "sessionId": "c1", "message": message}) + "\n")
    stdin = {"session_id": "c1", "transcript_path": str(transcript), "cwd": str(project.dir),
             "hook_event_name": "Stop", "stop_hook_active": False}  # fmt: skip
    stop = project.cli("hook", "claude-code", input=json.dumps(stdin))
    assert stop.returncode == 0 and '"decision"' not in stop.stdout, stop
    started = project.journal("cc-c1")[0]
    assert started["type"] == "session_started"
    assert (started["agent"], started["max_iterations"]) == ("me", 3)
    assert [r["name"] for r in started["rules"]] == ["ok"]
    row = {r["session_id"]: r for r in project.sessions()}["cc-c1"]
    assert (row["status"], row["iteration"]) == ("complete", 1)


def test_loop_start_with_a_bad_agent_is_one_line(project: Project) -> None:
    project.write("ralph.toml", "max_iterations = 5\n")
    proc = project.cli("loop", "start", "Fix it", "--agent", "../me")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--agent: expected a name of letters, digits" in proc.stderr
    project.write(".claude/agents/me.md", "---\niteration:\n  validationRules: [nope]\n---\n")
    proc = project.cli("loop", "start", "Fix it", "--agent", "me")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "me.md: iteration.validationRules[0]: no rule named 'nope'" in proc.stderr
    (project.dir / "ralph.toml").unlink()
    proc = project.cli("loop", "start", "Fix it", "--agent", "me")
    assert proc.returncode == 2 and "--agent needs a ledger-mode loop" in proc.stderr, proc.stderr
    assert not (project.dir / ".claude" / "ralph-loop.local.md").exists()
    assert not (project.dir / ".claude" / "ralph-ledger.local.json").exists()


def test_a_broken_configuration_is_one_line_before_anything_is_written(project: Project) -> None:
    project.write("ralph.toml", "max_iterations = 'many'\n")
    proc = project.cli("init", "claude-code", "--agent", "me")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "ralph.toml: max_iterations: expected a whole number >= 1 or \"auto\", got 'many'" in proc.stderr
    assert _nothing_written(project)


def test_init_registers_the_server_by_its_absolute_path(project: Project) -> None:
    """``.mcp.json`` runs ``ralph-ledger mcp`` by the script's absolute path, as the Stop hook does
    (Claude Code offers no tools when the name is not on its PATH: issue 22, defect 5); init says
    when that name is not on PATH here, and only then. A bare entry an older init wrote is updated
    in place, its other keys kept."""
    note = f"note: ralph-ledger is not on PATH here; it runs by its absolute path {script('ralph-ledger')}"
    bare = {"type": "stdio", "command": "ralph-ledger", "args": ["mcp"], "env": {"A": "1"}}
    project.write(".mcp.json", json.dumps({"mcpServers": {"ralph-ledger": bare}}))
    proc = project.cli("init", "claude-code", "--agent", "me", env=clean_env(PATH="/usr/bin:/bin"))
    assert proc.returncode == 0 and note in proc.stdout, proc
    assert proc.stdout.startswith("installed") and "\nregistered: MCP server" in proc.stdout, proc.stdout
    entry = json.loads((project.dir / ".mcp.json").read_text())["mcpServers"]["ralph-ledger"]
    assert entry == {**bare, "command": script("ralph-ledger")}
    on_path = clean_env(PATH=f"{BIN}:/usr/bin:/bin")
    proc = project.cli("init", "claude-code", "--agent", "me", env=on_path)
    assert proc.returncode == 0 and "note:" not in proc.stdout, proc
    assert "already registered: MCP server" in proc.stdout

"""Agent definitions (docs/design/agent-definitions.md): the MCP server merged into ``.mcp.json``, the
agent file written for Claude Code and read back by the one frontmatter parser, ``agent_config``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ledger.drivers.claude_code.install.agent_def import (
    TOOLS,
    agent_markdown,
    check_agent,
    plan_server,
    register_server,
    server_entry,
    write_agent,
)
from ledger.drivers.claude_code.install.settings import SettingsError
from ledger.loop.config.loop_config import ConfigError, LoopConfig, agent_config, find_config, load_agent

OURS = {"type": "stdio", "command": "ralph-ledger", "args": ["mcp"]}


def test_the_server_entry_is_claude_codes_stdio_form() -> None:
    assert server_entry() == OURS
    assert server_entry(["/v/bin/ralph-ledger", "mcp"]) == {**OURS, "command": "/v/bin/ralph-ledger"}


@pytest.mark.parametrize(
    "entry",
    [
        OURS,
        {"command": "/old/venv/bin/ralph-ledger", "args": ["mcp"], "env": {"A": "1"}},
        {"command": "/usr/bin/python3", "args": ["-m", "ledger.cli", "mcp"]},
    ],
)
def test_an_entry_of_ours_gets_the_command_given_its_other_keys_kept(
    tmp_path: Path, entry: dict[str, object]
) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": {"ralph-ledger": entry}}))
    command = ["/v/bin/ralph-ledger", "mcp"]
    assert register_server(path, command) is True
    assert json.loads(path.read_text())["mcpServers"]["ralph-ledger"] == {
        **entry,
        "command": "/v/bin/ralph-ledger",
        "args": ["mcp"],
    }
    assert register_server(path, command) is False


def test_no_file_gets_the_server(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    assert register_server(path) is True
    assert json.loads(path.read_text()) == {"mcpServers": {"ralph-ledger": OURS}}


def test_other_servers_and_keys_are_kept(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    other = {"command": "npx", "args": ["-y", "airtable-mcp-server"], "env": {"KEY": "k"}}
    path.write_text(json.dumps({"mcpServers": {"airtable": other}, "extra": [1, 2]}, indent=4))
    assert register_server(path) is True
    assert json.loads(path.read_text()) == {
        "mcpServers": {"airtable": other, "ralph-ledger": OURS},
        "extra": [1, 2],
    }


def test_a_file_without_mcp_servers_gets_the_key(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text('{"note": "mine"}')
    assert register_server(path) is True
    assert json.loads(path.read_text()) == {"note": "mine", "mcpServers": {"ralph-ledger": OURS}}


@pytest.mark.parametrize(
    "entry",
    [
        OURS,
        {"command": "ralph-ledger", "args": ["mcp"]},  # type left out: stdio is Claude Code's default
        {"type": "stdio", "command": "/opt/venv/bin/ralph-ledger", "args": ["mcp"], "env": {"A": "1"}},
    ],
)
def test_an_identical_entry_is_left_as_is(tmp_path: Path, entry: dict[str, object]) -> None:
    path = tmp_path / ".mcp.json"
    text = json.dumps({"mcpServers": {"ralph-ledger": entry}})  # not as this module would indent it
    path.write_text(text)
    assert register_server(path, [str(entry["command"]), "mcp"]) is False
    assert path.read_text() == text


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "other-server"},
        {"command": "ralph-ledger", "args": ["mcp", "--debug"]},
        {"type": "http", "url": "https://example.com/mcp"},
        "ralph-ledger mcp",
    ],
)
def test_a_different_ralph_ledger_entry_is_never_overwritten(tmp_path: Path, entry: object) -> None:
    path = tmp_path / ".mcp.json"
    text = json.dumps({"mcpServers": {"ralph-ledger": entry}})
    path.write_text(text)
    with pytest.raises(SettingsError) as err:
        register_server(path)
    message = str(err.value)
    assert message.startswith(f"{path}: mcpServers.ralph-ledger: already holds a different server")
    assert "\n" not in message
    assert path.read_text() == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"mcpServers": {', "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got a list"),
        ('"ralph-ledger"', "expected a JSON object, got a string"),
        ('{"mcpServers": []}', "mcpServers: expected an object, got a list"),
    ],
)
def test_a_file_that_is_not_an_mcp_configuration_is_one_line_and_untouched(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(text)
    with pytest.raises(SettingsError) as err:
        plan_server(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message
    assert path.read_text() == text


RALPH_TOML = """\
max_iterations = 9
[[rules]]
name = "tests"
type = "command"
argv = ["true"]

[[rules]]
name = "lint"
type = "command"
argv = ["false"]
"""


def _agent(tmp_path: Path, name: str = "me", **kw: object) -> Path:
    (tmp_path / "ralph.toml").write_text(RALPH_TOML)
    config = find_config(tmp_path)
    text = agent_markdown(
        name,
        max_iterations=int(str(kw.get("max_iterations", 12))),
        completion_promises=["ALL GREEN", "BLOCKED"],
        validation_rules=[str(r["name"]) for r in config.rules],
    )
    path = tmp_path / ".claude" / "agents" / f"{name}.md"
    assert write_agent(path, text) is True
    return path


def test_the_agent_file_round_trips_through_load_agent(tmp_path: Path) -> None:
    path = _agent(tmp_path)
    base = find_config(tmp_path)
    config = load_agent(path, base)
    assert config.agent == "me"
    assert config.max_iterations == 12
    assert config.completion_promises == ["ALL GREEN", "BLOCKED"]
    assert [r["name"] for r in config.rules] == ["tests", "lint"]
    assert config.rules == base.rules


def test_the_agent_file_declares_the_server_tools_and_the_protocol(tmp_path: Path) -> None:
    import yaml

    text = _agent(tmp_path).read_text()
    meta = yaml.safe_load(text.split("---\n")[1])
    tools = [t.strip() for t in meta["tools"].split(",")]
    assert tools[:6] == ["Read", "Grep", "Glob", "Edit", "Write", "Bash"]
    assert tools[6:] == [f"mcp__ralph-ledger__{t}" for t in TOOLS]
    assert meta["iteration"] == {
        "enabled": True,
        "maxIterations": 12,
        "completionPromises": ["<promise>ALL GREEN</promise>", "<promise>BLOCKED</promise>"],
        "validationRules": ["tests", "lint"],
    }
    body = text.split("---\n", 2)[2]
    for word in ("iteration_start({", "checkpoint_create(", "iteration_validate({ taskId, agentOutput"):
        assert word in body
    for signal in ("`COMPLETE`", "`BLOCKED`", "`ESCALATE`", "`CONTINUE`", "checkpoint_resume("):
        assert signal in body
    assert 'the rules ["tests", "lint"]' in body and 'agent: "me"' in body


def test_an_agent_file_that_differs_is_never_overwritten(tmp_path: Path) -> None:
    path = _agent(tmp_path)
    text = path.read_text()
    assert check_agent(path, text) is False  # the same text: nothing to write
    assert write_agent(path, text) is False
    path.write_text(text + "\nmy own notes\n")
    with pytest.raises(SettingsError, match="already exists and differs"):
        write_agent(path, text)
    assert path.read_text().endswith("my own notes\n")


def test_agent_config_applies_the_agent_file(tmp_path: Path) -> None:
    _agent(tmp_path)
    base = find_config(tmp_path)
    config = agent_config(tmp_path, "me", base)
    assert config == load_agent(tmp_path / ".claude" / "agents" / "me.md", base)
    assert (config.agent, config.max_iterations) == ("me", 12)


def test_agent_config_without_a_file_is_the_base_for_that_agent(tmp_path: Path) -> None:
    base = LoopConfig(max_iterations=None)
    config = agent_config(tmp_path, "qa", base)
    assert config.agent == "qa" and config.effective_max_iterations() == 10
    assert config == LoopConfig(agent="qa")


@pytest.mark.parametrize("name", ["../etc", "a/b", "", ".hidden", "x" * 65, "--", "me.md"])
def test_agent_config_refuses_a_name_that_is_not_a_safe_file_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError) as err:
        agent_config(tmp_path, name, LoopConfig())
    assert str(err.value).startswith("agent: expected a name of letters, digits")
    assert "\n" not in str(err.value)


def test_agent_config_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "agents" / "me.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\niteration:\n  validationRules: [nope]\n---\n")
    with pytest.raises(ConfigError, match=r"me\.md: iteration\.validationRules\[0\]: no rule named 'nope'"):
        agent_config(tmp_path, "me", LoopConfig())


def test_the_protocol_quotes_what_it_names(tmp_path: Path) -> None:
    text = agent_markdown(
        "me", max_iterations=3, completion_promises=['SAY "DONE"'], validation_rules=["tests"]
    )
    assert 'the promises\n   ["<promise>SAY \\"DONE\\"</promise>"], the rules ["tests"]' in text
    assert load_agent_text(tmp_path, text).completion_promises == ['SAY "DONE"']


def test_the_protocols_calls_pass_only_arguments_the_tools_take() -> None:
    from ledger.drivers.mcp.schemas import TOOLS

    text = agent_markdown("me", max_iterations=3, completion_promises=["DONE"], validation_rules=["t"])
    calls = re.findall(r"\b(\w+)\(\{(.*?)\}\)", text, re.S)
    assert {tool for tool, _ in calls} >= {"iteration_start", "iteration_validate", "iteration_complete"}
    for tool, body in calls:
        flat = re.sub(r"\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>", "", body)  # nested values, placeholders
        names = {part.split(":")[0].strip() for part in flat.split(",") if part.strip()}
        taken = set(TOOLS[tool][0].__struct_encode_fields__)
        assert names <= taken, (tool, names - taken)


def load_agent_text(tmp_path: Path, text: str) -> LoopConfig:
    """``load_agent`` on ``text`` written as ``me.md``, on a configuration defining rule ``tests``."""
    path = tmp_path / "me.md"
    path.write_text(text)
    return load_agent(path, LoopConfig(rules=[{"name": "tests", "type": "command", "argv": ["true"]}]))

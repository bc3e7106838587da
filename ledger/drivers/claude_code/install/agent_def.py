"""Agent definitions for Claude Code: the ``ralph-ledger mcp`` server registered in the project's
``.mcp.json`` (merged into what is there, never clobbering another server), and
``.claude/agents/<name>.md``, whose ``iteration:`` frontmatter ``ledger.loop.config.loop_config.load_agent``
reads and whose body is the iterative execution protocol on the server's tools
(docs/design/agent-definitions.md).

Stop hooks never import this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from ledger.core.atomic import atomic_write
from ledger.drivers.claude_code.install.settings import SettingsError, expect, load_json_object
from ledger.drivers.mcp.schemas import SERVER_NAME
from ledger.drivers.mcp.schemas import TOOLS as MCP_TOOLS

MCP_FILE: Final = ".mcp.json"
SERVER: Final = SERVER_NAME
TOOLS: Final = tuple(MCP_TOOLS)
"""The tools ``ralph-ledger mcp`` serves."""
BUILTIN_TOOLS: Final = ("Read", "Grep", "Glob", "Edit", "Write", "Bash")


BARE_COMMAND: Final = (SERVER, "mcp")
"""``ralph-ledger mcp`` by its bare name, as older versions of ``init`` registered it: Claude Code then
offers none of its tools when the script is not on its ``PATH``, so ``init`` registers the absolute
path (``ledger.cli.claude_code_commands.ralph_command``) and updates a bare entry in place."""


def server_entry(command: Sequence[str] = BARE_COMMAND) -> dict[str, Any]:
    """The ``mcpServers`` entry that runs ``command`` (``ralph-ledger mcp``) over stdio."""
    return {"type": "stdio", "command": command[0], "args": list(command[1:])}


def _is_ours(entry: object) -> bool:
    """Whether an ``mcpServers`` entry runs ``ralph-ledger mcp`` over stdio (by any path to the
    script, or as ``PYTHON -m ledger.cli mcp``; other keys, such as ``env``, are the user's)."""
    if not isinstance(entry, dict) or entry.get("type", "stdio") != "stdio":
        return False
    command, args = entry.get("command"), entry.get("args")
    if not isinstance(command, str):
        return False
    return (Path(command).name == SERVER and args == ["mcp"]) or args == ["-m", "ledger.cli", "mcp"]


def plan_server(path: Path, command: Sequence[str] = BARE_COMMAND) -> dict[str, Any] | None:
    """The content of the MCP configuration ``path`` with the ``ralph-ledger`` server running
    ``command`` added, or ``None`` when it is already there as such. An entry of ours that runs
    another path to the server (a bare ``ralph-ledger``, another installation) gets ``command``, its
    other keys kept. Everything else is kept as it was. ``SettingsError`` (one line naming the file)
    when the file is not a JSON object, its ``mcpServers`` is not an object, or it already has a
    different server named ``ralph-ledger`` (never overwritten)."""
    config = load_json_object(path)
    servers = config.setdefault("mcpServers", {})
    expect(servers, dict, "mcpServers", path)
    existing = servers.get(SERVER)
    entry = server_entry(command)
    if existing is not None and _is_ours(existing):
        if [existing.get("command"), *existing.get("args", [])] == list(command):
            return None
        servers[SERVER] = {**existing, "command": entry["command"], "args": entry["args"]}
        return config
    if SERVER in servers:
        raise SettingsError(
            f"{path}: mcpServers.{SERVER}: already holds a different server, left as is "
            f"(expected command {SERVER!r} with args ['mcp']; edit or remove that entry, then run init again)"
        )
    servers[SERVER] = entry
    return config


def write_json(path: Path, config: dict[str, Any]) -> None:
    """Write ``config`` to ``path`` atomically, with 2-space indentation."""
    import json

    atomic_write(path, (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def register_server(path: Path, command: Sequence[str] = BARE_COMMAND) -> bool:
    """Add the ``ralph-ledger`` MCP server running ``command`` to the configuration ``path``
    (``plan_server``); False when it was already there (the file is then not rewritten)."""
    config = plan_server(path, command)
    if config is None:
        return False
    write_json(path, config)
    return True


def tool_names() -> list[str]:
    """The ``tools:`` of an agent definition: Claude Code's built-in tools it needs, then the
    server's tools as Claude Code names MCP tools (``mcp__<server>__<tool>``)."""
    return [*BUILTIN_TOOLS, *(f"mcp__{SERVER}__{tool}" for tool in TOOLS)]


def agent_markdown(
    name: str,
    *,
    max_iterations: int | str,
    completion_promises: Sequence[str],
    validation_rules: Sequence[str],
) -> str:
    """The definition of agent ``name``: frontmatter (``name``, ``description``, ``tools``, the
    ``iteration:`` block) and the iterative execution protocol. ``completion_promises`` are promise
    words (``COMPLETE``), written tagged (``<promise>COMPLETE</promise>``);
    ``max_iterations`` is a number or ``"auto"`` (``ledger.loop.decide.limits``)."""
    import yaml

    meta = {
        "name": name,
        "description": "Works a task in validated iterations with the ralph-ledger tools: "
        "start, validate, checkpoint, next, complete",
        "tools": ", ".join(tool_names()),
        "iteration": {
            "enabled": True,
            "maxIterations": max_iterations,
            "completionPromises": [f"<promise>{word}</promise>" for word in completion_promises],
            "validationRules": list(validation_rules),
        },
    }
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1_000_000)
    rules = ", ".join(f"`{r}`" for r in validation_rules) or "none yet (define them in ralph.toml)"
    auto = "as many iterations as past loops suggest (auto)"
    limit = auto if max_iterations == "auto" else f"at most {max_iterations} iterations"
    body = (
        PROTOCOL.replace("@NAME@", name)
        .replace("at most @MAX@ iterations", limit)
        .replace("@PROMISES@", ", ".join(_js(f"<promise>{w}</promise>") for w in completion_promises))
        .replace("@RULES@", ", ".join(_js(r) for r in validation_rules))
        .replace("@RULE_LIST@", rules)
    )
    return f"---\n{head}---\n\n{body}"


def _js(text: str) -> str:
    """``text`` as a JSON string, as the protocol's example calls write their arguments."""
    import json

    return json.dumps(text, ensure_ascii=False)


def check_agent(path: Path, text: str) -> bool:
    """Whether the agent definition ``text`` is still to be written to ``path``: True when there is
    no such file, False when it holds exactly that text; ``SettingsError`` when it holds anything
    else (an agent definition is never overwritten) or cannot be read."""
    try:
        existing = path.read_bytes()
    except FileNotFoundError:
        return True
    except IsADirectoryError:
        raise SettingsError(f"{path}: expected an agent definition file, found a folder") from None
    except OSError as exc:
        from ledger.core.errors import error_reason

        raise SettingsError(f"{path}: cannot read: {error_reason(exc)}") from None
    if existing != text.encode("utf-8"):
        raise SettingsError(f"{path}: already exists and differs, left as is (remove it to write it again)")
    return False


def write_agent(path: Path, text: str) -> bool:
    """Write the agent definition ``text`` to ``path`` atomically unless ``check_agent`` finds it
    there already (False); ``SettingsError`` as ``check_agent``."""
    if not check_agent(path, text):
        return False
    atomic_write(path, text.encode("utf-8"))
    return True


PROTOCOL: Final = """\
# @NAME@

You work one task at a time in iterations that ralph-ledger validates and records. The loop is
yours to drive with the `ralph-ledger` tools; the project's validation rules (@RULE_LIST@) are
defined in its ralph.toml and referenced here by name only.

## Iterative Execution Protocol

### When to iterate

Iterate when the task has clear, checkable criteria (tests, a build, lint) and can be refined
step by step without a human's decision. Do not iterate when the requirements are unclear, when a
human must approve something mid-task, or for a one-time change.

### The loop

1. **Start** (once per task):
   ```
   iteration_start({ taskId, task: <the task, in a sentence>, agent: "@NAME@" })
   ```
   `agent` applies this file's `iteration:` block: at most @MAX@ iterations, the promises
   [@PROMISES@], the rules [@RULES@]. A call may set `maxIterations`, `completionPromises` or
   `validationRules` itself; `validationRules` are rule names from the project's configuration,
   and a call can never define a command.

2. **Each iteration**, until a signal other than CONTINUE:
   ```
   checkpoint_create({ taskId, agentContext: { step, plan, notes } })

   # do the work: Read, Grep, Glob, then Edit / Write; run the tests with Bash

   result = iteration_validate({ taskId, agentOutput: <your answer this iteration>,
                                 filesModified: [<paths you changed>],
                                 toolCount: <tool calls you made this iteration> })
   ```
   Then act on `result.completionSignal`:
   - `COMPLETE`: `iteration_complete({ taskId })` and report what was done.
   - `BLOCKED`: stop and report the blocker (`result.feedback`) to the user.
   - `ESCALATE`: stop and ask a human to decide; quote `result.feedback` and
     `result.validationReport`.
   - `CONTINUE`: `iteration_next({ taskId, notes })`, read `result.feedback` (and
     `result.validationReport`: which rule failed, why) and fix that first in the next iteration.

   `result.validationPassed` says whether every rule passed; `result.detectedPromise` which
   promise was read in `agentOutput`; `result.iterationNumber` where you are.
   `iteration_status({ taskId })` shows the loop at any time.

3. **After an interruption** (a new session, a crash): `checkpoint_list({ taskId })`, then
   `checkpoint_resume({ taskId })` (or with a `checkpointId`) gives back the iteration and your
   `agentContext`; carry on from there rather than starting over.

### Promises

Only when the work is really done (the rules pass), end `agentOutput` with:
```
Implementation complete. All tests passing, lint clean.

<promise>COMPLETE</promise>
```
When an external dependency stops you:
```
Cannot proceed: the database migration needs a DBA's approval.

<promise>BLOCKED</promise>
Reason: a human must decide the schema change.
```
Never emit a promise to leave the loop early: a COMPLETE promise the loop cannot accept yet (a
gate rule such as `todos` or `work_done` failing, a guard tripped) comes back as CONTINUE, and
`result.feedback` says why.
"""
"""The body of an agent definition: the iterative execution protocol on this project's tools."""

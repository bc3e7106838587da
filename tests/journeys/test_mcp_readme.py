"""The manual's example of an agent's loop over MCP (docs/mcp.md), replayed against ``ralph-ledger mcp``: each
``→ tool {arguments}`` line is called, each ``← {fields}`` line must be in its answer (``← error:``
the error sentence), and ``# the agent writes FILE`` writes that file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio

from tests.journeys.conftest import Project
from tests.journeys.mcp_client import connect

MCP_DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def fence(text: str, kind: str, holding: str) -> str:
    """The body of the first ```kind block of ``text`` holding ``holding``."""
    for body in re.findall(rf"```{kind}\n(.*?)```", text, re.S):
        if holding in body:
            return str(body)
    raise AssertionError(f"no ```{kind} block holding {holding!r}")


def contains(answer: Any, shown: Any) -> bool:
    """Whether ``answer`` has every field ``shown`` gives, with its value (dicts: a subset)."""
    if isinstance(shown, dict):
        return isinstance(answer, dict) and all(
            k in answer and contains(answer[k], v) for k, v in shown.items()
        )
    return bool(answer == shown)


def test_the_readme_loop_is_what_the_server_answers(project: Project) -> None:
    text = MCP_DOC.read_text()
    project.write("ralph.toml", fence(text, "toml", "[[rules]]"))
    steps = fence(text, "text", "→ iteration_start").splitlines()
    checked: list[str] = []

    async def replay() -> None:
        async with connect(project.dir) as agent:
            answer: Any = None
            for line in steps:
                if line.startswith("→ "):
                    tool, _, arguments = line[2:].partition(" ")
                    answer = await agent.call(tool, **json.loads(arguments))
                elif line.startswith("← error: "):
                    assert answer.error == line.removeprefix("← error: "), (line, answer)
                    checked.append(line)
                elif line.startswith("← "):
                    assert answer.error is None, (line, answer.error)
                    assert contains(answer.data, json.loads(line[2:])), (line, answer.data)
                    checked.append(line)
                elif line.startswith("# the agent writes "):
                    project.write(
                        line.removeprefix("# the agent writes "), "def login(p): return p == 's3cret'\n"
                    )
                else:
                    raise AssertionError(f"a line the replay does not know: {line!r}")

    anyio.run(replay)
    assert len(checked) == sum(1 for s in steps if s.startswith("← "))
    (row,) = project.sessions()
    assert (row["session_id"], row["status"], row["iteration"]) == ("auth-fix", "complete", 2)

"""What the opencode and Copilot contract tests share: a git project the real client works in through
``ralph-ledger run``, and the ledger's numbers next to what the chat completions mock served."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.clients.mocks.base import Reply
from tests.journeys.conftest import Project

RALPH = str(Path(sys.executable).parent / "ralph-ledger")

PROMPT = "Write notes.txt, then say CONTINUE; say <promise>COMPLETE</promise> only when all is done.\n"
"""The task: it names the promise, so a client that echoes its prompt shows it."""


def project(root: Path) -> Project:
    """A fresh git project (one commit) with ``PROMPT.md`` (untracked)."""
    p = Project(root)
    p.write("PROMPT.md", PROMPT)
    return p


def run(
    p: Project, env: Mapping[str, str], agent: Sequence[str], *args: str, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """``ralph-ledger run --session s1 --prompt PROMPT.md ARGS -- AGENT`` in the project, with the
    client's environment and ``PWD`` naming the project (as the user's shell sets it)."""
    return subprocess.run(
        [RALPH, "run", "--session", "s1", "--prompt", "PROMPT.md", *args, "--", *agent],
        cwd=p.dir,
        env={**env, "PWD": str(p.dir)},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def turns(p: Project, session: str = "s1") -> list[dict[str, Any]]:
    """The session's ``agent_turn`` events, in order."""
    return [e for e in p.journal(session) if e["type"] == "agent_turn"]


def served_tokens(replies: Sequence[Reply]) -> dict[str, int]:
    """The tokens ``replies`` served, as the ledger records them (OpenAI's output includes reasoning)."""
    return {
        "input": sum(r.usage.input for r in replies),
        "output": sum(r.usage.output + r.usage.thoughts for r in replies),
        "cache_creation": sum(r.usage.cache_write for r in replies),
        "cache_read": sum(r.usage.cache_read for r in replies),
    }


def costs(p: Project, env: Mapping[str, str], session: str = "s1") -> list[float | None]:
    """Each iteration's cost in the ledger (``turn_costs``), in order."""
    query = (
        "SELECT iteration, sum(cost_usd) AS cost FROM turn_costs "
        f"WHERE session_id = '{session}' GROUP BY iteration ORDER BY iteration"
    )
    done = subprocess.run(
        [RALPH, "sql", query, "--json"],
        cwd=p.dir,
        env={**env, "PWD": str(p.dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [row["cost"] for row in json.loads(done.stdout)]


def price(tokens: Mapping[str, int], model: str = "gpt-4.1") -> float:
    """What ``tokens`` (as the ledger records them) cost on ``model`` by genai-prices, whose input
    counts cache reads and writes."""
    from genai_prices import Usage as Priced
    from genai_prices import calc_price

    usage = Priced(
        input_tokens=tokens["input"] + tokens["cache_read"] + tokens["cache_creation"],
        cache_read_tokens=tokens["cache_read"],
        cache_write_tokens=tokens["cache_creation"],
        output_tokens=tokens["output"],
    )
    return float(calc_price(usage, model_ref=model).total_price)

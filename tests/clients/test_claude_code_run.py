"""Contract: ``ralph-ledger run -- claude -p ...`` with the real Claude Code 2.1.328 against the
Anthropic mock, in its three output modes, and the API errors a user meets.

One loop per mode (module-scoped: every assertion of a mode reads the same run): iteration 1 writes
``f1.txt`` and says more is to do, iteration 2 writes ``f2.txt`` and promises COMPLETE; the prompt
holds the promise too. Per iteration and per loop, the ledger must hold what the mock served."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from tests.clients.claude_code_client import (
    BAD_KEY,
    PROMPT,
    RATE_LIMITED,
    command,
    env,
    iteration,
    with_subagent,
)
from tests.clients.conftest import VENV_BIN
from tests.clients.mocks.anthropic import MODEL, AnthropicAPI
from tests.clients.mocks.base import Reply, Script, Turn, Usage

pytestmark = pytest.mark.clients

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
SESSION = "cc"


@dataclass
class Loop:
    """A finished ``ralph-ledger run``: its process, the replies served per agent run, the project."""

    proc: subprocess.CompletedProcess[str]
    served: list[Reply]
    project: Path

    def journal(self) -> list[dict[str, Any]]:
        path = self.project / ".ralph" / "journals" / f"{SESSION}.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]

    def turns(self) -> list[dict[str, Any]]:
        return [e for e in self.journal() if e["type"] == "agent_turn"]

    def sql(self, query: str) -> list[dict[str, Any]]:
        proc = subprocess.run(
            [str(VENV_BIN / "ralph-ledger"), "sql", "--json", query],
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        rows: list[dict[str, Any]] = json.loads(proc.stdout)
        return rows


def project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "README.md").write_text("# demo\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "init"], cwd=root, check=True)
    return root


def run_loop(
    claude: Path, root: Path, mode: str, turns: list[Turn], *options: str, tools: str = "Write"
) -> Loop:
    work = project(root / "project")
    with AnthropicAPI(Script(turns)) as api:
        proc = subprocess.run(
            [
                str(VENV_BIN / "ralph-ledger"),
                "run",
                "--session",
                SESSION,
                *options,
                "--",
                *command(claude, mode),
            ],
            input=PROMPT,
            env=env(root / "home", api.url),
            cwd=work,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Loop(proc, api.replies(), work)


def two_iterations(root: Path) -> list[Turn]:
    return [*iteration(root / "project", 1, last=False), *iteration(root / "project", 2, last=True)]


@pytest.fixture(scope="module", params=["stream-json", "json", "text"])
def loop(
    request: pytest.FixtureRequest, client_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Loop]:
    mode: str = request.param
    root = tmp_path_factory.mktemp(f"cc-run-{mode}")
    yield run_loop(client_bin / "claude", root, mode, two_iterations(root), "--max-iterations", "3")


def tokens(replies: list[Reply]) -> dict[str, int]:
    """The tokens of ``replies`` as ``agent_turn`` records them."""
    return {
        "input": sum(r.usage.input for r in replies),
        "output": sum(r.usage.output for r in replies),
        "cache_read": sum(r.usage.cache_read for r in replies),
        "cache_creation": sum(r.usage.cache_write for r in replies),
    }


def priced(t: dict[str, int]) -> float:
    """genai-prices' cost of tokens ``t`` of the model (the ledger's prices)."""
    usage = PriceUsage(
        input_tokens=t["input"] + t["cache_read"] + t["cache_creation"],
        output_tokens=t["output"],
        cache_read_tokens=t["cache_read"],
        cache_write_tokens=t["cache_creation"],
    )
    return float(calc_price(usage, model_ref=MODEL).total_price)


def mode_of(loop: Loop) -> str:
    argv = loop.journal()[0]["command"]
    return "stream-json" if "stream-json" in argv else "json" if "json" in argv else "text"


def test_the_loop_completes_on_the_last_iteration_only(loop: Loop) -> None:
    """Iteration 1 says more is to do and is not completed, though the prompt holds the promise
    (plain mode prints only the final text, never the prompt)."""
    assert loop.proc.returncode == 0, loop.proc.stdout + loop.proc.stderr
    assert len(loop.served) == 4  # two model turns per iteration
    signals = [e["signal"] for e in loop.journal() if e["type"] == "signal_resolved"]
    assert signals == ["CONTINUE", "COMPLETE"]
    turns = loop.turns()
    assert [t["output_excerpt"].strip() for t in turns] == [loop.served[1].text, loop.served[3].text]
    assert [t["files_modified"] for t in turns] == [["f1.txt"], ["f2.txt"]]


def test_tokens_cost_model_and_context_equal_what_was_served(loop: Loop) -> None:
    mode, turns = mode_of(loop), loop.turns()
    per_iteration = [loop.served[0:2], loop.served[2:4]]
    rows = loop.sql(
        f"SELECT iteration, tokens_total, cost_usd, context_tokens, context_window FROM iterations "
        f"WHERE session_id = '{SESSION}' ORDER BY iteration"
    )
    session = loop.sql(f"SELECT tokens, cost_usd FROM sessions WHERE session_id = '{SESSION}'")[0]
    if mode == "text":  # plain output reports nothing but its text
        assert all(
            t["tokens"] == dict.fromkeys(("input", "output", "cache_read", "cache_creation"), 0)
            for t in turns
        )
        assert all(t["model"] == MODEL and t["cost_usd"] is None for t in turns)  # the --model asked for
        assert session["cost_usd"] is None
        return
    for turn, replies, row in zip(turns, per_iteration, rows, strict=True):
        want = tokens(replies)
        assert turn["tokens"] == want
        assert turn["model"] == MODEL
        assert turn["cost_usd"] == pytest.approx(priced(want), abs=1e-9)  # the client's, = genai-prices'
        assert row["cost_usd"] == pytest.approx(priced(want), abs=1e-9)
        assert row["tokens_total"] == sum(want.values())
        assert turn["tool_count"] == (1 if mode == "stream-json" else 0)  # json: one result object
    total = tokens(loop.served)
    assert session["tokens"] == sum(total.values())
    assert session["cost_usd"] == pytest.approx(priced(total), abs=1e-9)


def test_the_context_figure_is_the_hooks(loop: Loop) -> None:
    """stream-json records the context of each iteration's last request (input, cache included),
    as the hook does from the transcript, so the context guard can act (issue 22, defect 6); json
    and plain output carry no per-request usage."""
    mode, turns = mode_of(loop), loop.turns()
    rows = loop.sql(
        "SELECT context_tokens, context_window FROM iterations "
        f"WHERE session_id = '{SESSION}' ORDER BY iteration"
    )
    if mode != "stream-json":
        assert [t["context_tokens"] for t in turns] == [0, 0]
        return
    last = [loop.served[1].usage, loop.served[3].usage]
    want = [u.input + u.cache_read + u.cache_write for u in last]
    assert [t["context_tokens"] for t in turns] == want
    assert [(r["context_tokens"], r["context_window"]) for r in rows] == [(w, 200_000) for w in want]


def test_a_rate_limit_is_waited_out_not_an_iteration(client_bin: Path, tmp_path: Path) -> None:
    """A 429 the client gave up on (``CLAUDE_CODE_MAX_RETRIES=0``) is recorded as ``rate_limited`` and
    the same iteration runs again, instead of failing it."""
    done = Reply(text="Done. <promise>COMPLETE</promise>", usage=Usage(input=301, output=41, cache_read=2003))
    loop = run_loop(
        client_bin / "claude",
        tmp_path,
        "stream-json",
        [RATE_LIMITED, done],
        "--max-iterations",
        "1",
        "--rate-limit-wait",
        "0.2",
    )
    assert loop.proc.returncode == 0, loop.proc.stdout + loop.proc.stderr
    limited = [e for e in loop.journal() if e["type"] == "rate_limited"]
    assert len(limited) == 1 and limited[0]["iteration"] == 1
    assert limited[0]["reason"].startswith("API Error: Request rejected (429) · This request would exceed")
    (turn,) = loop.turns()
    assert turn["tokens"] == tokens([done]) and turn["failure"] == ""


def test_a_bad_api_key_fails_each_iteration_saying_why(client_bin: Path, tmp_path: Path) -> None:
    loop = run_loop(client_bin / "claude", tmp_path, "json", [BAD_KEY] * 2, "--max-iterations", "2")
    assert loop.proc.returncode != 0
    turns = loop.turns()
    assert [t["failure"] for t in turns] == ["agent exited 1: Invalid API key · Fix external API key"] * 2
    assert [e["passed"] for e in loop.journal() if e["type"] == "validation_ran"] == [False, False]
    assert all(t["cost_usd"] == 0 and t["model"] == MODEL for t in turns)  # the command's: no modelUsage


def test_a_sub_agents_tokens_count(client_bin: Path, tmp_path: Path) -> None:
    """A sub-agent run in the foreground spends tokens the ``result``'s ``usage`` leaves out (its cost
    counts them): the iteration records every request's tokens, and the cost of those."""
    turns = with_subagent("Done. <promise>COMPLETE</promise>")
    loop = run_loop(
        client_bin / "claude", tmp_path, "stream-json", [*turns], "--max-iterations", "1", tools="Agent"
    )
    assert loop.proc.returncode == 0, loop.proc.stdout + loop.proc.stderr
    assert len(loop.served) == 3
    (turn,) = loop.turns()
    want = tokens(loop.served)
    assert turn["tokens"] == want
    assert turn["cost_usd"] == pytest.approx(priced(want), abs=1e-9)

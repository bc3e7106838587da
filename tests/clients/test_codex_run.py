"""``ralph-ledger run`` with the real OpenAI Codex (``codex exec``, JSON and plain) against the
Responses mock: the ledger records, per iteration and per loop, what the mock served; only the
final answer completes the loop; a usage limit is waited out; a failed run fails its iteration.

Each class shares one loop among its assertions (one real run of ``ralph-ledger run``)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from ledger.drivers.runner.limits import MARGIN_S
from tests.clients.codex_client import (
    JSON,
    PLAIN,
    PROMISE,
    PROMPT,
    codex_env,
    commentary_then_done,
    expected,
    limited_then_done,
    two_iterations,
    unauthorized_always,
)
from tests.clients.mocks.base import MockAPI, Reply, Script, Turn
from tests.clients.mocks.responses import MODEL, ResponsesAPI, usage_limit
from tests.journeys.conftest import GIT, script

pytestmark = pytest.mark.clients


@dataclass
class Loop:
    """One ``ralph-ledger run`` of Codex: its exit, output, journal and what the mock served."""

    proc: subprocess.CompletedProcess[str]
    events: list[dict[str, Any]]
    api: MockAPI
    project: Path

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The journal's events of type ``kind``."""
        return [e for e in self.events if e["type"] == kind]

    def sql(self, query: str) -> list[dict[str, Any]]:
        """The rows of ``ralph-ledger sql --json QUERY`` on the loop's ledger."""
        argv = [script("ralph-ledger"), "--home", str(self.project / ".ralph"), "sql", "--json", query]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        rows: list[dict[str, Any]] = json.loads(done.stdout)
        return rows


def price(tokens: dict[str, int]) -> float:
    """What ``tokens`` cost on ``MODEL`` by genai-prices (input there counts cache reads and writes)."""
    from genai_prices import Usage as Priced
    from genai_prices import calc_price

    usage = Priced(
        input_tokens=tokens["input"] + tokens["cache_read"] + tokens["cache_creation"],
        cache_read_tokens=tokens["cache_read"],
        cache_write_tokens=tokens["cache_creation"],
        output_tokens=tokens["output"],
    )
    return float(calc_price(usage, model_ref=MODEL).total_price)


def run_codex(
    tmp: Path,
    client_bin: Path,
    script_: Script,
    args: tuple[str, ...],
    *run_args: str,
    git: bool = False,
) -> Loop:
    """``ralph-ledger run --session s1 --prompt PROMPT.md RUN_ARGS -- codex ARGS`` in a fresh project
    (a git repository when ``git``), Codex pointed at a mock serving ``script_``."""
    project = tmp / "project"
    project.mkdir(parents=True)
    (project / "PROMPT.md").write_text(PROMPT)
    if git:
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
        (project / ".gitignore").write_text(".ralph/\n")
        subprocess.run([*GIT, "add", "-A"], cwd=project, check=True)
        subprocess.run([*GIT, "commit", "-qm", "init"], cwd=project, check=True)
    with ResponsesAPI(script_) as api:
        env = codex_env(tmp, api.url, client_bin)
        env["RALPH_HOME"] = str(project / ".ralph")
        argv = [script("ralph-ledger"), "run", "--session", "s1", "--prompt", "PROMPT.md", *run_args]
        proc = subprocess.run(
            [*argv, "--", str(client_bin / "codex"), *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    journal = project / ".ralph" / "journals" / "s1.jsonl"
    events = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    return Loop(proc, events, api, project)


def tokens(turn: dict[str, Any]) -> dict[str, int]:
    """An ``agent_turn``'s four token counts."""
    t = turn["tokens"]
    return {k: int(t.get(k, 0)) for k in ("input", "output", "cache_read", "cache_creation")}


def total(turns: list[dict[str, Any]]) -> dict[str, int]:
    """The loop's token counts: its turns' summed."""
    sums = {"input": 0, "output": 0, "cache_read": 0, "cache_creation": 0}
    for turn in turns:
        for k, v in tokens(turn).items():
            sums[k] += v
    return sums


# ----------------------------------------------------------------------------- codex exec --json
class TestJson:
    """Two iterations of ``codex exec --json`` outside git: the first reasons about the promise,
    runs a command echoing it and adds ``notes.txt``; the second answers with the promise."""

    @pytest.fixture(scope="class")
    @classmethod
    def loop(cls, client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Loop:
        first, second = two_iterations()
        return run_codex(tmp_path_factory.mktemp("codex-json"), client_bin, Script(first + second), JSON)

    def test_completes_on_the_second_answer_only(self, loop: Loop) -> None:
        assert loop.proc.returncode == 0, loop.proc.stdout + loop.proc.stderr
        turns = loop.of("agent_turn")
        assert [t["iteration"] for t in turns] == [1, 2]  # not on the reasoning nor the command's echo
        assert [c["iteration"] for c in loop.of("session_completed")] == [2]

    def test_final_text_is_the_answer(self, loop: Loop) -> None:
        first, second = two_iterations()
        turns = loop.of("agent_turn")
        assert [t["output_excerpt"] for t in turns] == [first[-1].text, second[-1].text]

    def test_tokens_per_iteration_and_per_loop_are_what_was_served(self, loop: Loop) -> None:
        first, second = two_iterations()
        assert [r.usage for r in loop.api.replies()] == [r.usage for r in first + second]
        turns = loop.of("agent_turn")
        assert [tokens(t) for t in turns] == [expected(first), expected(second)]
        assert total(turns) == expected(loop.api.replies())
        assert expected(first)["cache_creation"] > 0  # cache writes were served and recorded

    def test_model_from_the_command_and_cost_from_its_prices(self, loop: Loop) -> None:
        """Codex names no model in its stream: the one ``-m`` asked for is recorded and priced."""
        first, second = two_iterations()
        assert [t["model"] for t in loop.of("agent_turn")] == [MODEL, MODEL]
        rows = loop.sql("SELECT iteration, cost_usd FROM turn_costs ORDER BY seq")
        want = [price(expected(first)), price(expected(second))]
        assert [r["iteration"] for r in rows] == [1, 2]
        assert [r["cost_usd"] for r in rows] == pytest.approx(want, rel=1e-9)
        (session,) = loop.sql("SELECT cost_usd, tokens FROM sessions")
        assert session["cost_usd"] == pytest.approx(sum(want), abs=1e-9)
        assert session["tokens"] == sum(expected(loop.api.replies()).values())

    def test_tool_calls_and_files_relative_to_the_project(self, loop: Loop) -> None:
        turns = loop.of("agent_turn")
        assert [t["tool_count"] for t in turns] == [2, 0]  # the command and the patch
        assert [t["files_modified"] for t in turns] == [["notes.txt"], []]
        assert (loop.project / "notes.txt").read_text() == "hello\n"


# ----------------------------------------------------------------------------- plain codex exec
class TestPlain:
    """The same two iterations with plain ``codex exec`` in a git project: Codex echoes the prompt
    (with the promise words), its reasoning and the command's output on stderr; stdout is its final
    answer alone."""

    @pytest.fixture(scope="class")
    @classmethod
    def loop(cls, client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Loop:
        first, second = two_iterations()
        tmp = tmp_path_factory.mktemp("codex-plain")
        return run_codex(tmp, client_bin, Script(first + second), PLAIN, git=True)

    def test_echo_on_stderr_does_not_complete(self, loop: Loop) -> None:
        assert loop.proc.returncode == 0, loop.proc.stdout + loop.proc.stderr
        turns = loop.of("agent_turn")
        assert [t["iteration"] for t in turns] == [1, 2]
        assert PROMISE in turns[0]["stderr_excerpt"]  # echoed there, and not taken for the answer
        assert [c["iteration"] for c in loop.of("session_completed")] == [2]

    def test_final_text_is_stdout(self, loop: Loop) -> None:
        first, second = two_iterations()
        texts = [t["output_excerpt"].strip() for t in loop.of("agent_turn")]
        assert texts == [first[-1].text, second[-1].text]

    def test_files_from_git_and_no_tokens(self, loop: Loop) -> None:
        turns = loop.of("agent_turn")
        assert [t["files_modified"] for t in turns] == [["notes.txt"], []]
        assert all(sum(tokens(t).values()) == 0 for t in turns)  # plain Codex prints a total only
        assert [t["tool_count"] for t in turns] == [0, 0]
        assert [t["model"] for t in turns] == [MODEL, MODEL]  # from -m
        (session,) = loop.sql("SELECT cost_usd FROM sessions")
        assert session["cost_usd"] is None  # unknown, not nothing


# ----------------------------------------------------------------------------- usage limits
class TestUsageLimitJson:
    """``codex exec --json`` hits the plan's usage limit ("You’ve hit your usage limit ... try again
    later.", a typographic apostrophe): the same iteration runs again. That run says the promise in
    a message before a command, its last request answering nothing: commentary, not the answer; the
    second iteration completes."""

    @pytest.fixture(scope="class")
    @classmethod
    def loop(cls, client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Loop:
        tmp = tmp_path_factory.mktemp("codex-limit-json")
        first, second = commentary_then_done()
        turns: list[Turn] = [usage_limit(None), *first, *second]
        return run_codex(tmp, client_bin, Script(turns), JSON, "--rate-limit-wait", "0.1")

    def test_limit_is_waited_out_not_an_iteration(self, loop: Loop) -> None:
        assert loop.proc.returncode == 0, loop.proc.stdout + loop.proc.stderr
        (limited,) = loop.of("rate_limited")
        assert limited["iteration"] == 1
        assert limited["reason"].startswith("You've hit your usage limit.")
        assert limited["wait_s"] == pytest.approx(0.1)
        assert [t["iteration"] for t in loop.of("agent_turn")] == [1, 2]  # the limited run is none
        assert total(loop.of("agent_turn")) == expected(loop.api.replies())

    def test_commentary_before_a_call_does_not_complete(self, loop: Loop) -> None:
        first, second = commentary_then_done()
        turns = loop.of("agent_turn")
        assert [t["output_excerpt"] for t in turns] == ["", second[-1].text]
        assert [tokens(t) for t in turns] == [expected(first), expected(second)]
        assert [t["tool_count"] for t in turns] == [1, 0]
        assert [c["iteration"] for c in loop.of("session_completed")] == [2]


class TestUsageLimitPlain:
    """Plain ``codex exec`` says the limit on stderr (``ERROR: You’ve hit your usage limit ... try
    again at 5:07 AM.``); the loop waits until that minute (plus the margin) and runs it again."""

    @pytest.fixture(scope="class")
    @classmethod
    def loop(cls, client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Loop:
        tmp = tmp_path_factory.mktemp("codex-limit-plain")
        turns = limited_then_done(int(time.time()))  # Codex says its minute: past when it is read
        return run_codex(tmp, client_bin, Script(turns), PLAIN, "--rate-limit-wait", "0.1")

    def test_limit_with_its_reset_time_is_waited_out(self, loop: Loop) -> None:
        assert loop.proc.returncode == 0, loop.proc.stdout + loop.proc.stderr
        (limited,) = loop.of("rate_limited")
        assert limited["reason"].startswith("You've hit your usage limit.")
        served = loop.api.served[0].turn
        assert not isinstance(served, Reply) and isinstance(served.body, dict)
        reset = datetime.fromtimestamp(served.body["error"]["resets_at"]).astimezone()
        said = datetime.fromisoformat(limited["resets_at"])
        assert said == reset.replace(second=0, microsecond=0)  # Codex says the minute
        assert limited["wait_s"] == pytest.approx(MARGIN_S, abs=0.5)
        assert [t["iteration"] for t in loop.of("agent_turn")] == [1]
        assert [c["iteration"] for c in loop.of("session_completed")] == [1]


# ----------------------------------------------------------------------------- a failed run
class TestUnauthorized:
    """A wrong API key: Codex's stream ends on ``error`` / ``turn.failed`` (401) and it exits 1; the
    iteration fails, saying why (not Codex's last stderr line, a warning), and never completes."""

    @pytest.fixture(scope="class")
    @classmethod
    def loop(cls, client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Loop:
        tmp = tmp_path_factory.mktemp("codex-401")
        return run_codex(tmp, client_bin, unauthorized_always(), JSON, "--max-iterations", "1")

    def test_the_iteration_fails_naming_the_error(self, loop: Loop) -> None:
        assert loop.proc.returncode != 0, loop.proc.stdout
        turns = loop.of("agent_turn")
        assert [t["iteration"] for t in turns] == [1]
        assert turns[0]["failure"].startswith("agent exited 1: unexpected status 401 Unauthorized")
        assert [r["passed"] for r in loop.of("validation_ran")] == [False]
        assert not loop.of("session_completed")
        assert not loop.of("rate_limited")

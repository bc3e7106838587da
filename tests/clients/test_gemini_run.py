"""``ralph-ledger run`` with the real Gemini CLI 0.61.0 (``-o stream-json``, ``-o json``, plain) against
the ``streamGenerateContent`` mock: per iteration and per loop the ledger records what the mock
served (thoughts as output, each model priced at its own price: Gemini CLI's router included); only
the final answer completes the loop; a 429 is waited out with its whole reason; plain mode is refused.

Each class shares one loop among its assertions (one real run of ``ralph-ledger run``)."""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.clients.gemini_client import (
    PROMISE,
    Loop,
    complete,
    gemini_env,
    ledger_tokens,
    price,
    project,
    run_gemini,
    write_then_continue,
)
from tests.clients.mocks.base import Reply, Script, Usage
from tests.clients.mocks.gemini import FLASH_AUTO, MODEL, ROUTER_MODEL, GeminiAPI, quota_exceeded
from tests.journeys.conftest import script

pytestmark = pytest.mark.clients

TURNS = [2, 1]
"""The model turns of each iteration of the two-iteration loops."""


def two_iterations(tmp: Path, **api: Any) -> GeminiAPI:
    """The mock of a loop that writes notes.txt and continues, then completes."""
    notes = str(tmp / "project" / "notes.txt")
    return GeminiAPI(Script([*write_then_continue(notes), *complete()]), **api)


def turns_of(loop: Loop) -> dict[int, list[dict[str, Any]]]:
    """Each iteration's recorded token rows: its ``agent_turn`` and ``model_tokens`` events."""
    out: dict[int, list[dict[str, Any]]] = {}
    for e in loop.events:
        if e["type"] in ("agent_turn", "model_tokens"):
            out.setdefault(e["iteration"], []).append(e)
    return out


def by_model(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """An iteration's recorded tokens by model."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        t = r.get("tokens", {})
        got = {k: int(t.get(k, 0)) for k in ("input", "output", "cache_read")}
        assert int(t.get("cache_creation", 0)) == 0  # Gemini reports no cache writes
        assert r["model"] not in out  # one row per model
        out[r["model"]] = got
    return out


def check_served(loop: Loop, turns: list[int]) -> Usage:
    """Per iteration and per loop, the ledger's tokens and cost equal what the mock served, each
    model's tokens priced at that model (a priced cost, never none); the loop's usage served."""
    served = loop.api.runs(turns)
    recorded = turns_of(loop)
    assert sorted(recorded) == list(range(1, len(turns) + 1))
    rows = loop.ledger()
    iterations = {r["iteration"]: r for r in rows}
    loop_cost, loop_total = 0.0, Usage()
    for n, models in enumerate(served, start=1):
        assert by_model(recorded[n]) == {m: ledger_tokens(u) for m, u in models.items()}
        total = Usage()
        for u in models.values():
            total = total + u
        loop_total = loop_total + total
        cost = sum(price(m, u) for m, u in models.items())
        loop_cost += cost
        row = iterations[n]
        assert (row["tokens_input"], row["tokens_output"], row["tokens_cache"]) == (
            total.input,
            total.output + total.thoughts,
            total.cache_read,
        )
        assert row["cost_usd"] == pytest.approx(cost, abs=1e-9)
    spent = loop_total.input + loop_total.output + loop_total.thoughts + loop_total.cache_read
    assert rows[-1]["session_tokens"] == spent
    assert rows[-1]["session_cost"] == pytest.approx(loop_cost, abs=1e-9)
    assert loop_cost > 0
    return loop_total


@pytest.fixture(scope="module")
def stream_loop(tmp_path_factory: pytest.TempPathFactory, client_bin: Path) -> Loop:
    """``gemini -o stream-json --yolo`` (the README's invocation: no ``-m``, so Gemini CLI's router
    chooses: pro for iteration 1, flash for iteration 2), two iterations."""
    tmp = tmp_path_factory.mktemp("gemini-stream")
    api = two_iterations(tmp, route_scores=(90, 10))
    return run_gemini(tmp, client_bin / "gemini", api, ["-o", "stream-json", "--yolo"])


@pytest.fixture(scope="module")
def json_loop(tmp_path_factory: pytest.TempPathFactory, client_bin: Path) -> Loop:
    """``gemini -o json --yolo -m gemini-2.5-pro``: one pretty-printed object per run."""
    tmp = tmp_path_factory.mktemp("gemini-json")
    args = ["-o", "json", "--yolo", "-m", MODEL]
    return run_gemini(tmp, client_bin / "gemini", two_iterations(tmp), args)


@pytest.fixture(scope="module")
def limited_loop(tmp_path_factory: pytest.TempPathFactory, client_bin: Path) -> Loop:
    """A free-tier 429 (per minute, ``Please retry in 1.18…s``; the CLI's retries capped at one
    attempt), then a reply."""
    tmp = tmp_path_factory.mktemp("gemini-429")
    done = Reply(text=f"Done. {PROMISE}", usage=Usage(input=900, output=12, thoughts=20))
    api = GeminiAPI(Script([quota_exceeded(per="Minute", retry_s=1), done]))
    args = ["-o", "stream-json", "--yolo", "-m", MODEL]
    return run_gemini(tmp, client_bin / "gemini", api, args, max_attempts=1)


class TestStreamJsonAuto:
    """``gemini -o stream-json --yolo``, no ``-m``: two iterations, three models."""

    @pytest.fixture
    def loop(self, stream_loop: Loop) -> Loop:
        return stream_loop

    def test_it_completes_on_the_final_answer_of_iteration_2(self, loop: Loop) -> None:
        assert loop.proc.returncode == 0, loop.proc.stdout + loop.proc.stderr
        [done] = loop.of("session_completed")
        assert done["iteration"] == 2  # not on iteration 1's commentary, nor on the prompt
        first, second = loop.of("agent_turn")
        assert PROMISE not in first["output_excerpt"] or "CONTINUE" in first["output_excerpt"]
        assert second["output_excerpt"].endswith(PROMISE)

    def test_tokens_and_cost_equal_what_was_served_thoughts_and_router_included(self, loop: Loop) -> None:
        assert check_served(loop, TURNS).thoughts > 0  # not vacuous

    def test_the_real_models_are_recorded_and_priced(self, loop: Loop) -> None:
        first, second = loop.of("agent_turn")
        served = loop.api.runs(TURNS)
        assert ROUTER_MODEL in served[0] and ROUTER_MODEL in served[1]
        assert first["model"] == next(m for m in served[0] if m != ROUTER_MODEL)
        assert second["model"] == FLASH_AUTO  # the router chose flash for iteration 2
        assert {e["model"] for e in loop.of("model_tokens")} == {ROUTER_MODEL}
        turns = [t for row in loop.ledger() for t in row["turns"]]
        assert len(turns) == 4 and all(t["cost"] and t["cost"] > 0 for t in turns), turns  # all priced
        assert "auto" not in {t["model"] for t in turns}

    def test_the_tool_call_and_the_file_are_recorded(self, loop: Loop) -> None:
        first, second = loop.of("agent_turn")
        assert (first["tool_count"], first["files_modified"]) == (1, ["notes.txt"])
        assert (second.get("tool_count", 0), second.get("files_modified", [])) == (0, [])
        assert (loop.root / "notes.txt").read_text() == "hello\n"


class TestJsonWithModel:
    """``gemini -o json --yolo -m gemini-2.5-pro``: two iterations, one model."""

    @pytest.fixture
    def loop(self, json_loop: Loop) -> Loop:
        return json_loop

    def test_it_completes_on_the_final_answer_of_iteration_2(self, loop: Loop) -> None:
        assert loop.proc.returncode == 0, loop.proc.stdout + loop.proc.stderr
        [done] = loop.of("session_completed")
        assert done["iteration"] == 2
        first, second = loop.of("agent_turn")
        assert first["output_excerpt"] == write_then_continue("")[-1].text  # the final text only
        assert second["output_excerpt"] == complete()[-1].text

    def test_tokens_and_cost_equal_what_the_mock_served(self, loop: Loop) -> None:
        assert check_served(loop, TURNS).thoughts > 0
        assert {t["model"] for t in loop.of("agent_turn")} == {MODEL}
        assert not loop.of("model_tokens")  # one model: no router with -m

    def test_the_tool_call_and_the_file_are_recorded(self, loop: Loop) -> None:
        first, _ = loop.of("agent_turn")
        assert (first["tool_count"], first["files_modified"]) == (1, ["notes.txt"])


class TestRateLimit:
    """A free-tier 429 (per minute, ``Please retry in 1.18…s``), then a reply: the run is recorded
    rate limited, with the CLI's whole reason, and the same iteration runs again and completes."""

    @pytest.fixture
    def loop(self, limited_loop: Loop) -> Loop:
        return limited_loop

    def test_the_limit_is_recorded_whole_and_waited_out(self, loop: Loop) -> None:
        assert loop.proc.returncode == 0, loop.proc.stdout + loop.proc.stderr
        [limited] = loop.of("rate_limited")
        reason = limited["reason"]
        assert reason.startswith("[API Error: You exceeded your current quota") and reason.endswith("]")
        assert "Please retry in 1.185908122s." in reason and "Suggested retry after 1s." in reason
        assert "\n" not in reason
        waited = datetime.fromisoformat(limited["resets_at"]) - datetime.fromisoformat(limited["ts"])
        assert 0.5 < waited.total_seconds() < 2.5  # the reset the CLI gave
        [done] = loop.of("session_completed")
        assert done["iteration"] == 1

    def test_tokens_equal_what_the_mock_served(self, loop: Loop) -> None:
        assert check_served(loop, [1]).thoughts > 0


def test_plain_mode_echoes_commentary_so_run_refuses_it(tmp_path: Path, client_bin: Path) -> None:
    """Plain ``gemini --yolo`` writes every model turn's text to stdout, the commentary before a
    tool call included, so a promise there cannot be told from the final answer: ``run`` refuses
    plain Gemini in one line naming ``-o stream-json`` (exit 2)."""
    gemini = client_bin / "gemini"
    notes = str(tmp_path / "project" / "notes.txt")
    root = project(tmp_path)
    with GeminiAPI(Script(write_then_continue(notes))) as api:
        plain = subprocess.run(
            [str(gemini), "--yolo", "-m", MODEL],
            input="write notes",
            cwd=root,
            env=gemini_env(tmp_path, api.url),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert plain.returncode == 0, plain.stderr
        assert PROMISE in plain.stdout and plain.stdout.rstrip().endswith("CONTINUE")  # echo on stdout
        env = gemini_env(tmp_path, api.url)
        env["RALPH_HOME"] = str(root / ".ralph")
        for args in (["--yolo"], ["--yolo", "-m", MODEL], ["-o", "text", "--yolo"]):
            argv = [script("ralph-ledger"), "run", "--prompt", "PROMPT.md", "--", str(gemini), *args]
            refused = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=60)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            [line] = refused.stderr.strip().splitlines()
            assert "-o stream-json" in line
        assert len(api.served) == 2  # only the plain run above reached the model


def test_an_empty_answer_fails_its_iteration_though_gemini_exits_0(tmp_path: Path, client_bin: Path) -> None:
    """A model turn with nothing in it: Gemini CLI 0.61.0 ends with a ``result`` of ``status``
    ``error`` and exits 0; the iteration fails, naming the CLI's error (the circuit breaker sees it)."""
    empty = Reply(usage=Usage(input=10))
    api = GeminiAPI(Script([empty], after=empty))
    args = ["-o", "stream-json", "--yolo", "-m", MODEL]
    loop = run_gemini(tmp_path, client_bin / "gemini", api, args, "--max-iterations", "1", max_attempts=1)
    assert loop.proc.returncode != 0 and not loop.of("session_completed")
    [turn] = loop.of("agent_turn")
    assert turn["failure"] == (
        "agent reported: The model returned an empty response with no text or thoughts. "
        "This may be a transient API issue; please try again."
    )
    [validation] = loop.of("validation_ran")
    assert not validation["passed"]
    check_served(loop, [1])

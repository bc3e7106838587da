"""The recorded sample sessions (``sample_sessions/*.jsonl``).

They are exactly what ``sample_sessions/record.py`` records today (the real runner, engine and
Stop hook against scripted agents and real pytest), and each one, replayed through the ledger,
gives the snapshotted ``sessions`` row, ``iterations`` rows, detector rows and engine decisions,
with the key facts of its scenario asserted by hand as well.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from syrupy.assertion import SnapshotAssertion

from ledger import events as E
from ledger.loop.decide.guards import GuardConfig
from ledger.storage.database import Ledger
from ledger.storage.ingest import IngestReport
from ledger.storage.journal import Journal
from sample_sessions.record import CLAUDE_SESSION, SCENARIOS, differences, expected_files, record_all

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_sessions"
FILES = sorted(p.name for p in SAMPLES.glob("*.jsonl"))
CC = f"cc-{CLAUDE_SESSION}"

# The engine's decisions, reduced to the fields that say what was decided.
DECISIONS: dict[str, tuple[str, ...]] = {
    "hook_decided": ("hook_id", "action", "reason", "error"),
    "guard_tripped": ("guard", "signal", "detail"),
    "signal_resolved": ("signal", "passed", "promise"),
    "stop_decided": ("decision", "reason"),
    "session_completed": ("promise", "total_iterations", "score", "reason"),
    "session_blocked": ("reason",),
    "session_escalated": ("guard", "reason"),
}


def test_recording_matches_committed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh recording is byte for byte the committed samples (the Claude Code one only when
    ../shared is there), also under a CI environment (pytest reports more when it sees ``CI``)."""
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("BUILD_NUMBER", "1")
    started = time.perf_counter()
    names = record_all(tmp_path, jobs=min(2, os.cpu_count() or 1), log=lambda line: None)
    elapsed = time.perf_counter() - started
    assert names == expected_files()
    diffs = differences(tmp_path, SAMPLES, names)
    assert not diffs, "run sample_sessions/record.py and review the diff:\n" + json.dumps(diffs, indent=1)
    print(f"recorded {len(names)} sample sessions in {elapsed:.1f} s")


def test_every_sample_file_has_a_scenario_and_a_readme_line() -> None:
    """No stray sample: each file is recorded by a scenario and listed in the README."""
    assert sorted(s.file_name for s in SCENARIOS) == FILES
    readme = (SAMPLES / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in FILES)


# ----------------------------------------------------------------------------- replay
def replay(path: Path) -> tuple[Ledger, IngestReport]:
    """An in-memory ledger holding one journal's events."""
    ledger = Ledger.memory()
    return ledger, ledger.ingest([path])


@pytest.fixture
def replayed(request: pytest.FixtureRequest) -> Iterator[tuple[str, Ledger, IngestReport]]:
    """(session id, ledger, ingest report) of the sample file named by the parameter."""
    name: str = request.param
    ledger, report = replay(SAMPLES / name)
    yield name.removesuffix(".jsonl"), ledger, report
    ledger.close()


def guard_config(ledger: Ledger, sid: str) -> GuardConfig:
    """The guard settings the session was recorded with (defaults when it names none)."""
    (config,) = ledger.con.execute(
        "SELECT config FROM events WHERE session_id = ? AND type = 'session_started'", [sid]
    ).fetchone() or ("{}",)
    return msgspec.convert(json.loads(config).get("guards", {}), GuardConfig)


def decisions(ledger: Ledger, sid: str) -> list[dict[str, Any]]:
    """The engine's (or the hook's) decisions in order, each reduced to its decision fields."""
    rows = ledger.rows(
        "SELECT * FROM events WHERE session_id = ? AND list_contains(?, type) ORDER BY seq",
        [sid, list(DECISIONS)],
    )
    return [
        {"iteration": r["iteration"], "type": r["type"], **{k: r[k] for k in DECISIONS[r["type"]]}}
        for r in rows
    ]


def detectors(ledger: Ledger, sid: str) -> dict[str, list[dict[str, Any]]]:
    """Every detector over the session, with the thresholds its guards used."""
    cfg = guard_config(ledger, sid)
    qr = cfg.quality_regression
    return {
        "failure_streak": ledger.rows("SELECT * FROM failure_streak(session := ?)", [sid]),
        "error_streak": ledger.rows("SELECT * FROM failure_streak(session := ?, errors := TRUE)", [sid]),
        "quality_regression": ledger.rows(
            "SELECT * FROM quality_regression(session := ?, span := ?, min_drop := ?) ORDER BY iteration",
            [sid, qr.span, qr.min_drop],
        ),
        "thrashing": ledger.rows(
            "SELECT * FROM thrashing(session := ?, min_iterations := ?) ORDER BY file",
            [sid, cfg.thrashing.min_iterations],
        ),
        "validation_stall": ledger.rows(
            "SELECT * FROM validation_stall(session := ?, span := ?) ORDER BY iteration",
            [sid, cfg.validation_stall.span],
        ),
    }


def replay_view(ledger: Ledger, sid: str) -> dict[str, Any]:
    """Everything the snapshot holds for one session."""
    return {
        "session": ledger.rows("SELECT * FROM sessions WHERE session_id = ?", [sid]),
        "iterations": ledger.rows("SELECT * FROM iterations WHERE session_id = ? ORDER BY iteration", [sid]),
        "detectors": detectors(ledger, sid),
        "decisions": decisions(ledger, sid),
    }


@pytest.mark.parametrize("replayed", FILES, indirect=True)
def test_replay_snapshot(replayed: tuple[str, Ledger, IngestReport], snapshot: SnapshotAssertion) -> None:
    """The session's views, detectors and decisions, as reviewed in ``snapshots/test_samples.ambr``."""
    sid, ledger, _ = replayed
    assert replay_view(ledger, sid) == snapshot


# ----------------------------------------------------------------------------- key facts
def one(ledger: Ledger, sql: str, sid: str) -> dict[str, Any]:
    """The only row of ``sql`` for the session."""
    (row,) = ledger.rows(sql, [sid])
    return row


def session(ledger: Ledger, sid: str) -> dict[str, Any]:
    """The session's ``sessions`` row."""
    return one(ledger, "SELECT * FROM sessions WHERE session_id = ?", sid)


def scores(ledger: Ledger, sid: str) -> list[float]:
    """The score of each iteration, in order."""
    rows = ledger.rows("SELECT score FROM iteration_scores WHERE session_id = ? ORDER BY iteration", [sid])
    return [r["score"] for r in rows]


def trips(ledger: Ledger, sid: str) -> list[tuple[int, str, str]]:
    """(iteration, guard, signal) of each guard trip."""
    rows = ledger.rows(
        "SELECT iteration, guard, signal FROM guard_trips WHERE session_id = ? ORDER BY seq", [sid]
    )
    return [(r["iteration"], r["guard"], r["signal"]) for r in rows]


def ending(ledger: Ledger, sid: str) -> dict[str, Any]:
    """The last decision recorded."""
    return decisions(ledger, sid)[-1]


def check_tdd_success(ledger: Ledger, sid: str) -> None:
    """TDD: red, then lint, then green and COMPLETE."""
    assert (session(ledger, sid)["status"], session(ledger, sid)["iteration"]) == ("complete", 3)
    assert scores(ledger, sid) == [50.0, 50.0, 100.0]  # red (tests), then lint, then all green
    rules = ledger.rows(
        "SELECT iteration, rule, passed FROM rule_results WHERE session_id = ? ORDER BY seq, rule", [sid]
    )
    failing = [(r["iteration"], r["rule"]) for r in rules if not r["passed"]]
    assert failing == [(1, "tests_pass"), (2, "lint_clean")]
    assert ending(ledger, sid) == {
        "iteration": 3,
        "type": "session_completed",
        "promise": "COMPLETE",
        "total_iterations": 3,
        "score": 100.0,
        "reason": "",
    }
    assert trips(ledger, sid) == []


def check_circuit_breaker(ledger: Ledger, sid: str) -> None:
    """Three failures in a row trip the circuit breaker, which escalates."""
    row = session(ledger, sid)
    assert (row["status"], row["last_signal"], row["consecutive_failures"]) == ("escalated", "ESCALATE", 3)
    assert trips(ledger, sid) == [(3, "circuit_breaker", "ESCALATE")]
    assert ending(ledger, sid)["guard"] == "circuit_breaker"
    streak = detectors(ledger, sid)["failure_streak"]
    assert [(r["streak"], r["since_iteration"]) for r in streak] == [(3, 1)]


def check_quality_regression(ledger: Ledger, sid: str) -> None:
    """Scores 100, 75, 50: the regression detector fires at iteration 3 and the guard escalates."""
    assert scores(ledger, sid) == [100.0, 75.0, 50.0]
    (hit,) = detectors(ledger, sid)["quality_regression"]
    assert (hit["iteration"], hit["first_score"], hit["score"], hit["drop"]) == (3, 100.0, 50.0, 50.0)
    assert trips(ledger, sid) == [(3, "quality_regression", "ESCALATE")]
    assert session(ledger, sid)["status"] == "escalated"


def check_thrashing(ledger: Ledger, sid: str) -> None:
    """calc.py modified in 5 iterations: the detector names it and the guard blocks."""
    (hit,) = detectors(ledger, sid)["thrashing"]
    assert (hit["file"], hit["times"], hit["iterations"], hit["tripped_at"]) == (
        "calc.py",
        5,
        [1, 2, 3, 4, 5],
        5,
    )
    assert scores(ledger, sid) == [100.0] * 5  # never failing: only thrashing catches it
    assert trips(ledger, sid) == [(5, "thrashing", "BLOCKED")]
    assert session(ledger, sid)["status"] == "blocked"


def check_blocked(ledger: Ledger, sid: str) -> None:
    """The BLOCKED promise, its reason and summary, block the loop; no guard involved."""
    (promise,) = ledger.rows(
        "SELECT iteration, promise, signal, reason, summary FROM events "
        "WHERE session_id = ? AND type = 'promise_detected'",
        [sid],
    )
    assert (promise["iteration"], promise["promise"], promise["signal"]) == (2, "BLOCKED", "BLOCKED")
    assert promise["reason"].startswith("Needs a product decision") and promise["summary"]
    assert trips(ledger, sid) == []
    assert (session(ledger, sid)["status"], ending(ledger, sid)["type"]) == ("blocked", "session_blocked")


def check_max_iterations(ledger: Ledger, sid: str) -> None:
    """The last allowed iteration ends without a promise: escalated by max_iterations."""
    row = session(ledger, sid)
    assert (row["status"], row["iteration"], row["max_iterations"]) == ("escalated", 4, 4)
    assert scores(ledger, sid) == [100.0] * 4  # every iteration passed, none promised COMPLETE
    assert trips(ledger, sid) == [(4, "max_iterations", "ESCALATE")]
    assert ending(ledger, sid)["guard"] == "max_iterations"


def check_validation_stall(ledger: Ledger, sid: str) -> None:
    """Score stuck at 50 for 4 iterations: the stall detector fires at iteration 4."""
    assert scores(ledger, sid) == [50.0] * 4
    (hit,) = detectors(ledger, sid)["validation_stall"]
    assert (hit["iteration"], hit["score"], hit["best_before"]) == (4, 50.0, 50.0)
    assert guard_config(ledger, sid).circuit_breaker.threshold == 5  # so the breaker (4 failures) stays shut
    assert trips(ledger, sid) == [(4, "validation_stall", "ESCALATE")]


def check_time_limit(ledger: Ledger, sid: str) -> None:
    """The elapsed time passes the session's 240 s limit: blocked by time_limit."""
    (trip,) = ledger.rows("SELECT iteration, guard, evidence FROM guard_trips WHERE session_id = ?", [sid])
    assert (trip["iteration"], trip["guard"]) == (4, "time_limit")
    assert json.loads(trip["evidence"])["elapsed_s"] > guard_config(ledger, sid).time_limit.seconds == 240
    assert session(ledger, sid)["status"] == "blocked"


def check_hook_failure(ledger: Ledger, sid: str) -> None:
    """The custom hook raised: escalated with "Hook evaluation failed", no guard."""
    failed = [d for d in decisions(ledger, sid) if d["type"] == "hook_decided" and d["error"]]
    assert [(d["iteration"], d["hook_id"], d["action"]) for d in failed] == [(2, "status-file", "escalate")]
    assert failed[0]["reason"].startswith("Hook evaluation failed: .agent/status.json: Unterminated string")
    assert scores(ledger, sid) == [0.0, 100.0]  # the tests passed: the hook alone escalated
    assert trips(ledger, sid) == []
    assert (session(ledger, sid)["status"], ending(ledger, sid)["guard"]) == ("escalated", "")


def check_loop_done(ledger: Ledger, sid: str) -> None:
    """The loop vocabulary's LOOP_CONTINUE, LOOP_CONTINUE, LOOP_DONE, with their contexts."""
    promises = ledger.rows(
        "SELECT promise, signal, context FROM events "
        "WHERE session_id = ? AND type = 'promise_detected' ORDER BY seq",
        [sid],
    )
    assert [(p["promise"], p["signal"]) for p in promises] == [
        ("LOOP_CONTINUE", "CONTINUE"),
        ("LOOP_CONTINUE", "CONTINUE"),
        ("LOOP_DONE", "COMPLETE"),
    ]
    assert [p["context"]["remaining"] for p in promises] == ["2", "1", "0"]
    assert (session(ledger, sid)["status"], ending(ledger, sid)["promise"]) == ("complete", "LOOP_DONE")


def check_manual_stop(ledger: Ledger, sid: str) -> None:
    """The human's stop, recorded during iteration 2, blocks the loop at its validate."""
    row = session(ledger, sid)
    assert (row["status"], row["stop_requested"], row["last_signal"]) == ("blocked", True, "BLOCKED")
    assert row["stop_reason"].startswith("the agent is deleting a failing test")
    (override,) = ledger.rows(
        "SELECT iteration, kind FROM events WHERE session_id = ? AND type = 'override'", [sid]
    )
    assert (override["iteration"], override["kind"]) == (2, "manual_stop")
    # the validation passed and the hook said complete, but the human's stop wins
    assert [d["action"] for d in decisions(ledger, sid) if d["type"] == "hook_decided"][-1] == "complete"
    assert ending(ledger, sid)["reason"].startswith("manual stop: ")


def check_claude_code(ledger: Ledger, sid: str) -> None:
    """The Stop hook's session: block, block, allow on the promise; each stop reads only new bytes."""
    row = session(ledger, sid)
    assert (row["status"], row["agent"], row["iteration"]) == ("complete", "claude-code", 3)
    stops = [d["decision"] for d in decisions(ledger, sid) if d["type"] == "stop_decided"]
    assert stops == ["block", "block", "allow"]
    turns = ledger.rows(
        "SELECT files_modified, tool_count, transcript_offset FROM events "
        "WHERE session_id = ? AND type = 'agent_turn' ORDER BY seq",
        [sid],
    )
    offsets = [t["transcript_offset"] for t in turns]
    assert offsets == sorted(offsets) and len(set(offsets)) == 3  # each stop read only what was new
    assert ["/path/to/Demo/CLAUDE.md"] in [t["files_modified"] for t in turns]
    assert row["tokens"] > 0


def check_torn_last_line(ledger: Ledger, sid: str) -> None:
    """Every complete line is ingested; the torn tail is left unread (the offset stops before it)."""
    data = (SAMPLES / f"{sid}.jsonl").read_bytes()
    complete, tail = data[: data.rfind(b"\n") + 1], data[data.rfind(b"\n") + 1 :]
    assert tail and not tail.endswith(b"\n") and tail.startswith(b'{"type":"agent_turn"')
    events = ledger.rows("SELECT seq FROM events WHERE session_id = ? ORDER BY seq", [sid])
    assert [e["seq"] for e in events] == list(range(1, complete.count(b"\n") + 1))
    (position,) = ledger.rows("SELECT byte_offset, last_seq FROM ingest_positions")
    assert (position["byte_offset"], position["last_seq"]) == (len(complete), len(events))
    assert session(ledger, sid)["status"] == "running"


def check_agent_sample(ledger: Ledger, sid: str) -> None:
    """An agent's output replayed: the session's tokens, tool calls, model and cost are the
    sample's own, computed here from the fixture with plain JSON (``tests/unit/test_agent_formats.py``'s
    readings)."""
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

    name = sid.removeprefix("agent-")
    path, expected = {
        "claude": (CLAUDE, expected_claude),
        "codex": (CODEX, expected_codex),
        "gemini": (GEMINI_DOCS, expected_gemini),
        "opencode": (OPENCODE, expected_opencode),
        "cursor": (CURSOR, expected_cursor),
    }[name]
    report = expected(path)
    row = session(ledger, sid)
    assert (row["status"], row["agent"], row["iteration"]) == ("escalated", name, 1)
    tokens = report.tokens
    assert row["tokens"] == tokens.input + tokens.output + tokens.cache_creation + tokens.cache_read
    assert row["tokens"] > 0 or name == "cursor"  # Cursor's stream reports no tokens
    (turn,) = ledger.rows(
        "SELECT tool_count, output_excerpt, model FROM events WHERE session_id = ? AND type = 'agent_turn'",
        [sid],
    )
    assert turn["tool_count"] == report.tool_count
    assert turn["output_excerpt"] == report.text[-2000:]
    assert turn["model"] == report.model
    if report.cost_usd is not None:  # the agent's own total (Claude's result line, opencode's steps)
        assert row["cost_usd"] == pytest.approx(report.cost_usd)
    elif report.model and row["tokens"]:  # else the price library's own calculation for its model
        from genai_prices import Usage, calc_price

        usage = Usage(
            input_tokens=tokens.input + tokens.cache_read + tokens.cache_creation,
            cache_read_tokens=tokens.cache_read,
            cache_write_tokens=tokens.cache_creation,
            output_tokens=tokens.output,
        )
        assert row["cost_usd"] == pytest.approx(float(calc_price(usage, model_ref=report.model).total_price))
    else:  # no model named, or no tokens, and no cost reported: no guess
        assert row["cost_usd"] is None


def check_paused_steered(ledger: Ledger, sid: str) -> None:
    """Paused and steered during iteration 1, resumed once it was validated: the guidance starts
    iteration 2 (once), the loop completes and is no longer paused."""
    overrides = ledger.rows(
        "SELECT iteration, kind, reason FROM events WHERE session_id = ? AND type = 'override' ORDER BY seq",
        [sid],
    )
    assert [(o["iteration"], o["kind"]) for o in overrides] == [(1, "pause"), (1, "steer"), (1, "resume")]
    started = ledger.rows(
        "SELECT iteration, guidance FROM events WHERE session_id = ? AND type = 'iteration_started' "
        "ORDER BY seq",
        [sid],
    )
    assert [(r["iteration"], r["guidance"]) for r in started] == [(1, ""), (2, overrides[1]["reason"])]
    row = session(ledger, sid)
    assert (row["status"], row["paused"], row["iteration"]) == ("complete", False, 2)


def check_unblocked(ledger: Ledger, sid: str) -> None:
    """Blocked at iteration 1, unblocked with two more iterations (max 3) and guidance, complete at 2."""
    ends = ledger.rows(
        "SELECT iteration, type FROM events WHERE session_id = ? AND type IN "
        "('session_blocked', 'override', 'session_completed') ORDER BY seq",
        [sid],
    )
    assert [(e["iteration"], e["type"]) for e in ends] == [
        (1, "session_blocked"),
        (1, "override"),
        (2, "session_completed"),
    ]
    row = session(ledger, sid)
    assert (row["status"], row["max_iterations"], row["iteration"]) == ("complete", 3, 2)
    (guided,) = ledger.rows(
        "SELECT guidance FROM events WHERE session_id = ? AND type = 'iteration_started' AND iteration = 2",
        [sid],
    )
    assert guided["guidance"].startswith("Accept both")


KEY_FACTS: dict[str, Callable[[Ledger, str], None]] = {
    "tdd-success": check_tdd_success,
    "circuit-breaker": check_circuit_breaker,
    "quality-regression": check_quality_regression,
    "thrashing": check_thrashing,
    "blocked": check_blocked,
    "max-iterations": check_max_iterations,
    "validation-stall": check_validation_stall,
    "time-limit": check_time_limit,
    "hook-failure": check_hook_failure,
    "loop-done": check_loop_done,
    "manual-stop": check_manual_stop,
    CC: check_claude_code,
    "torn-last-line": check_torn_last_line,
    "paused-steered": check_paused_steered,
    "unblocked": check_unblocked,
    "agent-claude": check_agent_sample,
    "agent-codex": check_agent_sample,
    "agent-gemini": check_agent_sample,
    "agent-opencode": check_agent_sample,
    "agent-cursor": check_agent_sample,
}


def test_every_sample_has_its_key_facts_checked() -> None:
    """A new sample needs its key facts written down below."""
    assert sorted(f"{sid}.jsonl" for sid in KEY_FACTS) == FILES


@pytest.mark.parametrize("replayed", FILES, indirect=True)
def test_key_facts(replayed: tuple[str, Ledger, IngestReport]) -> None:
    """Every complete line ingests cleanly (fast path), and the scenario's key facts hold."""
    sid, ledger, report = replayed
    assert report.bad_lines == [] and report.exact_batches == 0
    KEY_FACTS[sid](ledger, sid)


def test_the_torn_line_is_kept_and_reported_once_the_journal_goes_on(tmp_path: Path) -> None:
    """Nothing is lost: the next append closes the torn line, which an ingest then reports as a bad
    line (never silently dropped), and the new event is ingested after the complete ones."""
    path = tmp_path / "torn-last-line.jsonl"
    shutil.copy(SAMPLES / path.name, path)
    ledger, first = replay(path)
    (written,) = Journal(path, fsync=False).append(
        E.ErrorRecorded(session_id="torn-last-line", component="test")
    )
    second = ledger.ingest([path])
    assert (first.events, second.events, written.seq) == (11, 1, 12)
    assert [b.reason.split(" (")[0] for b in second.bad_lines] == ["torn line"]
    assert second.bad_lines[0].line_no == 12
    ledger.close()

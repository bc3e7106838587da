"""The loop engine end to end over real journals: lifecycle, guards, overrides,
and resuming in a fresh process after a kill between any two steps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger import events as E
from ledger.core.home import Home
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.engine import Engine
from ledger.loop.engine_types import EngineError
from ledger.storage.journal import Cursor, read_new
from tests.helpers import flag_rule, ticking, validate


def events_of(engine: Engine, sid: str) -> list[E.AnyEvent]:
    return read_new(engine.journal(sid).path, Cursor()).events


def tags(engine: Engine, sid: str) -> list[str]:
    return [str(e.__struct_config__.tag) for e in events_of(engine, sid)]


def test_tdd_success_in_three_iterations(engine: Engine) -> None:
    """The TDD loop: failing test, then implementation, then lint; complete on the promise."""
    cfg = LoopConfig(
        task="POST /login",
        agent="me",
        rules=[flag_rule("tests_pass"), flag_rule("lint_clean")],
        hooks=["default"],
    )
    started = engine.start("tdd", cfg)
    assert (started.iteration, started.max_iterations) == (1, 15)
    r1 = validate(engine, "tdd", "Wrote a failing test", files_modified=["tests/test_login.py"])
    assert (r1.signal, r1.validation_passed, r1.score) == ("CONTINUE", False, 0.0)
    assert r1.next_prompt.startswith("Fix the failing validation rules")
    assert engine.next("tdd").iteration == 2
    (engine.work_dir / "tests_pass.ok").touch()
    r2 = validate(engine, "tdd", "Implemented login", files_modified=["src/login.py"])
    assert (r2.signal, r2.score) == ("CONTINUE", 50.0)
    engine.next("tdd")
    (engine.work_dir / "lint_clean.ok").touch()
    r3 = validate(engine, "tdd", "All green.\n<promise>COMPLETE</promise>\nSummary: 2 rules pass")
    assert (r3.signal, r3.detected_promise, r3.validation_passed) == ("COMPLETE", "COMPLETE", True)
    done = engine.complete("tdd", "COMPLETE")
    assert (done.total_iterations, done.final_score) == (3, 100.0)
    assert [h["score"] for h in done.history] == [0.0, 50.0, 100.0]
    status = engine.status("tdd")
    assert (status["status"], status["iteration"], status["last_signal"]) == ("complete", 3, "COMPLETE")
    assert tags(engine, "tdd").count("hook_decided") == 3
    with pytest.raises(EngineError, match="is complete"):
        validate(engine, "tdd", "more")


def test_circuit_breaker_escalates_at_the_third_failure(engine: Engine) -> None:
    engine.start("cb", LoopConfig(rules=[flag_rule()]))
    for n in (1, 2):
        assert validate(engine, "cb", f"try {n}").signal == "CONTINUE"
        engine.next("cb")
    r = validate(engine, "cb", "try 3")
    assert (r.signal, [t.guard for t in r.trips]) == ("ESCALATE", ["circuit_breaker"])
    assert r.feedback[0] == "Circuit breaker tripped after 3 consecutive failures"
    assert engine.status("cb")["status"] == "escalated"
    with pytest.raises(EngineError, match="escalated"):
        engine.next("cb")


def test_blocked_promise_with_reason(engine: Engine) -> None:
    engine.start("blk", LoopConfig(rules=[flag_rule()], hooks=["default"]))
    r = validate(engine, "blk", "Cannot proceed.\n<promise>BLOCKED</promise>\nReason: needs DBA approval")
    assert r.signal == "BLOCKED"
    promise = [e for e in events_of(engine, "blk") if isinstance(e, E.PromiseDetected)]
    assert [(p.promise, p.reason) for p in promise] == [("BLOCKED", "needs DBA approval")]
    assert engine.status("blk")["status"] == "blocked"


def test_max_iterations_escalates_at_the_last_iteration_without_completion(engine: Engine) -> None:
    engine.start("max", LoopConfig(max_iterations=2, guards=_no_breaker()))
    assert validate(engine, "max", "one").signal == "CONTINUE"
    engine.next("max")
    r = validate(engine, "max", "two")
    assert (r.signal, [t.guard for t in r.trips]) == ("ESCALATE", ["max_iterations"])


def test_completion_at_the_last_iteration_is_not_escalated(engine: Engine) -> None:
    engine.start("last", LoopConfig(max_iterations=1))
    assert validate(engine, "last", "<promise>COMPLETE</promise>").signal == "COMPLETE"


def test_next_refuses_past_the_maximum(engine: Engine) -> None:
    engine.start("cap", LoopConfig(max_iterations=1, guards=_no_guards()))
    validate(engine, "cap", "one")
    with pytest.raises(EngineError, match=r"Maximum iterations \(1\) reached"):
        engine.next("cap")


def test_manual_stop_is_honoured_at_the_next_validate(engine: Engine) -> None:
    engine.start("ms", LoopConfig())
    engine.stop("ms", "going another way")
    r = validate(engine, "ms", "<promise>COMPLETE</promise>")
    assert (r.signal, r.reason) == ("BLOCKED", "manual stop: going another way")
    assert engine.status("ms")["status"] == "blocked"


def test_max_iterations_override(engine: Engine) -> None:
    engine.start("ov", LoopConfig(max_iterations=10, guards=_no_breaker()))
    validate(engine, "ov", "one")
    engine.set_max_iterations("ov", 2, "budget")
    engine.next("ov")
    r = validate(engine, "ov", "two")
    assert (r.signal, [t.guard for t in r.trips]) == ("ESCALATE", ["max_iterations"])
    with pytest.raises(EngineError, match="at least 1"):
        engine.set_max_iterations("ov", 0)


def test_agent_context_carries_over_and_checkpoints_recorded(engine: Engine) -> None:
    engine.start("cp", LoopConfig())
    validate(engine, "cp", "x")
    engine.journal("cp").append(
        E.CheckpointCreated(
            session_id="cp", iteration=1, checkpoint_id="mine", agent_context={"lastError": "lint"}
        )
    )
    engine.next("cp")
    cps = [e for e in events_of(engine, "cp") if isinstance(e, E.CheckpointCreated)]
    assert [(c.checkpoint_id, c.trigger) for c in cps] == [
        ("cp-cp1", "iteration_start"),
        ("mine", "auto_iteration"),
        ("cp-cp2", "auto_iteration"),
    ]
    assert cps[-1].agent_context == {"lastError": "lint"} and cps[-1].step == 2


def test_unknown_session_and_double_start(engine: Engine) -> None:
    with pytest.raises(EngineError, match="no session 'nope'"):
        validate(engine, "nope", "x")
    engine.start("twice", LoopConfig())
    with pytest.raises(EngineError, match="already exists"):
        engine.start("twice", LoopConfig())


def _no_breaker() -> Any:
    from ledger.loop.decide.guards import CircuitBreaker, GuardConfig

    return GuardConfig(circuit_breaker=CircuitBreaker(enabled=False))


def _no_guards() -> Any:
    import msgspec

    from ledger.loop.decide.guards import GuardConfig

    d = GuardConfig()
    return GuardConfig(
        **{k: msgspec.structs.replace(getattr(d, k), enabled=False) for k in GuardConfig.__struct_fields__}
    )


# --- kill between any two steps -------------------------------------------------------------

SCRIPT = r"""
import json, sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.engine import Engine
from ledger.core.home import Home
from ledger.loop.decision import Turn
from ledger.loop.step import LoopSession

def validate(engine, sid, output):
    return LoopSession(engine, sid, "").check(Turn(output)).result

home, work, stop_after, start_at = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tick = iter(range(start_at * 100, 10**6))
engine = Engine(Home(home), work_dir=work, fsync=True,
                clock=lambda: datetime(2026, 4, 1, tzinfo=UTC) + timedelta(seconds=next(tick)))
rule = {"name": "t", "type": "command", "argv": [sys.executable, "-c",
        "import os, sys; sys.exit(0 if os.path.exists('t.ok') else 1)"]}
steps = [
    lambda: engine.start("k", LoopConfig(rules=[rule], hooks=["default"], max_iterations=5)),
    lambda: validate(engine, "k", "first try"),
    lambda: engine.next("k"),
    lambda: (work / "t.ok").touch(),
    lambda: validate(engine, "k", "done <promise>COMPLETE</promise>"),
    lambda: engine.complete("k", "COMPLETE"),
]
for i, step in enumerate(steps):
    if i < start_at:
        continue
    step()
    if i + 1 == stop_after:
        import os
        os._exit(0)  # killed: no cleanup, no flush of anything but what was written
"""


def run_steps(tmp: Path, kill_after: int | None) -> list[tuple[str, int, int]]:
    home, work = tmp / "home", tmp / "work"
    work.mkdir(parents=True)
    script = tmp / "steps.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, str(script), str(home), str(work)]
    if kill_after is None:
        subprocess.run([*cmd, "0", "0"], check=True, timeout=120)
    else:
        subprocess.run([*cmd, str(kill_after), "0"], check=True, timeout=120)
        subprocess.run([*cmd, "0", str(kill_after)], check=True, timeout=120)
    events = read_new(home / "journals" / "k.jsonl", Cursor()).events
    return [(str(e.__struct_config__.tag), e.seq, e.iteration) for e in events]


@pytest.mark.parametrize("kill_after", [1, 2, 3, 4, 5])
def test_a_fresh_process_resumes_with_identical_state(tmp_path: Path, kill_after: int) -> None:
    whole = run_steps(tmp_path / "whole", None)
    resumed = run_steps(tmp_path / "resumed", kill_after)
    assert resumed == whole
    assert whole[-1][0] == "session_completed"
    assert json.dumps(whole)  # plain data


# --- metrics -------------------------------------------------------------------------------


def test_stats_and_metric_views_agree_with_the_python_api(engine: Engine) -> None:
    """Three loops through the engine; the SQL metrics match what the API returned."""
    from ledger.cli import main
    from ledger.storage.database import Ledger

    done = []
    engine.start("a", LoopConfig(agent="me", rules=[flag_rule("a")]))
    validate(engine, "a", "x")
    engine.next("a")
    (engine.work_dir / "a.ok").touch()
    validate(engine, "a", "<promise>COMPLETE</promise>")
    done.append(engine.complete("a"))
    engine.start("b", LoopConfig(agent="me"))
    validate(engine, "b", "<promise>COMPLETE</promise>")
    done.append(engine.complete("b"))
    engine.start("c", LoopConfig(agent="me", rules=[flag_rule("c")]))
    engine.stop("c", "manual")
    blocked = validate(engine, "c", "still failing")
    assert blocked.signal == "BLOCKED"

    with Ledger.open(engine.home) as ledger:
        ledger.ingest()
        (row,) = ledger.rows("SELECT * FROM loop_metrics")
        by_n = ledger.rows(
            "SELECT iterations, ended, completed FROM success_by_iterations ORDER BY iterations"
        )
    assert (row["sessions"], row["ended"], row["completed"], row["autonomous"]) == (3, 3, 2, 2)
    assert row["autonomous_completion_rate"] == pytest.approx(2 / 3)
    assert row["mean_iterations_to_completion"] == pytest.approx(sum(d.total_iterations for d in done) / 2)
    assert by_n == [
        {"iterations": 1, "ended": 2, "completed": 1},
        {"iterations": 2, "ended": 1, "completed": 1},
    ]
    assert main(["--home", str(engine.home.root), "stats", "--json"]) == 0


def test_cli_stop_and_set(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    from ledger.cli import main

    engine.start("live", LoopConfig(max_iterations=9))
    home = str(engine.home.root)
    assert main(["--home", home, "set", "live", "--max-iterations", "4", "--reason", "budget"]) == 0
    assert main(["--home", home, "set", "live", "--max-iterations=0"]) == 2
    assert main(["--home", home, "stop", "live", "--reason", "enough"]) == 0
    assert "stop requested for live" in capsys.readouterr().out
    status = engine.status("live")
    assert (status["max_iterations"], status["stop_requested"], status["stop_reason"]) == (4, True, "enough")
    assert main(["--home", home, "stop", "ghost"]) == 1
    assert "no session 'ghost'" in capsys.readouterr().err


def test_custom_hook_checkpoint_data_and_next_prompt(home: Home, tmp_path: Path) -> None:
    from ledger.loop.decide.stop_policies import AgentContext, HookResult

    def halfway(ctx: AgentContext) -> HookResult:
        return HookResult(
            "continue",
            "halfway",
            next_prompt="Keep going on the parser",
            checkpoint_data={
                "executionPhase": "midpoint",
                "executionStep": "x",
                "agentContext": {"milestone": "halfway"},
            },
        )

    engine = Engine(home, work_dir=tmp_path, clock=ticking(), fsync=False, custom_hooks={"mid": halfway})
    engine.start("h", LoopConfig())
    r = validate(engine, "h", "work")
    assert (r.signal, r.next_prompt, r.reason) == ("CONTINUE", "Keep going on the parser", "halfway")
    cps = [e for e in events_of(engine, "h") if isinstance(e, E.CheckpointCreated) and e.trigger == "hook"]
    assert [(c.phase, c.step, c.agent_context) for c in cps] == [("midpoint", 1, {"milestone": "halfway"})]
    validate(engine, "h", "more work in the same iteration")
    ids = [e.checkpoint_id for e in events_of(engine, "h") if isinstance(e, E.CheckpointCreated)]
    assert ids == ["h-cp1", "h-hook1", "h-hook2"]
    decided = [e for e in events_of(engine, "h") if isinstance(e, E.HookDecided)]
    assert [(d.hook_id, d.action) for d in decided] == [("mid", "continue")] * 2


def test_a_custom_hook_lost_with_its_process_escalates(home: Home, tmp_path: Path) -> None:
    from ledger.loop.decide.stop_policies import AgentContext, HookResult

    def mine(ctx: AgentContext) -> HookResult:
        return HookResult("continue", "fine")

    Engine(home, work_dir=tmp_path, fsync=False, custom_hooks={"mine": mine}).start("lost", LoopConfig())
    r = validate(Engine(home, work_dir=tmp_path, fsync=False), "lost", "work")
    assert r.signal == "ESCALATE" and "not registered in this process" in r.reason


def test_hook_register_list_clear(engine: Engine) -> None:
    engine.start("hk", LoopConfig(hooks=["validation"]))
    assert engine.hook_register("hk", "promise") == "promise-2"
    assert engine.hook_register("hk", "default", enabled=False) == "default-3"
    with pytest.raises(EngineError, match="unknown hook 'magic'"):
        engine.hook_register("hk", "magic")
    assert engine.hook_list("hk") == [
        {"id": "validation-1", "type": "validation", "enabled": True},
        {"id": "promise-2", "type": "promise", "enabled": True},
        {"id": "default-3", "type": "default", "enabled": False},
    ]
    # a fresh engine (another process) sees the same declarative hooks
    again = Engine(engine.home, work_dir=engine.work_dir, fsync=False, clock=engine.clock)
    assert [h["id"] for h in again.hook_list("hk")] == ["validation-1", "promise-2", "default-3"]
    r = validate(again, "hk", "<promise>COMPLETE</promise>")
    assert r.signal == "COMPLETE"  # validation hook (no rules) continues, promise hook completes
    assert engine.hook_clear("hk") == 3 and engine.hook_list("hk") == []

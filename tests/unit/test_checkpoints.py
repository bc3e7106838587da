"""Checkpoints over real journals: create / list / resume / expire / prune
(docs/design/checkpoints.md)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger.core.home import Home
from ledger.loop import checkpoints as cp
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.engine import Engine
from ledger.loop.engine_types import EngineError
from tests.helpers import T0, flag_rule, ticking, validate


def later(engine: Engine, delta: timedelta) -> Engine:
    """A new Engine on the same home whose clock runs ``delta`` after T0."""
    return Engine(engine.home, work_dir=engine.work_dir, clock=ticking(T0 + delta), fsync=False)


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["checkpoint_id"] for r in rows]


def test_create_and_list_in_journal_order(engine: Engine) -> None:
    engine.start("s", LoopConfig(task="t"))
    first = cp.create(engine, "s", phase="impl", agent_context={"a": 1}, draft="x", draft_type="code")
    second = cp.create(engine, "s", trigger="iteration_milestone")
    engine.next("s")
    third = cp.create(engine, "s", step=7)
    assert (first, second, third) == ("s-cp1.1", "s-cp1.2", "s-cp2.1")
    rows = cp.list_checkpoints(engine, "s")
    assert ids(rows) == ["s-cp1", "s-cp1.1", "s-cp1.2", "s-cp2", "s-cp2.1"]
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)
    by_id = {r["checkpoint_id"]: r for r in rows}
    mine = by_id["s-cp1.1"]
    assert (mine["trigger"], mine["phase"], mine["step"], mine["iteration"]) == (
        "iteration_checkpoint",
        "impl",
        1,
        1,
    )
    assert (mine["agent_context"], mine["draft"], mine["draft_type"], mine["expires_at"]) == (
        {"a": 1},
        "x",
        "code",
        None,
    )
    assert mine["created_at"].tzinfo is not None and not mine["expired"]
    assert by_id["s-cp1.2"]["trigger"] == "iteration_milestone"
    assert (by_id["s-cp2.1"]["step"], by_id["s-cp2.1"]["iteration"]) == (7, 2)


def test_ids_never_collide_with_the_engines(engine: Engine) -> None:
    """The engine names the next iteration's checkpoint cp<n+1>; ours stay apart."""
    engine.start("s", LoopConfig())
    made = [cp.create(engine, "s") for _ in range(2)]
    engine.next("s")
    made.append(cp.create(engine, "s"))
    engine.next("s")
    all_ids = ids(cp.list_checkpoints(engine, "s"))
    assert len(all_ids) == len(set(all_ids)) == 6
    assert made == ["s-cp1.1", "s-cp1.2", "s-cp2.1"]


def test_context_defaults_to_the_carried_one(engine: Engine) -> None:
    engine.start("s", LoopConfig())
    cp.create(engine, "s", agent_context={"lastError": "lint"})
    carried = cp.create(engine, "s")
    cleared = cp.create(engine, "s", agent_context={"testCommand": "pytest"})
    rows = {r["checkpoint_id"]: r for r in cp.list_checkpoints(engine, "s")}
    assert rows[carried]["agent_context"] == {"lastError": "lint"}
    assert rows[cleared]["agent_context"] == {"testCommand": "pytest"}


def test_resume_latest_and_by_id(engine: Engine) -> None:
    engine.start("s", LoopConfig(task="POST /login", max_iterations=5))
    early = cp.create(engine, "s", agent_context={"step": "red"}, draft="draft text", draft_type="code")
    engine.next("s")
    latest = cp.resume(engine, "s")
    assert (latest.checkpoint["checkpoint_id"], latest.iteration, latest.max_iterations) == ("s-cp2", 2, 5)
    assert (latest.status, latest.config["task"], latest.config["max_iterations"]) == (
        "running",
        "POST /login",
        5,
    )
    assert latest.agent_context == {"step": "red"}  # carried over by Engine.next
    named = cp.resume(engine, "s", early)
    assert (named.checkpoint["checkpoint_id"], named.iteration) == (early, 1)
    assert named.agent_context == {"step": "red"}
    assert [h["iteration"] for h in named.history] == [1]
    assert [h["iteration"] for h in latest.history] == [1, 2]
    assert latest.history == engine.history("s")
    assert not hasattr(named, "draft") and not hasattr(named, "validation_state")


def test_resume_instructions(engine: Engine) -> None:
    rules = [flag_rule("tests_pass"), flag_rule("lint_clean")]
    engine.start("s", LoopConfig(task="POST /login", rules=rules))
    assert (
        cp.resume(engine, "s").instructions == "Resume iteration 1 of 15 of POST /login: no validation yet."
    )
    validate(engine, "s", "red")
    engine.next("s")
    (engine.work_dir / "tests_pass.ok").touch()
    validate(engine, "s", "green")
    engine.next("s")
    cp.create(engine, "s", agent_context={"lastError": "lint"})
    text = cp.resume(engine, "s").instructions
    assert text == (
        "Resume iteration 3 of 15 of POST /login: last score 50, 1 rule failing (lint_clean). "
        "Agent context: lastError=lint."
    )
    first = cp.resume(engine, "s", "s-cp1").instructions
    assert (
        first
        == "Resume iteration 1 of 15 of POST /login: last score 0, 2 rules failing (lint_clean, tests_pass)."
    )


def test_instructions_text() -> None:
    text = cp.instructions("t", 4, 8, "complete", 100.0, [], {"files": ["a", "b"], "n": 2})
    assert text == (
        'Resume iteration 4 of 8 of t: last score 100, all rules passing. Agent context: files=["a","b"], '
        "n=2. The session is complete: it takes no more iterations."
    )
    assert cp.instructions("t", 1, 2, "running", 66.666, ["a", "b"], {}).endswith(
        "last score 66.7, 2 rules failing (a, b)."
    )
    long = cp.instructions("t", 1, 2, "running", None, [], {"k": "x" * 100})
    assert long.endswith("k=" + "x" * 59 + "….")


def test_expired_checkpoints_are_skipped_and_refused(engine: Engine) -> None:
    engine.start("s", LoopConfig())
    mine = cp.create(engine, "s")
    cp.expire(engine, "s", mine, "bad state")
    assert cp.resume(engine, "s").checkpoint["checkpoint_id"] == "s-cp1"
    with pytest.raises(cp.CheckpointError, match=r"'s-cp1\.1' of session 's' is expired \(bad state\)"):
        cp.resume(engine, "s", mine)
    assert ids(cp.list_checkpoints(engine, "s")) == ["s-cp1"]
    every = cp.list_checkpoints(engine, "s", include_expired=True)
    assert [(r["checkpoint_id"], r["expired"], r["expired_reason"]) for r in every] == [
        ("s-cp1", False, None),
        (mine, True, "bad state"),
    ]
    cp.expire(engine, "s", "s-cp1")
    with pytest.raises(cp.CheckpointError, match="no unexpired checkpoint"):
        cp.resume(engine, "s")


def test_expire_and_resume_errors(engine: Engine) -> None:
    engine.start("s", LoopConfig())
    with pytest.raises(cp.CheckpointError, match="no checkpoint 'nope' in session 's'"):
        cp.expire(engine, "s", "nope")
    with pytest.raises(cp.CheckpointError, match="no checkpoint 'nope'"):
        cp.resume(engine, "s", "nope")
    cp.expire(engine, "s", "s-cp1")
    with pytest.raises(cp.CheckpointError, match=r"already expired \(manual\)"):
        cp.expire(engine, "s", "s-cp1")
    with pytest.raises(EngineError, match="no session 'ghost'"):  # CheckpointError is an EngineError
        cp.resume(engine, "ghost")
    with pytest.raises(cp.CheckpointError, match="needs a trigger"):
        cp.create(engine, "s", trigger="")
    with pytest.raises(cp.CheckpointError, match="keep must be at least 0"):
        cp.prune(engine, "s", keep=-1)
    for call in (cp.list_checkpoints, cp.create, cp.prune):
        with pytest.raises(cp.CheckpointError, match="`ralph-ledger sessions` lists them"):
            call(engine, "ghost")


def _busy_session(engine: Engine) -> None:
    """cp1 (iteration_start), cp2..cp6 (auto_iteration), four manual ones."""
    engine.start("s", LoopConfig())
    for _ in range(5):
        engine.next("s")
    for _ in range(4):
        cp.create(engine, "s")


def test_prune_keeps_latest_three_per_trigger_past_retention(engine: Engine) -> None:
    _busy_session(engine)
    assert cp.prune(later(engine, timedelta(hours=1)), "s") == []  # nothing past its retention yet
    two_days = later(engine, timedelta(days=2))
    pruned = cp.prune(two_days, "s")
    assert pruned == ["s-cp2", "s-cp3", "s-cp6.1"]
    assert ids(cp.list_checkpoints(engine, "s")) == [
        "s-cp1",
        "s-cp4",
        "s-cp5",
        "s-cp6",
        "s-cp6.2",
        "s-cp6.3",
        "s-cp6.4",
    ]
    reasons = {
        r["expired_reason"] for r in cp.list_checkpoints(engine, "s", include_expired=True) if r["expired"]
    }
    assert reasons == {"pruned"}
    assert cp.prune(two_days, "s") == []  # idempotent
    assert cp.prune(engine, "s", now=T0 + timedelta(days=8), keep=3) == []  # 3 per trigger stay


def test_prune_with_explicit_now_and_retention(engine: Engine) -> None:
    _busy_session(engine)
    short = {"auto_iteration": timedelta(days=30)}  # other triggers: the 7-day default
    assert cp.prune(engine, "s", now=T0 + timedelta(days=2), retention=short, keep=0) == []
    assert cp.prune(engine, "s", now=T0 + timedelta(days=8), retention=short, keep=1) == [
        "s-cp6.1",
        "s-cp6.2",
        "s-cp6.3",
    ]


def test_prune_never_expires_the_latest_checkpoint_of_a_running_session(engine: Engine) -> None:
    _busy_session(engine)
    pruned = cp.prune(engine, "s", now=T0 + timedelta(days=8), keep=0)
    assert "s-cp6.4" not in pruned and len(pruned) == 9
    assert ids(cp.list_checkpoints(engine, "s")) == ["s-cp6.4"]
    assert cp.resume(engine, "s").checkpoint["checkpoint_id"] == "s-cp6.4"


def test_prune_after_completion_may_expire_everything(engine: Engine) -> None:
    engine.start("s", LoopConfig())
    validate(engine, "s", "<promise>COMPLETE</promise>")
    engine.complete("s", "COMPLETE")
    assert cp.prune(engine, "s", now=T0 + timedelta(days=8), keep=0) == ["s-cp1"]
    assert cp.list_checkpoints(engine, "s") == []


def test_retention_table() -> None:
    assert cp.RETENTION["iteration_checkpoint"] == cp.RETENTION["auto_iteration"] == timedelta(hours=24)
    for trigger in (
        "iteration_start",
        "iteration_milestone",
        "iteration_error",
        "iteration_complete",
        "hook",
    ):
        assert cp.RETENTION[trigger] == timedelta(days=7)


def test_a_fresh_engine_sees_the_same_checkpoints(engine: Engine, home: Home, work: Path) -> None:
    engine.start("s", LoopConfig(task="t"))
    made = cp.create(engine, "s", agent_context={"k": "v"})
    cp.expire(engine, "s", "s-cp1")
    fresh = Engine(Home.resolve(home.root), work_dir=work, clock=ticking(), fsync=False)
    assert cp.list_checkpoints(fresh, "s", include_expired=True) == cp.list_checkpoints(
        engine, "s", include_expired=True
    )
    resumed = cp.resume(fresh, "s")
    assert (resumed.checkpoint["checkpoint_id"], resumed.agent_context) == (made, {"k": "v"})
    assert cp.create(fresh, "s") == "s-cp1.2"

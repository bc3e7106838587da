"""Steering a loop (``ledger.loop.steering.commands``): pause / resume / steer / unblock as override events,
and the rules every driver follows through ``Engine.next`` and ``next_prompt``."""

from __future__ import annotations

from typing import Any

import pytest

from ledger import events as E
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.engine import Engine
from ledger.loop.engine_types import EngineError, Paused
from ledger.loop.prompt.next_prompt import GUIDANCE_HEADING
from ledger.loop.steering import commands as steering
from ledger.loop.step import End, LoopSession
from ledger.storage.journal import Cursor, read_new
from tests.helpers import flag_rule, validate


def events_of(engine: Engine, sid: str) -> list[E.AnyEvent]:
    return read_new(engine.journal(sid).path, Cursor()).events


def _no_breaker() -> Any:
    from ledger.loop.decide.guards import CircuitBreaker, GuardConfig

    return GuardConfig(circuit_breaker=CircuitBreaker(enabled=False))


def test_a_paused_loop_finishes_its_iteration_then_next_refuses_until_resumed(engine: Engine) -> None:
    engine.start("p", LoopConfig())
    assert steering.pause(engine, "p", "lunch") == 1
    assert engine.status("p")["paused"] is True
    r = validate(engine, "p", "did some work")  # the iteration under way finishes as usual
    assert r.signal == "CONTINUE"
    with pytest.raises(Paused, match=r"^task p is paused; resume it with `ralph-ledger resume p`$"):
        engine.next("p")
    with pytest.raises(EngineError, match="already paused"):
        steering.pause(engine, "p")
    steering.resume(engine, "p")
    assert engine.status("p")["paused"] is False
    assert engine.next("p").iteration == 2
    with pytest.raises(EngineError, match="is not paused"):
        steering.resume(engine, "p")
    kinds = [e.kind for e in events_of(engine, "p") if isinstance(e, E.Override)]
    assert kinds == ["pause", "resume"]


def test_guidance_is_given_once_to_the_next_iteration_and_recorded_there(engine: Engine) -> None:
    engine.start("g", LoopConfig())
    steering.steer(engine, "g", "use sqlite")
    steering.steer(engine, "g", "  keep the API  ")
    validate(engine, "g", "one")
    advanced = engine.next("g")
    assert advanced.guidance == "use sqlite\nkeep the API"
    started = [e for e in events_of(engine, "g") if isinstance(e, E.IterationStarted)]
    assert [(e.iteration, e.guidance) for e in started] == [(1, ""), (2, "use sqlite\nkeep the API")]
    validate(engine, "g", "two")
    assert engine.next("g").guidance == ""  # once: iteration 3 is not told again
    events = events_of(engine, "g")
    assert steering.iteration_guidance(events, 2) == "use sqlite\nkeep the API"
    prompt = LoopSession(engine, "g", "Make it work.").prompt_of(2)
    assert prompt.endswith(f"{GUIDANCE_HEADING}\nuse sqlite\nkeep the API")
    assert GUIDANCE_HEADING not in LoopSession(engine, "g", "Make it work.").prompt_of(3)
    with pytest.raises(EngineError, match="empty"):
        steering.steer(engine, "g", "  ")


def test_steering_an_ended_or_unknown_session_is_one_line(engine: Engine) -> None:
    engine.start("done", LoopConfig())
    validate(engine, "done", "<promise>COMPLETE</promise>")
    engine.complete("done", "COMPLETE")
    for act in (steering.pause, steering.resume):
        with pytest.raises(EngineError, match=r"^session 'done' is complete; it cannot be"):
            act(engine, "done")
    with pytest.raises(EngineError, match="is complete; it cannot be steered"):
        steering.steer(engine, "done", "x")
    with pytest.raises(EngineError, match="only a blocked or escalated session is unblocked"):
        steering.unblock(engine, "done", "x")
    with pytest.raises(EngineError, match="no session 'ghost'"):
        steering.pause(engine, "ghost")


def test_unblock_an_escalated_loop(engine: Engine) -> None:
    engine.start("cb", LoopConfig(rules=[flag_rule()], max_iterations=10))
    for n in (1, 2):
        validate(engine, "cb", f"try {n}")
        engine.next("cb")
    assert validate(engine, "cb", "try 3").signal == "ESCALATE"
    with pytest.raises(EngineError, match="is escalated; it cannot be steered"):
        steering.steer(engine, "cb", "note first")
    assert steering.unblock(engine, "cb", "the fixture is in tests/data", iterations=2) == (3, 5)
    status = engine.status("cb")
    assert (status["status"], status["iteration"], status["max_iterations"]) == ("running", 3, 5)
    advanced = engine.next("cb")  # the loop goes on as after any iteration, with the guidance
    assert (advanced.iteration, advanced.guidance) == (4, "the fixture is in tests/data")
    # the breaker (and the stall guard) count from the unblock: one more failure trips nothing
    assert validate(engine, "cb", "try 4").signal == "CONTINUE"
    engine.next("cb")
    r = validate(engine, "cb", "try 5")  # the last of the two iterations given
    assert (r.signal, [t.guard for t in r.trips]) == ("ESCALATE", ["max_iterations"])
    with pytest.raises(EngineError, match="at least 1"):
        steering.unblock(engine, "cb", iterations=0)


def test_unblock_lifts_a_manual_stop_and_a_pause(engine: Engine) -> None:
    engine.start("ms", LoopConfig(guards=_no_breaker()))
    steering.pause(engine, "ms")
    engine.stop("ms", "wrong approach")
    assert validate(engine, "ms", "one").signal == "BLOCKED"
    steering.unblock(engine, "ms", "try the other approach")
    status = engine.status("ms")
    assert (status["status"], status["stop_requested"], status["paused"]) == ("running", False, False)
    assert engine.next("ms").guidance == "try the other approach"
    assert validate(engine, "ms", "two").signal == "CONTINUE"
    assert engine.next("ms").iteration == 3


def test_a_stop_while_paused_ends_the_loop_blocked(engine: Engine) -> None:
    engine.start("h", LoopConfig())
    steering.pause(engine, "h")
    validate(engine, "h", "one")
    engine.stop("h", "enough")
    ended = LoopSession(engine, "h", "").resume()
    assert isinstance(ended, End) and ended.reason == "manual stop: enough"
    assert engine.status("h")["status"] == "blocked"


def test_old_journals_decode_without_the_new_fields() -> None:
    import msgspec

    line = b'{"type":"iteration_started","session_id":"s","seq":1,"ts":"2026-01-01T00:00:00Z","iteration":2}'
    started = msgspec.json.decode(line, type=E.AnyEvent)
    assert isinstance(started, E.IterationStarted) and started.guidance == ""


@pytest.mark.parametrize(
    "kinds",
    [
        [],
        ["pause"],
        ["pause", "resume"],
        ["pause", "resume", "pause"],
        ["pause", "steer"],
        ["pause", "unblock"],
    ],
)
def test_the_paused_column_and_the_python_rule_agree(engine: Engine, kinds: list[str]) -> None:
    """The ``sessions`` view's ``paused`` (what the TUI and queries read) says what ``is_paused``
    (what the drivers read) says, for any order of overrides."""
    from ledger.loop.steering.state import is_paused

    engine.start("o", LoopConfig())
    engine.journal("o").append(*(E.Override(session_id="o", iteration=1, kind=k, reason="x") for k in kinds))
    lifted = [k for k in kinds if k in ("pause", "resume", "unblock")]  # steer changes nothing
    expected = bool(lifted) and lifted[-1] == "pause"
    assert engine.status("o")["paused"] is is_paused(events_of(engine, "o")) is expected


def test_the_monitor_shows_the_guidance_where_it_was_given() -> None:
    """The paused-steered sample: the event log says iteration 2 started with the guidance, and
    iteration 2's detail holds it (what the session screen shows); iteration 1's does not."""
    from pathlib import Path

    from ledger.monitor import Monitor

    sample = Path(__file__).resolve().parents[2] / "sample_sessions" / "paused-steered.jsonl"
    monitor = Monitor([sample])
    list(monitor.load())
    lines = [e.text for e in monitor.events("paused-steered")]
    guided = [t for t in lines if t.startswith("iteration 2 started")]
    assert guided == [
        "iteration 2 started, guided: Keep the test. Round with Decimal(str(value)) and ROUND_HALF_UP."
    ]
    assert "override pause: the agent wants to change a test" in lines
    assert monitor.detail("paused-steered", 2).guidance.startswith("Keep the test.")
    assert monitor.detail("paused-steered", 1).guidance == ""
    (row,) = monitor.sessions(["paused-steered"])
    assert row.paused is False and row.status == "complete"
    monitor.close()


def test_the_guidance_comes_last_after_the_feedback_and_the_summary() -> None:
    from ledger.loop.prompt.next_prompt import next_prompt
    from ledger.loop.steering.state import Learned

    taught = Learned(3, "", ["tests: 1 failed"])
    prompt = next_prompt("Fix it.", taught, "Loop so far:\n- 3 iterations", guidance="use sqlite")
    assert prompt == (
        "Fix it.\n\nFeedback from iteration 3:\n- tests: 1 failed\n\nLoop so far:\n- 3 iterations"
        f"\n\n{GUIDANCE_HEADING}\nuse sqlite"
    )
    assert next_prompt("Fix it.", Learned(3, "", []), guidance="  ") == "Fix it."  # blank: nothing added


@pytest.mark.parametrize("end", [E.SessionCompleted, E.SessionBlocked, E.SessionEscalated])
def test_a_pause_is_lifted_by_the_sessions_end(engine: Engine, end: type[E.Event]) -> None:
    """A loop that ended while a pause waited for its turn to finish is not paused (nothing waits,
    and ``resume`` is refused on an ended session): the view and the Python rule say so alike."""
    from ledger.loop.steering.state import is_paused

    engine.start("p", LoopConfig())
    engine.journal("p").append(
        E.Override(session_id="p", iteration=1, kind="pause", reason=""), end(session_id="p", iteration=1)
    )
    assert engine.status("p")["paused"] is is_paused(events_of(engine, "p")) is False

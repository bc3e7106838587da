"""The classic loop (``ledger.drivers.runner.run`` and ``ralph-ledger run``) with small scripted agents:
Python scripts run with ``sys.executable`` that keep a run counter in a state directory
outside the work directory and record the prompt each run got on stdin."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ledger import events as E
from ledger.cli import main
from ledger.core.home import Home
from ledger.drivers.runner.agent_process import run_agent
from ledger.drivers.runner.formats import FORMATS, named
from ledger.drivers.runner.run import RunResult, recorded, run_loop
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decide.guards import CircuitBreaker, GuardConfig, _Guard
from ledger.loop.decide.stop_policies import HookResult
from ledger.loop.engine import Engine
from ledger.loop.engine_types import EngineError
from ledger.loop.prompt.next_prompt import next_prompt
from ledger.loop.validate.checks import run_rules
from ledger.loop.validate.rules import RuleContext, parse_rules
from ledger.storage.database import Ledger
from ledger.storage.journal import Cursor, read_new
from tests.helpers import AGENT_PREAMBLE, ticking

PROMPT = "Build the thing.\n"

PREAMBLE = (
    AGENT_PREAMBLE
    + """\
(state / f"prompt{n}.txt").write_text(prompt)
"""
)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    d = tmp_path / "state"
    d.mkdir()
    return d


def agent(state: Path, body: str) -> list[str]:
    """An agent command: the preamble (counter ``n``, ``prompt``), then ``body``."""
    script = state.parent / "agent.py"
    script.write_text(PREAMBLE + body)
    return [sys.executable, str(script), str(state)]


def events_of(engine: Engine, sid: str) -> list[E.AnyEvent]:
    return read_new(engine.journal(sid).path, Cursor()).events


def turns(engine: Engine, sid: str) -> list[E.AgentTurn]:
    return [e for e in events_of(engine, sid) if isinstance(e, E.AgentTurn)]


def loop(engine: Engine, cmd: list[str], config: LoopConfig, **kw: Any) -> tuple[RunResult, str]:
    out = io.StringIO()
    kw.setdefault("iteration_timeout_s", 10.0)
    result = run_loop(engine, kw.pop("sid", "s1"), config, cmd, PROMPT, out=out, **kw)
    return result, out.getvalue()


def failing_rule() -> dict[str, Any]:
    return {"name": "tests", "type": "command", "argv": [sys.executable, "-c", "raise SystemExit(1)"]}


def test_completes_on_the_third_iteration(engine: Engine, state: Path, work: Path) -> None:
    cmd = agent(
        state,
        'pathlib.Path("out.txt").write_text(str(n))\n'
        'print("working", n)\n'
        'print("to stderr", n, file=sys.stderr)\n'
        'if n == 3: print("<promise>COMPLETE</promise>")\n',
    )
    result, out = loop(engine, cmd, LoopConfig())
    assert (result.exit_code, result.signal, result.iterations) == (0, "COMPLETE", 3)
    assert engine.status("s1")["status"] == "complete"
    assert "working 1\n" in out and "to stderr 3\n" in out and "iteration 3 of 15" in out
    assert (work / "out.txt").read_text() == "3"
    # without hooks there is no next_prompt: every run gets the original prompt
    assert [(state / f"prompt{i}.txt").read_text() for i in (1, 2, 3)] == [PROMPT] * 3
    seen = turns(engine, "s1")
    assert [t.files_modified for t in seen] == [[], [], []]  # not a git work tree
    assert "working 2" in seen[1].output_excerpt and seen[1].stop_reason == "exit 0"


def stepping(step: float) -> Callable[[], float]:
    """A fake monotonic timer: every call is ``step`` seconds after the previous one."""
    ticks = iter(range(1_000_000))
    return lambda: 1000.0 + step * next(ticks)


def test_injected_timers_give_the_recorded_durations(home: Home, work: Path, state: Path) -> None:
    """The durations in the journal come from the injected timers (rules: ``Engine(timer=)``;
    the agent: ``run_loop(timer=)``), so a recording is reproducible."""
    engine = Engine(home, work_dir=work, clock=ticking(), fsync=False, timer=stepping(0.25))
    ok = {"name": "ok", "type": "command", "argv": [sys.executable, "-c", "pass"]}
    config = LoopConfig(rules=[ok, failing_rule()])
    cmd = agent(state, 'if n == 2: print("<promise>COMPLETE</promise>")\n')
    result, _ = loop(engine, cmd, config, timer=stepping(42.0))
    assert (result.exit_code, result.iterations) == (0, 2)
    evs = events_of(engine, "s1")
    assert [t.duration_ms for t in evs if isinstance(t, E.AgentTurn)] == [42_000.0, 42_000.0]
    runs = [e for e in evs if isinstance(e, E.ValidationRan)]
    assert [[r.duration_ms for r in v.results] for v in runs] == [[250.0, 250.0], [250.0, 250.0]]


def test_blocked_promise_exits_3(engine: Engine, state: Path) -> None:
    cmd = agent(state, 'print("cannot go on <promise>BLOCKED</promise>")\n')
    result, _ = loop(engine, cmd, LoopConfig())
    assert (result.exit_code, result.signal, result.iterations) == (3, "BLOCKED", 1)
    assert engine.status("s1")["status"] == "blocked"


def test_max_iterations_escalates(engine: Engine, state: Path) -> None:
    result, _ = loop(engine, agent(state, 'print("still busy")\n'), LoopConfig(max_iterations=2))
    assert (result.exit_code, result.signal, result.iterations) == (4, "ESCALATE", 2)
    assert "Max iterations (2)" in result.reason
    assert engine.status("s1")["status"] == "escalated"


def test_next_refusing_at_the_maximum_escalates(engine: Engine, state: Path) -> None:
    """With the max_iterations guard off, ``next`` refusing ends the loop with exit 4."""
    config = LoopConfig(max_iterations=2, guards=GuardConfig(max_iterations=_Guard(enabled=False)))
    result, _ = loop(engine, agent(state, 'print("still busy")\n'), config)
    assert (result.exit_code, result.signal, result.iterations) == (4, "ESCALATE", 2)
    assert result.reason.startswith("Maximum iterations (2) reached")


def test_circuit_breaker_on_a_failing_rule(engine: Engine, state: Path) -> None:
    result, _ = loop(engine, agent(state, 'print("tried")\n'), LoopConfig(rules=[failing_rule()]))
    assert (result.exit_code, result.signal, result.iterations) == (4, "ESCALATE", 3)
    assert result.reason.startswith("circuit_breaker")
    assert engine.status("s1")["status"] == "escalated"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def _wait_dead(pid: int, seconds: float = 3.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


HANG = """\
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
(state / "child.pid").write_text(str(child.pid))
print("agent-started", flush=True)
time.sleep(60)
"""


def test_hung_agent_is_killed_by_the_timeout(engine: Engine, state: Path) -> None:
    t0 = time.monotonic()
    result, out = loop(engine, agent(state, HANG), LoopConfig(max_iterations=1), iteration_timeout_s=0.5)
    assert time.monotonic() - t0 < 5
    assert (result.exit_code, result.signal) == (4, "ESCALATE")
    assert "agent-started" in out and "agent timed out after 0.5 s" in out
    (turn,) = turns(engine, "s1")
    assert (turn.output_excerpt, turn.stop_reason) == ("agent-started\n", "timeout")  # what it said
    assert turn.failure == "agent timed out after 0.5 s"  # a failed iteration
    assert _wait_dead(int((state / "child.pid").read_text())), "the agent's child survived"


def test_run_agent_streams_and_decodes_with_replacement(work: Path, state: Path) -> None:
    cmd = agent(state, 'sys.stdout.buffer.write(b"bad \\xff byte\\nlast line no newline")\n')
    out = io.StringIO()
    run = run_agent(cmd, "hi", cwd=work, timeout_s=10, out=out)
    assert run.output == "bad \ufffd byte\nlast line no newline" == out.getvalue()
    assert (run.returncode, run.timed_out) == (0, False)


def git(work: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(work), *args], check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_files_modified_from_git(tmp_path: Path, work: Path, state: Path) -> None:
    git(work, "init", "-q")
    git(work, "config", "user.name", "Test")
    git(work, "config", "user.email", "test@example.com")
    (work / "tracked.txt").write_text("v1\n")
    (work / "dirty.txt").write_text("v1\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "init")
    (work / "dirty.txt").write_text("dirty before the loop\n")  # changed, but not by the agent
    (work / "old.txt").write_text("untracked before the loop\n")
    # the ledger home inside the work tree: its journals are not the agent's work
    engine = Engine(Home.resolve(work / ".ralph"), work_dir=work, clock=ticking(), fsync=False)
    cmd = agent(
        state,
        "if n == 1:\n"
        '    pathlib.Path("tracked.txt").write_text("v2\\n")\n'
        '    pathlib.Path("sub").mkdir()\n'
        '    pathlib.Path("sub/new.txt").write_text("new\\n")\n'
        "if n == 2:\n"
        '    pathlib.Path("tracked.txt").write_text("v1\\n")\n'
        "if n == 3:\n"
        '    print("<promise>COMPLETE</promise>")\n',
    )
    result, _ = loop(engine, cmd, LoopConfig())
    assert result.exit_code == 0
    assert [t.files_modified for t in turns(engine, "s1")] == [
        ["sub/new.txt", "tracked.txt"],
        ["tracked.txt"],
        [],
    ]


def test_next_prompt_is_fed_on_stdin(engine: Engine, state: Path) -> None:
    flag = {
        "name": "tests",
        "type": "command",
        "argv": [sys.executable, "-c", "import os, sys; sys.exit(0 if os.path.exists('ok') else 1)"],
    }
    cmd = agent(
        state, 'if n == 2:\n    pathlib.Path("ok").touch()\n    print("<promise>COMPLETE</promise>")\n'
    )
    result, _ = loop(engine, cmd, LoopConfig(rules=[flag], hooks=["default"]))
    assert (result.exit_code, result.iterations) == (0, 2)
    assert (state / "prompt1.txt").read_text() == PROMPT
    # the task, then what the hook said (its feedback line is not repeated): never the feedback alone
    assert (state / "prompt2.txt").read_text() == (
        "Build the thing.\n\nFeedback from iteration 1:\n"
        "Fix the failing validation rules: tests: exited with code 1 (no output)"
    )


class InterruptingOut(io.StringIO):
    """An output stream that raises KeyboardInterrupt (as Ctrl-C would) when ``trigger`` is written."""

    def __init__(self, trigger: str) -> None:
        super().__init__()
        self.trigger = trigger
        self.fired = False

    def write(self, s: str) -> int:
        n = super().write(s)
        if self.trigger in s and not self.fired:
            self.fired = True
            raise KeyboardInterrupt
        return n


def test_ctrl_c_kills_the_agent_and_the_session_resumes(engine: Engine, state: Path) -> None:
    cmd = agent(
        state,
        'if n == 1: print("first run")\n'
        "if n == 2:\n"
        + "".join(f"    {line}\n" for line in HANG.splitlines())
        + 'if n == 3: print("<promise>COMPLETE</promise>")\n',
    )
    out = InterruptingOut("agent-started")
    t0 = time.monotonic()
    result = run_loop(engine, "s1", LoopConfig(), cmd, PROMPT, iteration_timeout_s=30, out=out)
    assert time.monotonic() - t0 < 5
    assert (result.exit_code, result.signal, result.iterations) == (130, "", 2)
    assert result.reason == "interrupted (Ctrl-C)"
    assert _wait_dead(int((state / "child.pid").read_text())), "the agent's child survived"
    assert engine.status("s1")["status"] == "running"
    overrides = [e for e in events_of(engine, "s1") if isinstance(e, E.Override)]
    assert [(e.kind, e.reason, e.iteration) for e in overrides] == [
        ("interrupted", "interrupted (Ctrl-C)", 2)
    ]

    resumed, _ = loop(engine, cmd, LoopConfig(), resume=True)
    assert (resumed.exit_code, resumed.signal, resumed.iterations) == (0, "COMPLETE", 2)
    # the interrupted run's partial turn is kept, then the iteration runs again
    assert [(t.iteration, t.stop_reason) for t in turns(engine, "s1")] == [
        (1, "exit 0"),
        (2, "interrupted"),
        (2, "exit 0"),
    ]
    assert "agent-started" in turns(engine, "s1")[1].output_excerpt
    assert engine.status("s1")["status"] == "complete"
    with pytest.raises(EngineError, match="is complete"):
        loop(engine, cmd, LoopConfig(), resume=True)


def test_resume_needs_an_existing_session(engine: Engine, state: Path) -> None:
    with pytest.raises(EngineError, match="no session"):
        loop(engine, agent(state, ""), LoopConfig(), sid="nope", resume=True)


# ----------------------------------------------------------------------------- the CLI
def run_cli(home: Home, *args: str) -> int:
    return main(["--home", str(home.root), "run", *args])


@pytest.fixture
def prompt_file(tmp_path: Path) -> Path:
    p = tmp_path / "prompt.md"
    p.write_text(PROMPT)
    return p


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "missing the agent command"),
        (["--"], "missing the agent command"),
        (["--max-iterations", "many", "--", "true"], "--max-iterations: expected a whole number"),
        (["--max-iterations", "0", "--", "true"], "expected a whole number >= 1 or auto, got '0'"),
        (["--timeout", "soon", "--", "true"], "--timeout: expected a number of seconds"),
        (["--timeout", "0", "--", "true"], "--timeout: expected a number of seconds > 0, got '0'"),
        (["--timeout", "-1", "--", "true"], "--timeout: expected a number of seconds > 0"),
        (["--timeout", "inf", "--", "true"], "--timeout: expected a number of seconds > 0"),
        (["--session", "../x", "--", "true"], "argument --session: '../x': expected 1-128 characters"),
        (["--resume", "a/b", "--", "true"], "argument --resume: 'a/b': expected 1-128 characters"),
        (["--session", "a", "--resume", "b", "--", "true"], "not allowed with argument"),
        (["--", "no-such-agent-xyz"], "agent command not found: no-such-agent-xyz"),
        (["--prompt", "missing.md", "--", "true"], "--prompt missing.md: cannot read"),
    ],
)
def test_cli_argument_errors(
    home: Home, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert run_cli(home, *args) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and message in err
    assert not home.journals.exists() or not any(home.journals.iterdir())


def test_cli_empty_prompt_on_stdin(
    home: Home, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("  \n"))
    assert run_cli(home, "--", sys.executable) == 2
    assert "the prompt is empty" in capsys.readouterr().err


def test_cli_runs_to_completion(
    home: Home,
    work: Path,
    state: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "stdin", io.StringIO(PROMPT))
    cmd = agent(state, 'print("run", n)\nif n == 2: print("<promise>COMPLETE</promise>")\n')
    assert run_cli(home, "--session", "cli1", "--timeout", "10", "--", *cmd) == 0
    out = capsys.readouterr().out
    assert "run 1\n" in out and out.strip().endswith(
        "cli1: COMPLETE after 2 iterations: agent promised COMPLETE"
    )
    assert (state / "prompt1.txt").read_text() == PROMPT


def test_cli_blocked_and_max_iterations_exit_codes(
    home: Home,
    work: Path,
    state: Path,
    prompt_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(work)
    busy = agent(state, 'print("busy")\n')
    args = ["--prompt", str(prompt_file), "--session", "esc", "--max-iterations", "1", "--", *busy]
    assert run_cli(home, *args) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "esc: ESCALATE after 1 iteration" in err[0]
    blocked = agent(state, 'print("<promise>BLOCKED</promise>")\n')
    assert run_cli(home, "--prompt", str(prompt_file), "--session", "blk", "--", *blocked) == 3
    assert "blk: BLOCKED after 1 iteration" in capsys.readouterr().err
    assert run_cli(home, "--prompt", str(prompt_file), "--resume", "blk", "--", *blocked) == 1
    assert "is blocked; only a running session resumes" in capsys.readouterr().err
    assert run_cli(home, "--prompt", str(prompt_file), "--session", "blk", "--", *blocked) == 1
    assert "already exists" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the next prompt
def learned(feedback: list[str], hint: str = "", iteration: int = 4) -> Any:
    """A stand-in for a ``ValidateResult``: what ``next_prompt`` reads."""
    return SimpleNamespace(iteration=iteration, next_prompt=hint, feedback=feedback)


@pytest.mark.parametrize(
    ("hint", "feedback", "expected"),
    [
        ("", [], "Build the thing.\n"),  # nothing learned: the task, unchanged
        ("Build the thing.", [], "Build the thing.\n"),  # a hook answering with the task adds nothing
        ("", ["tests: 2 failed"], "Build the thing.\n\nFeedback from iteration 4:\n- tests: 2 failed"),
        (
            "Fix the failing validation rules: tests: 2 failed",
            ["thrashing: app.py modified in 5 iterations", "tests: 2 failed"],
            "Build the thing.\n\nFeedback from iteration 4:\n"
            "Fix the failing validation rules: tests: 2 failed\n- thrashing: app.py modified in 5 iterations",
        ),
        (
            "Keep going",
            ["tests: 2 failed"],
            "Build the thing.\n\nFeedback from iteration 4:\nKeep going\n- tests: 2 failed",
        ),
    ],
)
def test_next_prompt_is_the_task_then_what_was_learned(hint: str, feedback: list[str], expected: str) -> None:
    assert next_prompt(PROMPT, learned(feedback, hint)) == expected


def test_the_runner_and_the_hook_compose_with_one_function() -> None:
    """The Claude Code ledger-native hook used its own composition (the hook's next prompt replaced
    the feedback); the runner sent the hook's next prompt alone. Both now take their steps through
    ``LoopSession``, which alone composes prompts (tests/architecture/test_loop_step.py)."""
    import ledger.drivers.claude_code.stop.native
    import ledger.drivers.runner.run
    from ledger.loop.step import LoopSession

    for driver in (ledger.drivers.claude_code.stop.native, ledger.drivers.runner.run):
        assert "next_prompt" not in vars(driver)
        assert vars(driver)["LoopSession"] is LoopSession


def test_a_hooks_next_prompt_and_the_feedback_follow_the_task(home: Home, work: Path, state: Path) -> None:
    keep = HookResult("continue", "not yet", next_prompt="Keep going")
    engine = Engine(
        home, work_dir=work, clock=ticking(), fsync=False, custom_hooks={"keep": lambda ctx: keep}
    )
    cmd = agent(state, 'if n == 2: print("<promise>COMPLETE</promise>")\n')
    config = LoopConfig(
        rules=[failing_rule()], guards=GuardConfig(circuit_breaker=CircuitBreaker(enabled=False))
    )
    loop(engine, cmd, config)
    assert (state / "prompt2.txt").read_text() == (
        "Build the thing.\n\nFeedback from iteration 1:\nKeep going\n- tests: exited with code 1 (no output)"
    )


def test_a_resumed_iteration_gets_the_prompt_it_had(engine: Engine, state: Path) -> None:
    """Interrupted in iteration 2 and resumed, iteration 2 runs again with the task and what
    iteration 1 taught the loop, not the bare task."""
    cmd = agent(
        state,
        "if n == 2:\n"
        + "".join(f"    {line}\n" for line in HANG.splitlines())
        + 'if n == 3: print("<promise>COMPLETE</promise>")\n',
    )
    config = LoopConfig(rules=[failing_rule()], hooks=["default"])
    out = InterruptingOut("agent-started")
    result = run_loop(engine, "s1", config, cmd, PROMPT, iteration_timeout_s=30, out=out)
    assert (result.exit_code, result.iterations) == (130, 2)
    resumed, _ = loop(engine, cmd, config, resume=True)
    assert resumed.exit_code == 0
    second, again = (state / "prompt2.txt").read_text(), (state / "prompt3.txt").read_text()
    assert second == again and second.startswith(PROMPT + "\nFeedback from iteration 1:\n")


# ----------------------------------------------------------------------------- what a session records
def test_a_runner_session_records_its_task_agent_and_command(engine: Engine, state: Path) -> None:
    cmd = agent(state, 'print("<promise>COMPLETE</promise>")\n')
    loop(engine, cmd, LoopConfig())
    (started,) = [e for e in events_of(engine, "s1") if isinstance(e, E.SessionStarted)]
    assert (started.prompt, started.command) == (PROMPT, cmd)
    assert (started.task, started.agent) == (PROMPT.strip(), Path(sys.executable).name)  # a label
    assert recorded(engine, "s1") == (PROMPT, cmd)
    row = engine.status("s1")
    assert (row["task"], row["agent"]) == (PROMPT.strip(), Path(sys.executable).name)


def test_a_configured_task_and_agent_name_are_kept(engine: Engine, state: Path) -> None:
    cmd = agent(state, 'print("<promise>COMPLETE</promise>")\n')
    loop(engine, cmd, LoopConfig(task="login form", agent="qa"))
    row = engine.status("s1")
    assert (row["task"], row["agent"], row["max_iterations"]) == ("login form", "qa", 10)
    assert recorded(engine, "s1") == (PROMPT, cmd)  # the prompt itself, for --resume


def test_cli_resume_needs_neither_prompt_nor_command(
    home: Home, work: Path, state: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running session (as an interruption leaves one) resumes from its record alone."""
    monkeypatch.chdir(work)
    cmd = agent(state, 'print("<promise>COMPLETE</promise>")\n')
    Engine(home, work_dir=work).start("r1", LoopConfig(task="label"), prompt=PROMPT, command=cmd)
    monkeypatch.setattr(sys, "stdin", io.StringIO("not the prompt"))  # not read: the session has it
    assert run_cli(home, "--resume", "r1") == 0
    assert "r1: COMPLETE after 1 iteration" in capsys.readouterr().out
    assert (state / "prompt1.txt").read_text() == PROMPT


def test_cli_resume_of_a_session_without_a_recorded_command(
    home: Home, work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session started before commands were recorded (or by the hook) needs the command again."""
    monkeypatch.chdir(work)
    Engine(home, work_dir=work).start("old", LoopConfig(task=PROMPT))
    assert run_cli(home, "--resume", "old") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ralph-ledger run: session old recorded no agent command: pass it after -- (see --help)"]
    assert run_cli(home, "--resume", "nope") == 1
    assert "no session 'nope'" in capsys.readouterr().err


# ----------------------------------------------------------------------------- signals
def _signal_when(path: Path, signum: int) -> threading.Thread:
    """A thread that sends ``signum`` to this process once ``path`` exists."""

    def wait() -> None:
        end = time.monotonic() + 20
        while not path.exists() and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.1)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def test_sigterm_ends_the_loop_like_ctrl_c_and_the_handlers_are_restored(engine: Engine, state: Path) -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
    thread = _signal_when(state / "child.pid", signal.SIGTERM)
    result, out = loop(engine, agent(state, HANG), LoopConfig(), iteration_timeout_s=30)
    thread.join()
    assert (result.exit_code, result.signal, result.reason) == (143, "", "interrupted (SIGTERM)")
    assert "interrupted (SIGTERM); resume with --resume s1" in out
    assert _wait_dead(int((state / "child.pid").read_text())), "the agent's child survived"
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == before
    kinds = [
        (type(e).__name__, getattr(e, "stop_reason", getattr(e, "kind", ""))) for e in events_of(engine, "s1")
    ]
    assert kinds[-2:] == [("AgentTurn", "interrupted"), ("Override", "interrupted")]


@pytest.mark.parametrize(
    ("signum", "reason"),
    [
        (signal.SIGINT, "interrupted (Ctrl-C)"),
        (signal.SIGTERM, "interrupted (SIGTERM)"),
        (signal.SIGHUP, "interrupted (SIGHUP)"),
    ],
)
def test_a_signal_during_a_ledger_statement_is_an_interruption(
    engine: Engine, state: Path, monkeypatch: pytest.MonkeyPatch, signum: int, reason: str
) -> None:
    """DuckDB runs the signal handler when it checks for signals during a statement, swallows the
    interrupt and raises its own error ("Query interrupted"). Between two iterations that is the
    loop's interruption: exit 128 + the signal and an ``interrupted`` override (it was an internal
    error, exit 1, with nothing recorded)."""
    advance = engine.next_events  # the step's advance to the next iteration

    def next_during_a_statement(view: Any, *args: Any, **kw: Any) -> Any:
        try:
            os.kill(os.getpid(), signum)  # the handler runs "inside" the statement
            time.sleep(5)
        except KeyboardInterrupt:
            raise RuntimeError("Query interrupted") from None  # what DuckDB raises instead
        return advance(view, *args, **kw)

    monkeypatch.setattr(engine, "next_events", next_during_a_statement)
    result, _ = loop(engine, agent(state, 'print("not yet")\n'), LoopConfig())
    assert (result.exit_code, result.iterations, result.reason) == (128 + signum, 1, reason)
    last = events_of(engine, "s1")[-1]
    assert isinstance(last, E.Override) and (last.kind, last.reason) == ("interrupted", reason)
    assert engine.status("s1")["status"] == "running"


RULE_HANG = """\
import os, pathlib, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
pathlib.Path(sys.argv[1]).write_text(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""


def test_ctrl_c_during_a_command_rule_ends_its_process_group(tmp_path: Path, work: Path) -> None:
    """A rule's command leads its own session, out of reach of the terminal's Ctrl-C: interrupted
    while waiting for it, the rule ends the command's group before passing the interrupt on."""
    script = tmp_path / "rule.py"
    script.write_text(RULE_HANG)
    pids = tmp_path / "rule.pids"
    rule = parse_rules(
        [{"name": "slow", "type": "command", "argv": [sys.executable, str(script), str(pids)]}], "t"
    )
    thread = _signal_when(pids, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        run_rules(rule, RuleContext(work))
    thread.join()
    for pid in map(int, pids.read_text().split()):
        assert _wait_dead(pid), f"rule process {pid} survived"


# ----------------------------------------------------------------------------- stderr and failed runs
def test_a_promise_on_stderr_never_completes_and_stderr_is_recorded(engine: Engine, state: Path) -> None:
    """Agents echo the prompt, their reasoning and their commands on stderr: only stdout is the answer."""
    cmd = agent(
        state,
        'print("> prompt: say <promise>COMPLETE</promise> when done", file=sys.stderr)\n'
        'print("done" if n == 2 else "working")\n'
        'if n == 2: print("<promise>COMPLETE</promise>")\n',
    )
    result, out = loop(engine, cmd, LoopConfig(max_iterations=5))
    assert (result.exit_code, result.signal, result.iterations) == (0, "COMPLETE", 2)
    assert "> prompt: say" in out  # still shown
    first = turns(engine, "s1")[0]
    assert "COMPLETE" not in first.output_excerpt
    assert first.stderr_excerpt == "> prompt: say <promise>COMPLETE</promise> when done\n"


def test_a_failed_agent_run_is_a_failed_iteration(engine: Engine, state: Path) -> None:
    """Exit 1 with no rules: validation fails (score 0), a promise in its text does not complete, and
    the circuit breaker escalates after three failures in a row instead of burning every iteration."""
    cmd = agent(
        state,
        'print("<promise>COMPLETE</promise>")\n'
        'print("Error: Invalid API key", file=sys.stderr)\n'
        "raise SystemExit(1)\n",
    )
    result, _ = loop(engine, cmd, LoopConfig(max_iterations=10))
    assert (result.exit_code, result.signal) == (4, "ESCALATE")
    assert result.iterations == 3 and "circuit_breaker" in result.reason
    validations = [e for e in events_of(engine, "s1") if isinstance(e, E.ValidationRan)]
    assert [(v.passed, v.score) for v in validations] == [(False, 0.0)] * 3
    (agent_result,) = validations[0].results
    assert (agent_result.name, agent_result.type) == ("agent", "agent_run")
    assert agent_result.message == "agent exited 1: Error: Invalid API key"
    assert turns(engine, "s1")[0].failure == "agent exited 1: Error: Invalid API key"
    assert engine.status("s1")["status"] != "complete"


def test_a_failed_run_beside_passing_rules_still_fails(engine: Engine, state: Path) -> None:
    cmd = agent(state, 'print("<promise>COMPLETE</promise>")\nraise SystemExit(2)\n')
    rules = [{"name": "ok", "type": "command", "argv": [sys.executable, "-c", "pass"]}]
    result, _ = loop(engine, cmd, LoopConfig(max_iterations=1, rules=rules))
    validation = next(e for e in events_of(engine, "s1") if isinstance(e, E.ValidationRan))
    assert (validation.passed, validation.score) == (False, 50.0)
    assert [r.name for r in validation.results] == ["agent", "ok"]
    assert validation.results[0].message == "agent exited 2: <promise>COMPLETE</promise>"
    assert result.signal != "COMPLETE"


def test_a_limit_reported_on_stderr_is_seen(engine: Engine, state: Path) -> None:
    """Codex prints its usage limit on stderr in plain mode: the runner waits, it does not burn."""
    cmd = agent(
        state,
        "if n == 1:\n"
        '    print("ERROR: exceeded retry limit, last status: 429 Too Many Requests", file=sys.stderr)\n'
        "    raise SystemExit(1)\n"
        'print("<promise>COMPLETE</promise>")\n',
    )
    result, _ = loop(engine, [*cmd, "codex"], LoopConfig(max_iterations=3), rate_limit_wait_s=0.01)
    limited = [e for e in events_of(engine, "s1") if isinstance(e, E.RateLimited)]
    assert len(limited) == 1
    assert (result.signal, result.iterations) == ("COMPLETE", 1)


def test_the_agent_runs_with_pwd_naming_its_directory(work: Path, state: Path) -> None:
    """Some agents (opencode) work in ``$PWD``, not in their real working directory."""
    cmd = agent(state, 'import os\nprint(os.environ["PWD"])\n')
    run = run_agent(cmd, "hi", cwd=work, timeout_s=10, out=io.StringIO(), env={**os.environ, "PWD": "/"})
    assert run.output.strip() == str(work)


def test_a_stream_that_says_its_turn_failed_fails_the_iteration_even_on_exit_0(
    engine: Engine, state: Path
) -> None:
    """An agent whose own stream reports the error that ended it (Codex's ``turn.failed``) failed,
    whatever its exit code; the failure names that error, not its last stderr line."""
    cmd = agent(
        state,
        'print(json.dumps({"type": "item.completed", "item": {"id": "i0", "type": "agent_message",'
        ' "text": "<promise>COMPLETE</promise>"}}))\n'
        'print(json.dumps({"type": "turn.failed", "error": {"message": "stream disconnected"}}))\n'
        'print("WARNING: unrelated", file=sys.stderr)\n',
    )
    result, _ = loop(engine, cmd, LoopConfig(max_iterations=1), agent_format=FORMATS["codex"])
    assert result.signal != "COMPLETE"
    assert turns(engine, "s1")[0].failure == "agent reported: stream disconnected"


def test_a_limited_run_records_what_it_spent_by_model_and_is_priced(engine: Engine, state: Path) -> None:
    """Gemini CLI without ``-m`` asks its router (a small model) before the turn that hits a 429:
    the rate-limited run spent the router's tokens, recorded at the router's model and priced; the
    run that follows records each model apart too (the shapes of Gemini CLI 0.61.0's stream-json)."""
    from genai_prices import Usage, calc_price

    router = {"total_tokens": 46, "input_tokens": 40, "output_tokens": 6, "cached": 0, "input": 40}
    pro = {"total_tokens": 1300, "input_tokens": 1000, "output_tokens": 100, "cached": 0, "input": 1000}
    nothing = dict.fromkeys(pro, 0)
    too_many = "Please wait and try again later. To increase your limits, request a quota increase "
    too_many += "through AI Studio, or switch to another /auth method"
    error = {"type": "unknown", "message": f"[API Error: x]\n{too_many}"}
    runs = [
        {"type": "result", "status": "error", "error": error,
         "stats": {"models": {"gemini-3.5-flash-lite": router, "gemini-3.1-pro-preview": nothing}}},
        {"type": "result", "status": "success",
         "stats": {"models": {"gemini-3.5-flash-lite": router, "gemini-3.1-pro-preview": pro}}},
    ]  # fmt: skip
    cmd = agent(
        state,
        f"runs = {runs!r}\n"
        'print(json.dumps({"type": "init", "model": "auto"}))\n'
        'said = {"type": "message", "role": "assistant", "content": "<promise>COMPLETE</promise>"}\n'
        "print(json.dumps(said))\n"
        "print(json.dumps(runs[n - 1]))\n"
        "raise SystemExit(173 if n == 1 else 0)\n",
    )
    result, _ = loop(
        engine, cmd, LoopConfig(max_iterations=2), agent_format=FORMATS["gemini"], rate_limit_wait_s=0.01
    )
    assert (result.signal, result.iterations) == ("COMPLETE", 1)
    events = events_of(engine, "s1")
    [limited] = [e for e in events if isinstance(e, E.RateLimited)]
    assert (limited.model, limited.tokens) == ("gemini-3.5-flash-lite", E.TokenUsage(input=40, output=6))
    [turn] = turns(engine, "s1")
    assert (turn.model, turn.tokens) == ("gemini-3.1-pro-preview", E.TokenUsage(input=1000, output=300))
    others = [(e.model, e.tokens) for e in events if isinstance(e, E.ModelTokens)]
    assert others == [("gemini-3.5-flash-lite", E.TokenUsage(input=40, output=6))]  # no zero rows

    def price(model: str, i: int, o: int) -> float:
        return float(calc_price(Usage(input_tokens=i, output_tokens=o), model_ref=model).total_price)

    cost = 2 * price("gemini-3.5-flash-lite", 40, 6) + price("gemini-3.1-pro-preview", 1000, 300)
    [row] = engine.history("s1")
    assert (row["tokens_input"], row["tokens_output"]) == (2 * 40 + 1000, 2 * 6 + 300)
    assert row["cost_usd"] == pytest.approx(cost, abs=1e-9)


def test_an_interrupted_turn_is_priced_with_its_model(engine: Engine, state: Path) -> None:
    """Ctrl-C while a Codex-format agent runs: the partial turn keeps what its stream reported and the
    model its command asked for, so ``turn_costs`` prices it like any other turn."""
    usage = {"input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 300}
    cmd = agent(
        state,
        f"print(json.dumps({{'type': 'turn.completed', 'usage': {usage!r}}}), flush=True)\n"
        'print("agent-started", flush=True)\n'
        "time.sleep(30)\n",
    )
    codex = state.parent / "codex"  # named as the agent is: its -m is the model
    codex.write_text(f"#!{sys.executable}\n" + Path(cmd[1]).read_text())
    codex.chmod(0o755)
    out = InterruptingOut("agent-started")
    argv = [str(codex), str(state), "exec", "-m", "gpt-4.1"]
    result = run_loop(
        engine, "s1", LoopConfig(), argv, PROMPT, iteration_timeout_s=30, out=out, agent_format=named("codex")
    )
    assert result.exit_code == 130
    (turn,) = turns(engine, "s1")
    assert (turn.stop_reason, turn.model) == ("interrupted", "gpt-4.1")
    assert (turn.tokens.input, turn.tokens.cache_read, turn.tokens.output) == (1000, 200, 300)
    ledger = Ledger.memory(engine.home)
    ledger.ingest()
    (row,) = ledger.rows("SELECT cost_usd, cost_reported FROM turn_costs")
    assert row["cost_reported"] is False and row["cost_usd"] > 0

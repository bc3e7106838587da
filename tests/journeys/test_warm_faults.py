"""The fault suite's kills at each effect, inside the warm stop worker: the worker that serves a
stop SIGKILLs itself just before its K-th effect (a rename over a loop file, a loop file's removal,
a journal append, the reply to the hook), for every K of a stop. The hook process, left without a
reply, runs the stop itself (``ledger.drivers.claude_code.stop.warm``); the invariants of
``docs/reliability.md`` must hold as for kills of in-process stops: every block the agent was
given is recorded, no iteration number is started twice, the loop's iteration is 1 + its blocks,
the state file agrees with the journal, no temp file is left, and the agent always gets an answer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.journeys.conftest import Project, clean_env, script
from tests.journeys.test_claude_code import Claude, ledger_project, start
from tests.journeys.test_fault_suite import (
    EFFECTS,
    LOOP,
    STATE,
    Run,
    check_invariants,
    decisions_by_turn,
    journal_lines,
    session_of,
    state_iteration,
)

FAULTY_WORKER = (
    EFFECTS
    + r"""
from ledger.drivers.claude_code.stop import hook, warm_worker
real_run = hook.run
def run(raw, **kw):  # each stop's plan comes from the environment of the hook that asked for it
    global kill_at, trace, count
    kill_at = int(os.environ.get("RALPH_FAULT_KILL_AT", "0"))
    trace, count = os.environ.get("RALPH_FAULT_TRACE", ""), 0
    return real_run(raw, **kw)
hook.run = run
real_send = warm_worker.send
def send(conn, payload):
    effect("reply")
    return real_send(conn, payload)
warm_worker.send = send
sys.exit(warm_worker.main(sys.argv[1:]))
"""
)
"""``warm_worker HOME`` that SIGKILLs itself just before the K-th effect of a stop it serves (K
from that stop's hook environment, ``RALPH_FAULT_KILL_AT``: a variable a stop is sent), and can list a
stop's effects in a file."""


class Worker:
    """The faulty worker of a project's home, started by the test (a hook would start a plain one)."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        python = str(Path(script("ralph-ledger")).parent / "python")
        self.proc = subprocess.Popen([python, "-c", FAULTY_WORKER, str(self.project.home)], env=clean_env())
        sock = self.project.home / "stop-worker.sock"
        lock = self.project.home / "stop-worker.lock"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                if sock.exists() and int(lock.read_text()) == self.proc.pid:
                    return
            time.sleep(0.02)
        pytest.fail("the faulty worker did not start")

    def killed(self) -> bool:
        """Whether the worker killed itself (waits for it)."""
        assert self.proc is not None
        return self.proc.wait(timeout=60) == -signal.SIGKILL

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def warm_stop(project: Project, claude: Claude, kill_at: int = 0, trace: Path | None = None) -> Run:
    """A stop asked of the worker (``RALPH_WARM=1``), which kills itself before its ``kill_at``-th
    effect; the hook process must answer anyway."""
    env = clean_env(RALPH_WARM="1", RALPH_FAULT_KILL_AT=str(kill_at), RALPH_FAULT_TRACE=str(trace or ""))
    proc = project.cli("hook", "claude-code", input=claude.event(), env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc
    return Run("", "", proc.stdout)


@pytest.mark.parametrize("mode", ["plugin", "ledger"])
def test_a_worker_killed_before_each_of_its_effects_leaves_the_journal_agreeing_with_the_agent(
    project: Project, tmp_path: Path, mode: str
) -> None:
    if mode == "ledger":
        ledger_project(project)
    start(project, "Write the parser", "--max-iterations", "60", "--completion-promise", "DONE")
    claude = Claude(project)
    claude.text("turn 0")
    assert '"block"' in project.cli("hook", "claude-code", input=claude.event()).stdout  # the claim
    sid = session_of(project)
    worker = Worker(project)
    try:
        worker.start()
        claude.text("turn 1")
        trace = tmp_path / "trace"
        assert warm_stop(project, claude, 0, trace).printed_block
        effects = trace.read_text().splitlines()
        assert effects[-1] == "reply" and "append" in effects, effects
        if mode == "plugin":
            assert effects[0] == "rewrite ralph-loop.local.md", effects
        runs: list[Run] = []
        for k, name in enumerate(effects, 1):
            text = f"turn killed before {name} #{k}"
            claude.works(text)
            run = warm_stop(project, claude, k)
            assert worker.killed(), (k, name)
            assert run.printed_block, (k, name, run)  # the hook ran the stop itself
            runs.append(Run(text, name, run.stdout))
            worker.start()
            claude.works(f"turn after {name} #{k}")
            runs.append(Run(f"turn after {name} #{k}", "", warm_stop(project, claude).stdout))
            iteration = check_invariants(journal_lines(project, sid))[1]
            if mode == "plugin":
                assert state_iteration(project) == iteration, (k, name)
            leftovers = [p.name for p in (project.dir / ".claude").iterdir() if "ralph-tmp" in p.name]
            assert leftovers == [], (k, name, leftovers)
        recorded = decisions_by_turn(journal_lines(project, sid))
        assert [r.text for r in runs if r.printed_block and recorded.get(r.text) != "block"] == []
        claude.text("Parser written.\n<promise>DONE</promise>")
        assert "DONE" in warm_stop(project, claude).stdout
        assert not (project.dir / (STATE if mode == "plugin" else LOOP)).exists()
        unsaid = [r.killed_before for r in runs if recorded.get(r.text) == "block" and not r.printed_block]
        print(f"\nworker killed before each of {effects}: {len(runs)} stops, unsaid blocks {unsaid}")
    finally:
        worker.stop()
        with contextlib.suppress(OSError, ValueError):  # a plain worker a hook may have started
            os.kill(int((project.home / "stop-worker.lock").read_text()), signal.SIGTERM)

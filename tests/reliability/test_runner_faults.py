"""The runner and the processes it starts, under real faults (issue 25): two runners racing for one
session, ``ralph-ledger run`` and ``ralph-ledger mcp`` killed with SIGKILL while their agent or a
rule runs, a resume after a kill that cut a step's append short, an export killed mid-write.

Every test runs the installed ``ralph-ledger`` as a user does, with real processes and signals. The
seed is printed; ``FAULT_SEED=<seed>`` repeats a run's choices (not its timing); ``--long`` runs more
trials. The rules these hold: docs/design/child-processes.md, docs/design/loop-step.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.helpers import AGENT_PREAMBLE
from tests.journeys.conftest import Project, clean_env, script
from tests.journeys.mcp_client import connect

SEED = int(os.environ.get("FAULT_SEED") or random.SystemRandom().randrange(1, 10**9))

HELPERS = """
import os
def alive(pid):
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
def family(state):
    # a child and a grandchild in this process's group, their pids noted with ours
    argv = ["sh", "-c", 'sleep 120 & echo $! >> "$1"; echo $$ >> "$1"; wait', "sh", str(state / "pids")]
    subprocess.Popen(argv)
def note(state, pid):
    with open(state / "pids", "a") as f:
        f.write(f"{pid}\\n")
"""

AGENT = (
    AGENT_PREAMBLE
    + HELPERS
    + """
live = state / "live"
live.mkdir(exist_ok=True)
others = [p.name for p in live.iterdir() if alive(int(p.name))]
if others:
    with open(state / "overlap", "a") as f:
        f.write(f"agent {os.getpid()} started beside agents {others}\\n")
(live / str(os.getpid())).touch()
note(state, os.getpid())
if (state / "finish").exists():
    (live / str(os.getpid())).unlink()
    print("<promise>COMPLETE</promise>", flush=True)
    sys.exit(0)
if (state / "agent").exists():
    family(state)
    time.sleep(120)
if (state / "rule").exists():  # its rule hangs instead
    (live / str(os.getpid())).unlink()
    sys.exit(0)
while not (state / "go").exists():
    time.sleep(0.02)
(live / str(os.getpid())).unlink()
if n >= 2:
    print("<promise>COMPLETE</promise>", flush=True)
"""
)
"""The agent of these families (``python agent.py STATE``): it notes its pid in ``STATE/pids`` and says
in ``STATE/overlap`` when it started while another of its runs was alive. With ``STATE/finish`` it
completes at once; with ``STATE/agent`` it starts a child and a grandchild and hangs; with
``STATE/rule`` it ends at once (its rule hangs); else it waits for ``STATE/go`` and completes from its
second run on."""

RULE = (
    """import pathlib, subprocess, sys, time
state = pathlib.Path(sys.argv[1])
"""
    + HELPERS
    + """
with open(state / "rule-runs", "a") as f:
    f.write("ran\\n")
if (state / "rule").exists() and not (state / "finish").exists():
    note(state, os.getpid())
    family(state)
    time.sleep(120)
"""
)
"""A command rule (``python rule.py STATE``) that counts its runs in ``STATE/rule-runs``; with
``STATE/rule`` (and not ``STATE/finish``) it starts a child and a grandchild and hangs."""


@pytest.fixture(scope="module", autouse=True)
def seed() -> Iterator[None]:
    """Print the seed (visible with ``-s``)."""
    print(f"\nrunner faults: FAULT_SEED={SEED}")
    yield


def trials(request: pytest.FixtureRequest, quick: int, long: int) -> int:
    """How many trials a test runs: ``long`` with ``--long``."""
    return long if request.config.getoption("--long", default=False) else quick


class Family:
    """A fresh project whose loop runs ``AGENT`` with ``RULE`` as its validation, and the state
    folder they share."""

    def __init__(self, root: Path, *, max_iterations: int = 3) -> None:
        self.project = Project(root / "project")
        self.state = root / "state"
        self.state.mkdir(parents=True)
        (root / "agent.py").write_text(AGENT)
        (root / "rule.py").write_text(RULE)
        self.cmd = [sys.executable, str(root / "agent.py"), str(self.state)]
        rule = [sys.executable, str(root / "rule.py"), str(self.state)]
        self.project.write(
            "ralph.toml",
            f"max_iterations = {max_iterations}\n[[rules]]\nname = 'slow'\ntype = 'command'\n"
            f"argv = {json.dumps(rule)}\n[guards.validation_stall]\nenabled = false\n",
        )
        self.project.write("PROMPT.md", "Make the tests pass.\n")

    def start(self, session: str = "s1") -> subprocess.Popen[str]:
        """``run --session SESSION`` in the background, in its own process group (a shell's job)."""
        argv = [script("ralph-ledger"), "run", "--session", session, "--prompt", "PROMPT.md", "--", *self.cmd]
        return self.popen(argv)

    def resume(self, session: str = "s1") -> subprocess.Popen[str]:
        """``run --resume SESSION`` in the background."""
        return self.popen([script("ralph-ledger"), "run", "--resume", session])

    def popen(self, argv: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            argv,
            cwd=self.project.dir,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def pids(self) -> list[int]:
        """Every pid the agents and rules noted."""
        path = self.state / "pids"
        return [int(w) for w in path.read_text().split()] if path.exists() else []

    def runs(self) -> int:
        """How many times the agent ran."""
        path = self.state / "count"
        text = path.read_text().strip() if path.exists() else ""
        return int(text) if text.isdigit() else 0  # (0 too while the agent writes it)

    def events(self, session: str = "s1") -> list[dict[str, Any]]:
        """The session's events (a torn line left by a kill is skipped)."""
        path = self.project.home / "journals" / f"{session}.jsonl"
        out = []
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def iterations(self, kind: str, session: str = "s1") -> list[int]:
        """The iterations of the session's events of type ``kind``, in order."""
        return [e["iteration"] for e in self.events(session) if e["type"] == kind]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def survivors(pids: list[int], seconds: float = 5.0) -> list[int]:
    """The pids still alive after ``seconds`` (killed then, so that no trial leaves any behind)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and any(alive(p) for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if alive(p)]
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


def wait_until(test: Any, proc: subprocess.Popen[str], seconds: float = 30.0) -> None:
    """Poll ``test()`` until it holds, while ``proc`` runs."""
    end = time.monotonic() + seconds
    while not test():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            pytest.fail(f"never happened; the runner said {proc.communicate()}")
        time.sleep(0.02)


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    """Wait for ``proc``; its exit code, stdout and stderr."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def busy(pid: int, session: str = "s1") -> str:
    """The one line a runner refused beside runner ``pid`` says."""
    return (
        f"ralph-ledger run: session {session!r} is already running in another process (PID {pid}): "
        "one run at a time"
    )


def watcher_of(pid: int) -> int | None:
    """The watcher process ``pid`` started (``ledger.core.processes``), if any."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if ppid == pid and b"-c" in argv and b"-S" in argv:
                return int(entry.name)
    return None


# ----------------------------------------------------------------------------- 1. two runners
def test_two_runners_never_drive_one_session(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Races, for real: a resume (two at once) while the runner is mid-turn; two starts of one new
    session at once; two resumes at once after the runner was killed. Each time one runner drives,
    every other exits 1 naming its PID, no agent starts beside another, and every agent turn that
    ran to its end is journaled once."""
    for trial in range(trials(request, 2, 8)):
        race_mid_turn(Family(tmp_path / f"a{trial}"))
        race_starts(Family(tmp_path / f"b{trial}"))
        race_resumes(Family(tmp_path / f"c{trial}"))


def race_mid_turn(fam: Family) -> None:
    """A runner mid-turn, and two resumes started together."""
    runner = fam.start()
    wait_until(lambda: fam.runs() == 1, runner)
    resumes = [fam.resume(), fam.resume()]
    for proc in resumes:
        code, out, err = finish(proc)
        assert (code, out, err.splitlines()) == (1, "", [busy(runner.pid)])
    (fam.state / "go").touch()
    code, out, err = finish(runner)
    assert code == 0, (out, err)
    assert fam.runs() == 2 and fam.iterations("agent_turn") == [1, 2]
    assert not (fam.state / "overlap").exists()


def race_starts(fam: Family) -> None:
    """Two starts of one new session at once."""
    both = [fam.start("s2"), fam.start("s2")]
    driver, (code, out, err) = one_refused(both, fam)
    assert (code, err.splitlines()) == (1, [busy(driver.pid, "s2")]), out
    (fam.state / "go").touch()
    assert finish(driver)[0] == 0
    assert fam.runs() == 2 and fam.iterations("agent_turn", "s2") == [1, 2]
    assert fam.iterations("session_started", "s2") == [0]
    assert not (fam.state / "overlap").exists()


def race_resumes(fam: Family) -> None:
    """The runner killed mid-turn, then two resumes at once."""
    runner = fam.start()
    wait_until(lambda: fam.runs() == 1, runner)
    runner.kill()
    finish(runner)
    assert survivors(fam.pids()) == []
    both = [fam.resume(), fam.resume()]
    driver, (code, out, err) = one_refused(both, fam, runs=2)
    assert (code, err.splitlines()) == (1, [busy(driver.pid)]), out
    (fam.state / "go").touch()
    assert finish(driver)[0] == 0
    assert fam.runs() == 2  # the killed run's turn never ended: it is not a turn
    assert fam.iterations("agent_turn") == [1]
    assert not (fam.state / "overlap").exists()


def one_refused(
    both: list[subprocess.Popen[str]], fam: Family, runs: int = 1, seconds: float = 30.0
) -> tuple[subprocess.Popen[str], tuple[int, str, str]]:
    """Of two runners started together, the one that drives (its agent waits for ``go``) and what
    the other said when it ended (it must, while the driver still runs)."""
    end = time.monotonic() + seconds
    while fam.runs() < runs or all(p.poll() is None for p in both):
        if time.monotonic() > end or all(p.poll() is not None for p in both):
            for p in both:
                p.kill()
            pytest.fail(f"not one driver and one refused: {[p.communicate() for p in both]}")
        time.sleep(0.02)
    ended = [p for p in both if p.poll() is not None]
    assert len(ended) == 1, [p.communicate() for p in both]
    driver = next(p for p in both if p is not ended[0])
    return driver, finish(ended[0])


# ----------------------------------------------------------------------------- 3. no orphans
def test_a_runner_killed_at_any_moment_leaves_no_process_and_its_resume_runs_one_agent(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """SIGKILL of ``ralph-ledger run`` at random moments, while its agent (with a child and a
    grandchild) or a rule (the same) runs, or before either started: none of their processes
    survives it, and the resume that follows runs its agent alone and completes."""
    rng = random.Random(f"{SEED}-orphans")
    left: list[str] = []
    for trial in range(trials(request, 6, 30)):
        fam = Family(tmp_path / f"t{trial}")
        hangs = "agent" if trial % 2 == 0 else "rule"
        (fam.state / hangs).touch()
        runner = fam.start()
        if trial % 3 == 2:  # any moment, maybe before the agent started
            time.sleep(rng.uniform(0.0, 1.5))
        else:  # while they run: the family is up (the hanging one, its child and grandchild)
            up = 3 if hangs == "agent" else 4
            wait_until(lambda fam=fam, up=up: len(fam.pids()) >= up, runner)
            time.sleep(rng.uniform(0.0, 0.3))
        runner.kill()
        finish(runner)
        noted = fam.pids()
        if gone := survivors(noted):
            left.append(f"trial {trial} ({hangs}): {gone} of {noted} survived the runner")
        if not (fam.project.home / "journals" / "s1.jsonl").exists():
            continue  # killed before the session started: nothing to resume
        (fam.state / "finish").touch()
        code, out, err = finish(fam.resume())
        assert code == 0, (out, err)
        overlap = fam.state / "overlap"
        if overlap.exists():
            left.append(f"trial {trial} ({hangs}): {overlap.read_text().strip()}")
    assert left == []


def test_a_resume_ends_an_agent_group_that_outlived_its_runner_and_the_watcher(tmp_path: Path) -> None:
    """The runner and its watcher both killed: the agent's grandchildren are still there. The resume
    ends their group, says so in one line, and only then runs its agent."""
    fam = Family(tmp_path)
    (fam.state / "agent").touch()
    runner = fam.start()
    wait_until(lambda: len(fam.pids()) >= 3, runner)
    agent = fam.pids()[0]
    watcher = watcher_of(runner.pid)
    if watcher is not None:
        os.kill(watcher, signal.SIGKILL)
    runner.kill()
    finish(runner)
    kids = fam.pids()[1:]
    time.sleep(0.5)
    assert all(alive(p) for p in kids)  # the fault: its group outlived both
    (fam.state / "finish").touch()
    code, out, err = finish(fam.resume())
    assert code == 0, (out, err)
    assert f"[ralph-ledger] s1: ended process group {agent}, left running by a killed run\n" in out
    assert survivors(kids, 0.5) == []
    assert not (fam.state / "overlap").exists()


# ----------------------------------------------------------------------------- 5. the MCP server
def test_a_killed_mcp_server_leaves_no_rule_process(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """SIGKILL of ``ralph-ledger mcp`` while ``iteration_validate`` runs a command rule that started a
    child and a grandchild: none of them survives the server."""
    left: list[str] = []
    for trial in range(trials(request, 2, 10)):
        fam = Family(tmp_path / f"t{trial}")
        (fam.state / "rule").touch()
        pause = random.Random(f"{SEED}-mcp-{trial}").uniform(0, 0.3)

        async def killed(fam: Family = fam, pause: float = pause) -> None:
            async with connect(fam.project.dir) as agent:
                await agent.call("iteration_start", taskId="mcp", task="Make the tests pass")
                with anyio.move_on_after(60):
                    async with anyio.create_task_group() as tasks:

                        async def validate() -> None:
                            await agent.call("iteration_validate", taskId="mcp", agentOutput="done?")

                        tasks.start_soon(validate)
                        while len(fam.pids()) < 3:
                            await anyio.sleep(0.02)
                        await anyio.sleep(pause)
                        os.kill(agent.server_pid, signal.SIGKILL)
                        tasks.cancel_scope.cancel()

        with contextlib.suppress(Exception):  # the client sees its server gone
            anyio.run(killed)
        if gone := survivors(fam.pids()):
            left.append(f"trial {trial}: {gone} of {fam.pids()} survived the server")
    assert left == []


# ----------------------------------------------------------------------------- 4. a step cut short
def test_a_resume_finishes_a_step_a_kill_cut_short_and_never_repeats_it(tmp_path: Path) -> None:
    """The runner killed while it appended iteration 2's step: a SIGKILL during the write leaves the
    lines up to a page boundary (the crash suite sees it: a torn line). Cut there after each event
    of the step (the killed runner's journal cut back, the next line half written), the resume
    finishes the step from the journal: validations 1, 2, 3 (never 2 twice), each turn journaled
    once, and neither the agent nor the rules of iteration 2 run again once they were recorded."""
    fam = Family(tmp_path / "first", max_iterations=4)
    (fam.state / "rule-runs").touch()
    agent = tmp_path / "first" / "agent.py"
    agent.write_text(AGENT_PREAMBLE + STEPPED)
    runner = fam.start()
    wait_until(lambda: fam.runs() == 3, runner)  # iteration 3 runs: steps 1 and 2 are in the journal
    runner.kill()
    finish(runner)
    assert survivors(fam.pids()) == []
    journal = fam.project.home / "journals" / "s1.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    types = [json.loads(line)["type"] for line in lines]
    its = [json.loads(line).get("iteration") for line in lines]
    first = next(i for i, (t, n) in enumerate(zip(types, its, strict=True)) if t == "agent_turn" and n == 2)
    last = next(
        i for i, (t, n) in enumerate(zip(types, its, strict=True)) if t == "iteration_started" and n == 3
    )
    while last + 1 < len(lines) and its[last + 1] == 3 and types[last + 1] == "checkpoint_created":
        last += 1
    assert "validation_ran" in types[first:last] and "signal_resolved" in types[first:last]
    seen: list[str] = []
    old = str(tmp_path / "first").encode()
    for cut in range(first, last + 1):  # lines[first:cut] landed whole, lines[cut] half
        root = tmp_path / f"cut{cut}"
        shutil.copytree(tmp_path / "first", root, symlinks=True)
        trial = Family.__new__(Family)
        trial.project, trial.state = Project.__new__(Project), root / "state"
        trial.project.dir, trial.project.home = root / "project", root / "project" / ".ralph"
        moved = [line.replace(old, str(root).encode()) for line in lines]  # its agent, rule, state
        torn = moved[cut][: len(moved[cut]) // 2]
        (trial.project.home / "journals" / "s1.jsonl").write_bytes(b"".join(moved[:cut]) + torn)
        (trial.state / "go").touch()
        before = (trial.state / "rule-runs").read_text().count("ran")
        code, out, err = finish(trial.resume())
        assert code == 0, (cut, out, err)
        landed = types[first:cut]
        assert trial.iterations("validation_ran") == [1, 2, 3], (landed, out)
        assert trial.iterations("agent_turn") == [1, 2, 3], landed
        assert trial.iterations("signal_resolved") == [1, 2, 3], landed
        assert trial.iterations("iteration_started") == [1, 2, 3], landed
        agent_again = 0 if "agent_turn" in landed else 1  # nothing of the turn landed: it runs again
        assert trial.runs() == 3 + 1 + agent_again, landed
        rules_again = 0 if "validation_ran" in landed else 1
        assert (trial.state / "rule-runs").read_text().count("ran") - before == 1 + rules_again, landed
        seen.append("+".join(landed) or "nothing")
    assert len(seen) >= 5, seen


STEPPED = """
import os
journal = pathlib.Path(os.environ["PWD"]) / ".ralph" / "journals" / "s1.jsonl"
started = []
for x in journal.read_text().splitlines():
    try:
        e = json.loads(x)
    except ValueError:  # a line a kill tore
        continue
    if e["type"] == "iteration_started":
        started.append(e["iteration"])
it = max(started)
print(f"working on iteration {it}", flush=True)
if it == 3:
    while not (state / "go").exists():
        time.sleep(0.02)
    print("<promise>COMPLETE</promise>", flush=True)
"""
"""An agent (after ``AGENT_PREAMBLE``) that reads its iteration from the journal, hangs in iteration 3
until ``STATE/go``, and completes there."""


# ----------------------------------------------------------------------------- 15. export leftovers
KILLED_AT_RENAME = """\
import os, signal, sys
real = os.replace
def replace(src, dst, *a, **k):
    if ".sql." in str(src):  # a view file written in full; the kill comes before its rename
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *a, **k)
os.replace = replace
from ledger.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_an_export_sweeps_the_temp_files_of_killed_exports(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Exports killed (SIGKILL) while they write the views, at the rename and at random moments: the
    next export removes every temp file they left once it is stale (a minute old: the dataset may be
    shared with other machines), and keeps a live writer's, a fresh one and files not ours."""
    project = Project(tmp_path / "project")
    dest = tmp_path / "dataset"
    env = clean_env()
    assert project.cli("export", "--parquet", str(dest)).returncode == 0
    views = dest / "views"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT_RENAME, "export", "--parquet", str(dest)],
        cwd=project.dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    rng = random.Random(f"{SEED}-export")
    for _ in range(trials(request, 3, 20)):
        proc = subprocess.Popen(
            [script("ralph-ledger"), "export", "--parquet", str(dest)], cwd=project.dir, env=env
        )
        time.sleep(rng.uniform(0.2, 1.5))
        proc.kill()
        proc.wait()
    left = [p for p in views.rglob(".*") if p.is_file()]
    assert left, "the fault: a killed export left its temp file"
    stale = time.time() - 120
    for path in left:
        os.utime(path, (stale, stale))
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = gone.pid
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (views / "duckdb").mkdir(parents=True, exist_ok=True)
        keep = [
            views / "duckdb" / f".01-sessions.sql.{live.pid}.tmp",  # a live writer's
            views / f".02-iterations.sql.ralph-tmp.{dead}.1",  # fresh: maybe another machine's
            views / ".notes.tmp",  # not ours
        ]
        for path in keep:
            path.write_text("x")
        os.utime(keep[0], (stale, stale))
        os.utime(keep[2], (stale, stale))
        assert project.cli("export", "--parquet", str(dest)).returncode == 0
        assert sorted(p for p in views.rglob(".*") if p.is_file()) == sorted(keep)
    finally:
        live.kill()
        live.wait()

"""Journeys of ``ralph-ledger run``: the installed command in a fresh git project, a small scripted
agent (a Python program in the test's temporary folder), real rule commands, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import AGENT_PREAMBLE
from tests.journeys.conftest import Project, clean_env, script

TASK = "Make the tests pass.\n"
LABEL = TASK.strip()
"""The session's task: the prompt without its last newline (the agent gets the prompt as written)."""

AGENT = "import os\n" + AGENT_PREAMBLE + '(state / f"prompt{n}.txt").write_text(prompt)\n'
"""The start of every scripted agent: it counts its runs (``n``) and keeps each run's prompt."""

HANG = """\
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
(state / "pids").write_text(f"{os.getpid()} {child.pid}")
print("agent-started", flush=True)
time.sleep(60)
"""
"""Agent code that starts a child, says so, writes both pids to ``STATE/pids`` and hangs."""

RULE = """\
import os, pathlib, subprocess, sys, time
state = pathlib.Path(sys.argv[1])
if (state / "rule-ran").exists():
    sys.exit(0)
(state / "rule-ran").touch()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
(state / "rule-pids").write_text(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""
"""A validation rule that hangs the first time it runs (with a child), and passes afterwards."""


class Loop:
    """A project, a state folder and a scripted agent for ``ralph-ledger run``."""

    def __init__(self, project: Project, tmp: Path, body: str) -> None:
        self.project = project
        self.state = tmp / "state"
        self.state.mkdir()
        self.agent = tmp / "agent.py"
        self.agent.write_text(AGENT + body)
        self.cmd = [sys.executable, str(self.agent), str(self.state)]
        project.write("PROMPT.md", TASK)

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``ralph-ledger run ARGS`` (``--`` and the agent command are the caller's)."""
        return self.project.cli("run", *args, timeout=timeout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``ralph-ledger run --session s1 --prompt PROMPT.md ARGS -- AGENT`` started in the
        background, in its own process group (as a shell runs a foreground job)."""
        argv = [script("ralph-ledger"), "run", "--session", "s1", "--prompt", "PROMPT.md", *args, "--"]
        return subprocess.Popen(
            [*argv, *self.cmd],
            cwd=self.project.dir,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def types(self) -> list[str]:
        """The types of session ``s1``'s events, in order."""
        return [e["type"] for e in self.project.journal("s1")]


def resume(project: Project, session: str = "s1") -> subprocess.CompletedProcess[str]:
    """``ralph-ledger run --resume SESSION`` as a user types it: nothing on stdin, nothing else."""
    return subprocess.run(
        [script("ralph-ledger"), "run", "--resume", session],
        cwd=project.dir,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def wait_for(path: Path, proc: subprocess.Popen[Any], seconds: float = 20) -> list[int]:
    """The pids written to ``path`` once it appears (while ``proc`` still runs)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists() and len(path.read_text().split()) == 2:
            return [int(p) for p in path.read_text().split()]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"{path} never appeared: {proc.communicate()}")


def wait_for_file(path: Path, proc: subprocess.Popen[Any], seconds: float = 20) -> None:
    """Wait until ``path`` exists (while ``proc`` still runs)."""
    end = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > end:
            proc.kill()
            pytest.fail(f"{path} never appeared: {proc.communicate()}")
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a reaper counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def all_dead(pids: list[int], seconds: float = 5) -> bool:
    """Whether every pid has ended within ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def send(proc: subprocess.Popen[str], signum: int) -> None:
    """Ctrl-C reaches the terminal's whole foreground group; ``kill`` and a closing terminal the
    process."""
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)


SIGNALS = [
    pytest.param(signal.SIGINT, 130, "interrupted (Ctrl-C)", id="SIGINT"),
    pytest.param(signal.SIGTERM, 143, "interrupted (SIGTERM)", id="SIGTERM"),
    pytest.param(signal.SIGHUP, 129, "interrupted (SIGHUP)", id="SIGHUP"),
]


# ----------------------------------------------------------------------------- 2.1 prompts
def test_every_prompt_is_the_task_plus_what_the_loop_learned(project: Project, tmp_path: Path) -> None:
    """With the default hook answering, iteration 2 and 3 get the task and then the hook's next
    prompt (the failing rule); before, they got the hook's next prompt alone."""
    code = "import os, sys; sys.exit(0 if os.path.exists('tests.ok') else 1)"
    rule = f"[[rules]]\nname = 'tests'\ntype = 'command'\nargv = [{sys.executable!r}, '-c', {code!r}]\n"
    project.write("ralph.toml", "hooks = ['default']\n" + rule + "[guards.circuit_breaker]\nthreshold = 5\n")
    loop = Loop(
        project,
        tmp_path,
        "if n == 3: pathlib.Path('tests.ok').touch(); print('<promise>COMPLETE</promise>')\n",
    )
    proc = loop.run("--session", "p1", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert proc.returncode == 0, proc.stderr
    prompts = [(loop.state / f"prompt{n}.txt").read_text() for n in (1, 2, 3)]
    assert prompts[0] == TASK
    for n, text in ((1, prompts[1]), (2, prompts[2])):
        assert text == (
            f"Make the tests pass.\n\nFeedback from iteration {n}:\n"
            "Fix the failing validation rules: tests: exited with code 1 (no output)"
        )


def test_the_claude_code_hook_gives_the_runners_next_prompt(project: Project, tmp_path: Path) -> None:
    """The same task, configuration and failing iteration: the ledger-native Stop hook blocks with the
    prompt the runner feeds its agent, word for word (one composition: the runner used to send the
    hooks' next prompt without the task; the hook, the task with the hooks' next prompt or the
    feedback, never both)."""
    from tests.journeys.test_claude_code import Claude, block, start

    code = "import sys; sys.exit(1)"
    rule = f"[[rules]]\nname = 'tests'\ntype = 'command'\nargv = [{sys.executable!r}, '-c', {code!r}]\n"
    project.write("ralph.toml", "hooks = ['default']\nmax_iterations = 2\n" + rule)
    loop = Loop(project, tmp_path, "")
    assert loop.run("--session", "r1", "--prompt", "PROMPT.md", "--", *loop.cmd).returncode == 4
    fed = (loop.state / "prompt2.txt").read_text()
    assert fed.startswith(TASK.rstrip() + "\n\nFeedback from iteration 1:\nFix the failing validation rules")

    start(project, TASK.rstrip(), "--mode", "ledger")
    claude = Claude(project)
    claude.prompt(TASK.rstrip())
    claude.text("Not done yet.")
    assert block(claude.stop())["reason"] == fed


# ----------------------------------------------------------------------------- 2.2 the record
def test_a_session_records_its_prompt_and_command_and_resumes_from_them(
    project: Project, tmp_path: Path
) -> None:
    """``sessions`` shows a runner session's task and agent (both ``-`` before), and an interrupted
    session resumes with ``--resume`` alone: the recorded prompt and agent command, stdin unread."""
    loop = Loop(project, tmp_path, "if n == 1:\n" + "".join(f"    {line}\n" for line in HANG.splitlines()))
    loop.agent.write_text(loop.agent.read_text() + "print('<promise>COMPLETE</promise>')\n")
    proc = loop.start()
    wait_for(loop.state / "pids", proc)
    send(proc, signal.SIGINT)
    assert proc.wait(timeout=20) == 130
    (row,) = project.sessions()
    assert (row["status"], row["task"], row["agent"]) == ("running", LABEL, Path(sys.executable).name)

    resumed = project.cli("run", "--resume", "s1", input="not the prompt\n")
    assert resumed.returncode == 0, resumed.stderr
    assert (loop.state / "prompt2.txt").read_text() == TASK
    (row,) = project.sessions()
    assert (row["status"], row["task"], row["agent"]) == ("complete", LABEL, Path(sys.executable).name)


# ----------------------------------------------------------------------------- stop and set
WAIT = """\
while not (state / f"go{n}").exists():
    time.sleep(0.02)
print(f"iteration {n} done", flush=True)
"""
"""Agent code that waits for ``STATE/go<n>`` before it ends its turn (without a promise)."""


def test_stop_from_another_terminal_ends_the_loop_at_its_next_validate(
    project: Project, tmp_path: Path
) -> None:
    """README: ``ralph-ledger stop SESSION --reason ...`` is honoured at the session's next validate."""
    loop = Loop(project, tmp_path, WAIT)
    proc = loop.start()
    wait_for_file(loop.state / "prompt1.txt", proc)
    stop = project.cli("stop", "s1", "--reason", "lunch")
    assert stop.returncode == 0, stop.stderr
    (loop.state / "go1").touch()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, (out, err)
    assert "s1: iteration 1: BLOCKED (manual stop: lunch)" in out
    assert (loop.state / "count").read_text() == "1"
    assert project.sessions()[0]["status"] == "blocked"


def test_set_from_another_terminal_changes_the_iteration_limit(project: Project, tmp_path: Path) -> None:
    """README: ``ralph-ledger set SESSION --max-iterations N`` is honoured at the next validate, and
    the runner's lines count up to the new limit (they kept saying ``of 15``)."""
    loop = Loop(project, tmp_path, WAIT)
    (loop.state / "go2").touch()  # iteration 2 runs straight through
    proc = loop.start()
    wait_for_file(loop.state / "prompt1.txt", proc)
    changed = project.cli("set", "s1", "--max-iterations", "2", "--reason", "budget")
    assert changed.returncode == 0, changed.stderr
    (loop.state / "go1").touch()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, (out, err)
    assert "s1: iteration 2 of 2\n" in out
    assert "max_iterations: Max iterations (2) reached without completion" in err
    assert (loop.state / "count").read_text() == "2"


# ----------------------------------------------------------------------------- 2.2 + 2.3 signals
@pytest.mark.parametrize(("signum", "code", "reason"), SIGNALS)
def test_a_signal_while_the_agent_runs_ends_it_records_and_resumes(
    project: Project, tmp_path: Path, signum: int, code: int, reason: str
) -> None:
    """Ctrl-C, SIGTERM (``kill``) and SIGHUP (the terminal closed) all end the agent's process group,
    record its partial turn and an ``interrupted`` override, exit 128 + the signal, and leave a
    session that ``--resume`` continues with the recorded prompt and agent command alone."""
    loop = Loop(project, tmp_path, "if n == 1:\n" + "".join(f"    {line}\n" for line in HANG.splitlines()))
    (loop.agent.parent / "agent.py").write_text(
        loop.agent.read_text() + "print('<promise>COMPLETE</promise>')\n"
    )
    proc = loop.start("--timeout", "60")
    pids = wait_for(loop.state / "pids", proc)
    assert loop.types()[-2:] == ["iteration_started", "checkpoint_created"]  # the agent is running
    send(proc, signum)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == code, (out, err)
    assert err.strip().splitlines() == [f"ralph-ledger run: s1: interrupted after 1 iteration: {reason}"]
    assert f"{reason}; resume with --resume s1" in out
    assert all_dead(pids), "the agent or its child survived"
    events = project.journal("s1")
    turn, override = events[-2:]
    assert (turn["type"], turn["stop_reason"], turn["iteration"]) == ("agent_turn", "interrupted", 1)
    assert "agent-started" in turn["output_excerpt"]
    assert (override["type"], override["kind"], override["reason"]) == ("override", "interrupted", reason)
    (row,) = project.sessions()
    assert (row["status"], row["task"], row["agent"]) == ("running", LABEL, Path(sys.executable).name)

    resumed = resume(project)
    assert resumed.returncode == 0, resumed.stderr
    assert "s1: COMPLETE after 1 iteration" in resumed.stdout
    assert (loop.state / "prompt2.txt").read_text() == TASK  # the recorded prompt, given again
    assert project.sessions()[0]["status"] == "complete"


@pytest.mark.parametrize(("signum", "code", "reason"), SIGNALS)
def test_a_signal_while_a_rule_runs_ends_it_and_records_the_turn(
    project: Project, tmp_path: Path, signum: int, code: int, reason: str
) -> None:
    """Interrupted during validation, the rule's process group ends too (it used to run on, and
    nothing was recorded); the agent's finished turn and the override are in the journal."""
    rule = tmp_path / "rule.py"
    rule.write_text(RULE)
    argv = [sys.executable, str(rule), str(tmp_path / "state")]
    project.write("ralph.toml", f"[[rules]]\nname = 'slow'\ntype = 'command'\nargv = {argv!r}\n")
    loop = Loop(project, tmp_path, "print('done <promise>COMPLETE</promise>')\n")
    proc = loop.start()
    pids = wait_for(loop.state / "rule-pids", proc)
    send(proc, signum)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == code, (out, err)
    assert all_dead(pids), "the rule or its child survived"
    turn, override = project.journal("s1")[-2:]
    assert (turn["type"], turn["stop_reason"]) == ("agent_turn", "exit 0")
    assert "done <promise>COMPLETE</promise>" in turn["output_excerpt"]
    assert (override["type"], override["kind"], override["reason"]) == ("override", "interrupted", reason)
    assert "validation_ran" not in loop.types()

    resumed = loop.run("--resume", "s1")
    assert resumed.returncode == 0, resumed.stderr
    assert project.sessions()[0]["status"] == "complete"


# ----------------------------------------------------------------------------- 2.4 configuration
@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("max_iterations = 0\n", 'ralph.toml: max_iterations: expected a whole number >= 1 or "auto", got 0'),
        ("hooks = ['defualt']\n", "ralph.toml: hooks[0]: unknown hook 'defualt' (expected one of:"),
        (
            "[[rules]]\nname = 'p'\ntype = 'content_pattern'\npattern = '[a-'\n",
            "ralph.toml: rules[0].pattern: invalid regular expression '[a-'",
        ),
        (
            "[guards.circuit_breaker]\nthreshold = 0\n",
            "guards.circuit_breaker.threshold: expected a whole number",
        ),
        ("[guards.time_limit]\nseconds = -5.0\n", "guards.time_limit.seconds: expected a finite number"),
        ("[guards.token_budget]\ntokens = 5000\n", "guards.token_budget.tokens: never takes effect while"),
        ("[guards.max_stop_retries]\nlimit = 2\n", "never takes effect in `ralph-ledger run`"),
        (
            "exclusive_promises = true\ncompletion_promises = []\n",
            "completion_promises: expected at least one promise word while exclusive_promises is true",
        ),
    ],
)
def test_a_configuration_that_would_fail_never_starts_the_agent(
    project: Project, tmp_path: Path, config: str, message: str
) -> None:
    project.write("ralph.toml", config)
    loop = Loop(project, tmp_path, "")
    proc = loop.run("--session", "c1", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert proc.returncode == 1 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"ralph-ledger run: {project.dir / 'ralph.toml'}: ") and message in line
    assert not (loop.state / "count").exists(), "the agent was started"
    assert not (project.home / "journals" / "c1.jsonl").exists()


# ----------------------------------------------------------------------------- 2.5 usage errors
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--timeout", "0"],
            "ralph-ledger run: argument --timeout: expected a number of seconds > 0, got '0'",
        ),
        (
            ["--timeout", "inf"],
            "ralph-ledger run: argument --timeout: expected a number of seconds > 0, got 'inf'",
        ),
        (["--session", "../x"], "ralph-ledger run: argument --session: '../x': expected 1-128 characters"),
        (["--resume", "../x"], "ralph-ledger run: argument --resume: '../x': expected 1-128 characters"),
        (
            ["--rate-limit-wait", "0"],
            "ralph-ledger run: argument --rate-limit-wait: expected a number of seconds > 0, got '0'",
        ),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    project: Project, tmp_path: Path, args: list[str], message: str
) -> None:
    loop = Loop(project, tmp_path, "")
    proc = loop.run(*args, "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(message)
    assert not (loop.state / "count").exists() and not (project.home / "journals").exists()


def test_sighup_when_the_terminal_closes(project: Project, tmp_path: Path) -> None:
    """The loop runs in a terminal (a pseudo-terminal) that closes: the journal has the interrupted
    turn and the override, and the exit status is still 129, not an I/O error's 1."""
    import pty

    loop = Loop(project, tmp_path, HANG)
    master, slave = pty.openpty()
    argv = [script("ralph-ledger"), "run", "--session", "s1", "--prompt", "PROMPT.md", "--", *loop.cmd]
    proc = subprocess.Popen(
        argv,
        cwd=project.dir,
        env=clean_env(),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    try:
        pids = wait_for(loop.state / "pids", proc)
    finally:
        os.close(master)  # the terminal window closes
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(timeout=20) == 129
    assert all_dead(pids), "the agent or its child survived"
    turn, override = project.journal("s1")[-2:]
    assert (turn["stop_reason"], override["kind"], override["reason"]) == (
        "interrupted",
        "interrupted",
        "interrupted (SIGHUP)",
    )


# ----------------------------------------------------------------------------- an agent that cannot run
def test_an_agent_that_fails_every_run_escalates_instead_of_burning_every_iteration(
    project: Project, tmp_path: Path
) -> None:
    """A bad API key: the agent exits 1 each time (printing a promise it never earned, and its error
    on stderr). Each run is a failed iteration, the circuit breaker escalates after three, and
    each iteration's line says why."""
    loop = Loop(
        project,
        tmp_path,
        'print("<promise>COMPLETE</promise>")\n'
        'print("Error: Invalid API key", file=sys.stderr)\n'
        "sys.exit(1)\n",
    )
    done = loop.run("--session", "s1", "--prompt", "PROMPT.md", "--max-iterations", "10", "--", *loop.cmd)
    assert done.returncode == 4, done.stderr
    assert "circuit_breaker" in done.stderr and done.stderr.count("\n") == 1
    assert (loop.state / "count").read_text() == "3"  # three runs, not ten
    turns = [e for e in project.journal("s1") if e["type"] == "agent_turn"]
    assert [t["failure"] for t in turns] == ["agent exited 1: Error: Invalid API key"] * 3
    assert [t["stderr_excerpt"] for t in turns] == ["Error: Invalid API key\n"] * 3
    validations = [e for e in project.journal("s1") if e["type"] == "validation_ran"]
    assert [(v["passed"], v["score"]) for v in validations] == [(False, 0.0)] * 3
    why = "agent: agent exited 1: Error: Invalid API key"
    refused = f"CONTINUE (completion refused (agent promised COMPLETE): {why})"
    assert f"iteration 1: {refused}" in done.stdout and f"iteration 2: {refused}" in done.stdout


@pytest.mark.parametrize(
    ("agent", "said"),
    [
        (
            ["claude", "-p", "--output-format", "stream-json"],
            "claude -p --output-format stream-json exits 1 without --verbose: add --verbose",
        ),
        (["gemini", "--yolo"], "add -o stream-json to the agent command"),
        (["opencode", "run"], "add --format json to the agent command"),
        (["copilot", "--allow-all-tools"], "add --output-format json to the agent command"),
    ],
    ids=["claude-without-verbose", "gemini-plain", "opencode-plain", "copilot-text"],
)
def test_an_agent_command_that_cannot_be_read_is_refused_before_anything_starts(
    project: Project, tmp_path: Path, agent: list[str], said: str
) -> None:
    """One line naming the flag to add, exit 2, no session, the agent never run (it is a stand-in
    that would leave a mark)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / agent[0]
    stub.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\n")
    stub.chmod(0o755)
    project.write("PROMPT.md", TASK)
    env = clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    done = project.cli("run", "--prompt", "PROMPT.md", "--", *agent, env=env)
    assert done.returncode == 2
    assert (
        done.stderr.count("\n") == 1 and said in done.stderr and done.stderr.startswith("ralph-ledger run: ")
    )
    assert not (tmp_path / "ran").exists()
    assert not (project.home / "journals").exists() or not list((project.home / "journals").iterdir())

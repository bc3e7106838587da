"""Journeys of ``ralph-ledger run`` whose output is piped (issue 24): a reader that goes away
(``| head -1``) and Ctrl-C on a pipeline (``| tee``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.journeys.conftest import Project, clean_env, script, spawn
from tests.journeys.test_run import Loop, resume, wait_for_file

SLOW_LINES = """\
time.sleep(0.5)  # the reader is gone by now
for i in range(3):
    print(f"line {i}", flush=True)
    time.sleep(0.1)
(state / f"done{n}").touch()
if n == 2:
    print("<promise>COMPLETE</promise>")
"""
"""Agent code that prints three lines, a little late, and completes at its second run."""

LEADER = r"""
import signal, subprocess, sys
signal.signal(signal.SIGINT, lambda *a: None)  # a shell survives the Ctrl-C; its jobs may not
out, both = sys.argv[1], sys.argv[2] == "2>&1"
errors = subprocess.STDOUT if both else open(out + ".err", "w")
run = subprocess.Popen(sys.argv[3:], stdout=subprocess.PIPE, stderr=errors)
tee = subprocess.Popen(["tee", out + ".tee"], stdin=run.stdout, stdout=subprocess.DEVNULL)
run.stdout.close()
code = run.wait()
tee.wait()
open(out + ".rc", "w").write(str(code))
"""
"""A shell's pipeline ``ralph-ledger run ... [2>&1] | tee OUT.tee``, in the foreground process group
that Ctrl-C reaches: the runner's exit status in ``OUT.rc``, its stderr in ``OUT.err`` (without
``2>&1``)."""


def test_a_reader_that_goes_away_ends_the_loop_after_its_turn_is_recorded(
    project: Project, tmp_path: Path
) -> None:
    """``run ... | head -1``: the agent's turn runs to its end and is recorded, whole, the loop stops
    there with one line on stderr and exit 141 (128 + SIGPIPE), and ``--resume`` goes on. It exited 0
    in silence, the session running and its turn never recorded."""
    loop = Loop(project, tmp_path, SLOW_LINES)
    argv = [script("ralph-ledger"), "run", "--session", "s1", "--prompt", "PROMPT.md", "--", *loop.cmd]
    runner = spawn(argv, project.dir, "")
    assert runner.stdout is not None
    head = subprocess.run(["head", "-1"], stdin=runner.stdout, capture_output=True, text=True, timeout=60)
    runner.stdout.close()  # head has gone: the pipe has no reader left
    assert head.stdout == "[ralph-ledger] s1: iteration 1 of 15\n"
    assert runner.wait(timeout=60) == 141
    assert runner.stderr is not None
    assert runner.stderr.read().splitlines() == [
        "ralph-ledger run: s1: stopped at iteration 2: stdout was closed; resume with --resume s1"
    ]
    assert (loop.state / "count").read_text() == "1"
    events = project.journal("s1")
    (turn,) = [e for e in events if e["type"] == "agent_turn"]
    assert turn["output_excerpt"] == "line 0\nline 1\nline 2\n" and turn["stop_reason"] == "exit 0"
    assert [e["type"] for e in events if e["iteration"] == 1][-1] == "signal_resolved"
    override = events[-1]
    assert (override["type"], override["kind"], override["reason"]) == (
        "override",
        "interrupted",
        "interrupted (stdout closed)",
    )
    assert project.sessions()[0]["status"] == "running"

    again = resume(project)
    assert again.returncode == 0, again.stderr
    assert (loop.state / "count").read_text() == "2"
    assert project.sessions()[0]["status"] == "complete"


@pytest.mark.parametrize("redirect", ["", "2>&1"], ids=["stdout", "stdout-and-stderr"])
def test_ctrl_c_on_a_pipeline_through_tee_exits_130(project: Project, tmp_path: Path, redirect: str) -> None:
    """``run ... | tee f`` and Ctrl-C (SIGINT to the whole pipeline): tee dies with it, and ``run``
    still exits 130, the agent's turn recorded as interrupted. With ``2>&1`` its last line has no
    reader either: it exited 1, failing to print it."""
    loop = Loop(project, tmp_path, "print('agent-started', flush=True)\ntime.sleep(60)\n")
    out = str(tmp_path / "pipeline")
    argv = [script("ralph-ledger"), "run", "--session", "s1", "--prompt", "PROMPT.md", "--", *loop.cmd]
    shell = subprocess.Popen(
        [sys.executable, "-c", LEADER, out, redirect or "-", *argv],
        cwd=project.dir,
        env=clean_env(),
        start_new_session=True,
    )
    wait_for_file(loop.state / "count", shell)
    time.sleep(0.5)  # the agent has said it started
    os.killpg(shell.pid, signal.SIGINT)
    assert shell.wait(timeout=30) == 0
    assert Path(out + ".rc").read_text() == "130"
    if not redirect:
        assert Path(out + ".err").read_text().splitlines() == [
            "ralph-ledger run: s1: interrupted after 1 iteration: interrupted (Ctrl-C)"
        ]
    turn, override = project.journal("s1")[-2:]
    assert (turn["type"], turn["stop_reason"], override["reason"]) == (
        "agent_turn",
        "interrupted",
        "interrupted (Ctrl-C)",
    )

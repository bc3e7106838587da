"""Journeys: steering a ``ralph-ledger run`` loop with ``pause`` / ``resume`` / ``steer`` / ``unblock``,
typed by a person at another terminal while the loop runs (a scripted agent stands in for the model)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from ledger.loop.prompt.next_prompt import GUIDANCE_HEADING
from tests.journeys.conftest import Project, script
from tests.journeys.test_run import Loop, resume

STEERED = f"""\
if n == 1:  # the person pauses and steers while the first iteration runs
    ralph = {script("ralph-ledger")!r}
    subprocess.run([ralph, "pause", "s1", "--reason", "review"], check=True)
    subprocess.run([ralph, "steer", "s1", "use the sqlite backend"], check=True)
    print("first try")
else:
    print("done <promise>COMPLETE</promise>")
"""


def _until(proc: subprocess.Popen[str], text: str, seconds: float = 30) -> list[str]:
    """The lines ``proc`` printed up to the first holding ``text`` (it must, within ``seconds``)."""
    assert proc.stdout is not None
    lines: list[str] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"no {text!r} in:\n{''.join(lines)}{proc.communicate()}")


def _paused(project: Project) -> list[dict[str, object]]:
    """The ``paused`` column, as ``ralph-ledger sessions`` lists it."""
    proc = project.cli("sessions", "--json")
    assert proc.returncode == 0, proc.stderr
    return [{"session_id": r["session_id"], "paused": r["paused"]} for r in json.loads(proc.stdout)]


def test_a_paused_loop_waits_then_resumes_with_the_guidance_once(project: Project, tmp_path: Path) -> None:
    loop = Loop(project, tmp_path, STEERED)
    proc = loop.start()
    lines = _until(proc, "paused after iteration 1")
    assert lines[-1] == (
        "[ralph-ledger] s1: paused after iteration 1; resume it with `ralph-ledger resume s1` "
        "(Ctrl-C stops; --resume goes on)\n"
    )
    time.sleep(1.2)  # it waits: no second iteration while paused
    assert not (loop.state / "prompt2.txt").exists() and proc.poll() is None
    assert _paused(project) == [{"session_id": "s1", "paused": True}]
    resumed = project.cli("resume", "s1")
    assert (resumed.returncode, resumed.stdout) == (0, "s1: resumed; the loop goes on after iteration 1\n")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "[ralph-ledger] s1: resumed\n" in out
    assert (loop.state / "prompt2.txt").read_text().endswith(f"{GUIDANCE_HEADING}\nuse the sqlite backend")
    assert GUIDANCE_HEADING not in (loop.state / "prompt1.txt").read_text()
    events = project.journal("s1")
    kinds = [e["kind"] for e in events if e["type"] == "override"]
    assert kinds == ["pause", "steer", "resume"]
    started = [(e["iteration"], e.get("guidance", "")) for e in events if e["type"] == "iteration_started"]
    assert started == [(1, ""), (2, "use the sqlite backend")]


def test_a_stop_while_paused_ends_the_loop_blocked(project: Project, tmp_path: Path) -> None:
    loop = Loop(project, tmp_path, STEERED)
    proc = loop.start()
    _until(proc, "paused after iteration 1")
    assert project.cli("stop", "s1", "--reason", "enough").returncode == 0
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    assert err == "ralph-ledger run: s1: BLOCKED after 1 iteration: manual stop: enough\n"
    assert not (loop.state / "prompt2.txt").exists()
    assert project.sessions()[0]["status"] == "blocked"


def test_ctrl_c_while_paused_then_run_resume_waits_for_resume(project: Project, tmp_path: Path) -> None:
    loop = Loop(project, tmp_path, STEERED)
    proc = loop.start()
    _until(proc, "paused after iteration 1")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    again = subprocess.Popen(
        [script("ralph-ledger"), "run", "--resume", "s1"],
        cwd=project.dir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _until(again, "paused after iteration 1")  # still paused: iteration 1 is not run again
    assert project.cli("resume", "s1").returncode == 0
    _, err = again.communicate(timeout=30)
    assert again.returncode == 0, err
    assert int((loop.state / "count").read_text()) == 2
    assert (loop.state / "prompt2.txt").read_text().endswith("use the sqlite backend")


BLOCKS = """\
if n == 1:
    print("<promise>BLOCKED</promise>\\nReason: which database?")
else:
    print("done <promise>COMPLETE</promise>")
"""


def test_unblock_then_run_resume_continues_with_the_guidance(project: Project, tmp_path: Path) -> None:
    loop = Loop(project, tmp_path, BLOCKS)
    blocked = loop.run("--session", "s1", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert blocked.returncode == 3, blocked.stderr
    assert project.cli("steer", "s1", "x").stderr == (
        "ralph-ledger steer: session 's1' is blocked; it cannot be steered\n"
    )
    unblocked = project.cli("unblock", "s1", "use sqlite", "--iterations", "2")
    assert unblocked.returncode == 0, unblocked.stderr
    assert unblocked.stdout == (
        "s1: unblocked; iteration 2 of 3 comes next (continue it with `ralph-ledger run --resume s1`)\n"
    )
    done = resume(project)
    assert done.returncode == 0, done.stderr
    assert (loop.state / "prompt2.txt").read_text().endswith(f"{GUIDANCE_HEADING}\nuse sqlite")
    row = project.sessions()[0]
    assert (row["status"], row["iteration"], row["max_iterations"]) == ("complete", 2, 3)


def test_steering_commands_refuse_in_one_line(project: Project, tmp_path: Path) -> None:
    loop = Loop(project, tmp_path, "print('<promise>COMPLETE</promise>')\n")
    assert loop.run("--session", "s1", "--prompt", "PROMPT.md", "--", *loop.cmd).returncode == 0
    ended = "ralph-ledger {0}: session 's1' is complete; {1}"
    cases = [
        (["pause", "s1"], 1, ended.format("pause", "it cannot be paused")),
        (["resume", "s1"], 1, ended.format("resume", "it cannot be resumed")),
        (["steer", "s1", "hi"], 1, ended.format("steer", "it cannot be steered")),
        (["unblock", "s1"], 1, ended.format("unblock", "only a blocked or escalated session is unblocked")),
        (
            ["steer", "s1", " "],
            2,
            "ralph-ledger steer: the guidance is empty: give the text for the next prompt",
        ),
        (
            ["pause", "ghost"],
            1,
            f"ralph-ledger: no session 'ghost' in {project.home}; `ralph-ledger sessions` lists them",
        ),
        (
            ["unblock", "s1", "--iterations", "0"],
            2,
            "ralph-ledger unblock: argument --iterations: expected a number >= 1, got '0' (see --help)",
        ),
    ]
    for args, code, line in cases:
        proc = project.cli(*args)
        assert (proc.returncode, proc.stderr, proc.stdout) == (code, line + "\n", ""), args
    other = tmp_path / "other-home"
    other.mkdir()
    proc = project.cli("--home", str(other), "pause", "s1")  # a session of another home
    assert (proc.returncode, proc.stderr.count("\n")) == (1, 1)
    assert "no session 's1'" in proc.stderr

"""Journeys: ``ralph-ledger run`` with an agent that hits its usage limit: the run is recorded, the loop
waits it out and runs the same iteration again, the circuit breaker never sees it, Ctrl-C works
while it waits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.journeys.conftest import Project
from tests.journeys.test_run import TASK, Loop, resume, wait_for_file

LIMITED = """\
import json, time
if n <= LIMITED_RUNS:
    info = {"status": "rejected", "rateLimitType": "five_hour"}
    if RESETS_IN is not None:
        info["resetsAt"] = int(time.time()) + RESETS_IN
    usage = {"input_tokens": 7, "output_tokens": 0}
    print(json.dumps({"type": "assistant", "message": {"id": f"m{n}", "usage": usage, "content": []}}))
    print(json.dumps({"type": "rate_limit_event", "rate_limit_info": info}), flush=True)
    (state / f"limited{n}").write_text("")
    sys.exit(1)
done = "All tests pass. <promise>COMPLETE</promise>"
print(json.dumps({"type": "result", "is_error": False, "result": done}))
"""


def agent(limited_runs: int, resets_in: int | None) -> str:
    """A scripted agent whose first ``limited_runs`` runs hit the usage limit."""
    return f"LIMITED_RUNS = {limited_runs}\nRESETS_IN = {resets_in}\n" + LIMITED


def test_a_rate_limited_agent_waits_and_retries_without_tripping_the_breaker(
    project: Project, tmp_path: Path
) -> None:
    project.write("ralph.toml", "[guards.circuit_breaker]\nthreshold = 2\n")
    loop = Loop(project, tmp_path, agent(3, None))
    limits = ("--rate-limit-wait", "0.2", "--agent-format", "claude")
    proc = loop.run("--session", "s1", "--prompt", "PROMPT.md", *limits, "--", *loop.cmd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "s1: COMPLETE after 1 iteration(s)" in proc.stdout
    assert proc.stdout.count("rate limited (five_hour limit reached); waiting") == 3
    events = project.journal("s1")
    limited = [e for e in events if e["type"] == "rate_limited"]
    assert [(e["iteration"], e["wait_s"]) for e in limited] == [(1, 0.2), (1, 0.4), (1, 0.8)]
    assert [e["type"] for e in events].count("validation_ran") == 1  # the limited runs were not iterations
    assert "guard_tripped" not in [e["type"] for e in events]
    prompts = sorted(p.name for p in loop.state.glob("prompt*.txt"))
    assert prompts == ["prompt1.txt", "prompt2.txt", "prompt3.txt", "prompt4.txt"]
    assert all((loop.state / p).read_text() == TASK for p in prompts)  # the same iteration each time
    (row,) = project.sessions()
    assert (row["status"], row["iteration"]) == ("complete", 1)
    assert [e["tokens"]["input"] for e in limited] == [7, 7, 7]  # what the limited runs spent counts
    assert row["tokens"] == 21


def test_the_loop_waits_until_the_reset_time_the_agent_gave(project: Project, tmp_path: Path) -> None:
    loop = Loop(project, tmp_path, agent(1, 1))
    proc = loop.run("--session", "s1", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (limited,) = [e for e in project.journal("s1") if e["type"] == "rate_limited"]
    assert limited["resets_at"] is not None
    assert 2.0 <= limited["wait_s"] <= 3.5  # the reset (a second away) and a margin of 2 s


def test_ctrl_c_while_waiting_ends_the_loop_and_resume_goes_on(project: Project, tmp_path: Path) -> None:
    loop = Loop(project, tmp_path, agent(1, 3600))
    proc = loop.start()
    wait_for_file(loop.state / "limited1", proc)
    end = 50
    while "rate_limited" not in loop.types() and end:
        subprocess.run(["sleep", "0.1"], check=True)
        end -= 1
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, (out, err)
    assert "waiting 360" in out  # an hour and the margin
    assert loop.types()[-2:] == ["rate_limited", "override"]
    assert project.journal("s1")[-1]["kind"] == "interrupted"
    resumed = resume(project)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert project.sessions()[0]["status"] == "complete"
    shown = json.loads(
        project.cli("sql", "SELECT count(*) AS n FROM events WHERE type = 'rate_limited'", "--json").stdout
    )
    assert shown == [{"n": 1}]

"""Journeys: ``ralph-ledger run`` with an agent that hits its usage limit: the run is recorded, the loop
waits it out and runs the same iteration again, the circuit breaker never sees it, Ctrl-C works
while it waits; stand-ins for ``codex`` and ``gemini`` (detected from the command) report their
limits as those agents do."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    assert "s1: COMPLETE after 1 iteration" in proc.stdout
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
    end = 600  # up to a minute on a loaded machine: the signal must come while it waits
    while "rate_limited" not in loop.types() and end:
        subprocess.run(["sleep", "0.1"], check=True)
        end -= 1
    assert "rate_limited" in loop.types()
    subprocess.run(["sleep", "0.5"], check=True)  # the line saying it waits follows the record
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


STAND_IN = """\
import json, pathlib, sys
state = pathlib.Path(STATE)
prompt = sys.stdin.read()
counter = state / "count"
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
(state / f"prompt{n}.txt").write_text(prompt)
def say(**line):
    print(json.dumps(line), flush=True)
"""
"""The start of a stand-in agent program: its state folder, its run count ``n``, its prompts."""

DONE = "All tests pass. <promise>COMPLETE</promise>"

CODEX = """\
say(type="thread.started", thread_id="t1")
say(type="turn.started")
if n <= 2:  # codex-rs's UsageLimitReachedError, as `codex exec --json` reports it
    said = "You've hit your usage limit. Try again later."
    say(type="error", message=said)
    say(type="turn.failed", error={"message": said})
    sys.exit(1)
quoted = "The log said: You've hit your usage limit. Try again later. " + DONE  # words, not a report
say(type="item.completed", item={"id": "item_0", "type": "agent_message", "text": quoted})
say(type="turn.completed", usage={"input_tokens": 30, "cached_input_tokens": 10, "output_tokens": 5})
"""

GEMINI = """\
say(type="init", timestamp="t", session_id="s", model="gemini-2.5-pro")
if n == 1:  # a 429 as Gemini CLI's handleError reports it, with the API's retry delay
    api = "Resource exhausted. Please retry in 0.5s"
    too_many = ("Please wait and try again later. To increase your limits, request a quota increase "
                "through AI Studio, or switch to another /auth method")
    error = {"type": "unknown", "message": f"[API Error: {api}]\\n{too_many}"}
    say(type="result", timestamp="t", status="error", error=error, stats={"input_tokens": 0})
    sys.exit(1)
say(type="message", timestamp="t", role="assistant", content=DONE, delta=True)
say(type="result", timestamp="t", status="success", stats={"input_tokens": 40, "output_tokens": 6})
"""


def stand_in(tmp: Path, program: str, body: str) -> tuple[Path, Path]:
    """An executable ``tmp/bin/PROGRAM`` running ``body`` after ``STAND_IN``, and its state folder."""
    state = tmp / "state"
    state.mkdir()
    path = tmp / "bin" / program
    path.parent.mkdir()
    head = f"#!{sys.executable}\nSTATE = {str(state)!r}\nDONE = {DONE!r}\n"
    path.write_text(head + STAND_IN + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, state


def limited_events(project: Project) -> tuple[list[dict[str, Any]], list[str]]:
    """Session ``s1``'s ``rate_limited`` events, and all its event types."""
    events = project.journal("s1")
    return [e for e in events if e["type"] == "rate_limited"], [e["type"] for e in events]


def test_a_rate_limited_codex_waits_and_retries_without_tripping_the_breaker(
    project: Project, tmp_path: Path
) -> None:
    project.write("ralph.toml", "[guards.circuit_breaker]\nthreshold = 2\n")
    project.write("PROMPT.md", TASK)
    codex, state = stand_in(tmp_path, "codex", CODEX)
    run = ("run", "--session", "s1", "--prompt", "PROMPT.md", "--rate-limit-wait", "0.2")
    proc = project.cli(*run, "--", str(codex), "exec", "--json", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "s1: COMPLETE after 1 iteration" in proc.stdout
    said = "You've hit your usage limit. Try again later."
    assert proc.stdout.count(f"rate limited ({said}); waiting") == 2
    limited, types = limited_events(project)
    assert [(e["iteration"], e["reason"], e["resets_at"], e["wait_s"]) for e in limited] == [
        (1, said, None, 0.2),
        (1, said, None, 0.4),
    ]
    assert types.count("validation_ran") == 1  # the limited runs were not iterations
    assert "guard_tripped" not in types
    assert [(state / f"prompt{i}.txt").read_text() for i in (1, 2, 3)] == [TASK] * 3  # the same iteration
    (row,) = project.sessions()
    assert (row["status"], row["iteration"]) == ("complete", 1)
    assert row["tokens"] == 35  # the completed run, read as codex's stream: 20 fresh + 10 cached + 5 out


def test_a_gemini_quota_error_waits_for_the_retry_delay_it_gave(project: Project, tmp_path: Path) -> None:
    project.write("ralph.toml", "[guards.circuit_breaker]\nthreshold = 1\n")
    project.write("PROMPT.md", TASK)
    gemini, state = stand_in(tmp_path, "gemini", GEMINI)
    run = ("run", "--session", "s1", "--prompt", "PROMPT.md")
    proc = project.cli(*run, "--", str(gemini), "-p", "go", "--output-format", "stream-json", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "s1: COMPLETE after 1 iteration" in proc.stdout
    (limited,), types = limited_events(project)
    assert limited["reason"] == "[API Error: Resource exhausted. Please retry in 0.5s]"
    assert limited["resets_at"] is not None
    assert 2.0 <= limited["wait_s"] <= 2.6  # the half second it gave, and the margin of 2 s
    assert types.count("validation_ran") == 1 and "guard_tripped" not in types
    assert (state / "prompt2.txt").read_text() == TASK
    assert project.sessions()[0]["iteration"] == 1


def test_a_plain_text_agent_that_succeeds_while_printing_a_limit_report_is_an_ordinary_run(
    project: Project, tmp_path: Path
) -> None:
    body = (
        'print("ERROR: You\'ve hit your usage limit. Try again later.")\n'
        'print("Claude AI usage limit reached|1762952400")\n'
        "print(DONE)\n"
    )
    project.write("PROMPT.md", TASK)
    agent, _ = stand_in(tmp_path, "my-agent", body)
    proc = project.cli("run", "--session", "s1", "--prompt", "PROMPT.md", "--", str(agent), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rate limited" not in proc.stdout
    assert "rate_limited" not in limited_events(project)[1]

"""Journeys of ``[notify]``: ``ralph-ledger run`` and the Claude Code hook (both modes) notify a
webhook (``json://`` on a local HTTP receiver) when a session completes, blocks, escalates or a guard
trips; the stop never waits for it; a URL that fails is recorded and the loop goes on; a bad
``[notify]`` is one line naming the key."""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.journeys.conftest import Project, clean_env
from tests.journeys.mcp_client import connect
from tests.journeys.test_claude_code import Claude, block
from tests.journeys.test_run import Loop
from tests.journeys.test_warm import stop_worker, wait_for
from tests.receiver import closed_port, receiving

DONE = 'print("Tests pass now.\\n<promise>COMPLETE</promise>")\n'
WORKING = 'print("Still working on it.")\n'
FAILING_RULE = (
    f"[[rules]]\nname = 'tests'\ntype = 'command'\nargv = [{sys.executable!r}, '-c', 'raise SystemExit(1)']\n"
)


def notify(*urls: str, on: str = "") -> str:
    """A ``[notify]`` table for ``urls`` (and ``on``, a TOML array, when given)."""
    listed = ", ".join(f'"{u}"' for u in urls)
    return f"[notify]\nurls = [{listed}]\n" + (f"on = {on}\n" if on else "")


def events(project: Project, session: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in project.journal(session) if e["type"] == kind]


def wait_for_event(project: Project, session: str, kind: str, timeout_s: float = 20) -> dict[str, Any]:
    """The first ``kind`` event of ``session``, once the sender has recorded it."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        found = events(project, session, kind)
        if found:
            return found[0]
        time.sleep(0.05)
    pytest.fail(f"no {kind} in {session}'s journal: {[e['type'] for e in project.journal(session)]}")


# --- the runner -----------------------------------------------------------------------------------


def test_a_run_that_completes_posts_the_session_and_its_status(project: Project, tmp_path: Path) -> None:
    with receiving() as receiver:
        project.write("ralph.toml", notify(receiver.url()))
        loop = Loop(project, tmp_path, DONE)
        proc = loop.run("--session", "n1", "--prompt", "PROMPT.md", "--", *loop.cmd)
        assert proc.returncode == 0 and proc.stderr == "", proc
        (post,) = receiver.wait()
    assert post.path == "/hook"
    assert post.body["title"] == "ralph-ledger: n1 completed"
    body = post.body["message"].splitlines()
    assert body[:3] == [
        "Session n1: completed",
        "Task: Make the tests pass.",
        "Status: complete at iteration 1 of 15",
    ]
    assert "Reason: the agent promised COMPLETE" in body and post.body["type"] == "success"
    # recorded by the sender (the runner waited for it), without the URL
    (sent,) = events(project, "n1", "notification_sent")
    assert (sent["notice"], sent["services"], sent["targets"], sent["failed"]) == ("complete", ["json"], 1, 0)
    assert sent["title"] == post.body["title"] and sent["body"] == post.body["message"]
    journal = (project.home / "journals" / "n1.jsonl").read_text()
    assert f"127.0.0.1:{receiver.port}" not in journal and "notify" not in project.journal("n1")[0]["config"]


def test_a_guard_that_escalates_is_posted_with_its_evidence(project: Project, tmp_path: Path) -> None:
    with receiving() as receiver:
        project.write("ralph.toml", FAILING_RULE + notify(receiver.url(), on='["escalated"]'))
        loop = Loop(project, tmp_path, WORKING)
        proc = loop.run("--session", "e1", "--prompt", "PROMPT.md", "--", *loop.cmd)
        assert proc.returncode == 4, proc
        (post,) = receiver.wait()
    assert post.body["title"] == "ralph-ledger: e1 escalated" and post.body["type"] == "failure"
    body = post.body["message"]
    assert "Status: escalated at iteration 3 of 15" in body
    assert "Reason: circuit_breaker: Circuit breaker tripped after 3 consecutive failures" in body
    assert "Guard: circuit_breaker" in body.splitlines() and '"failure_streak":3' in body  # its evidence
    assert len(events(project, "e1", "notification_sent")) == 1  # one notification, not one per event


def test_only_what_on_asks_for_is_sent(project: Project, tmp_path: Path) -> None:
    with receiving() as receiver:
        project.write("ralph.toml", notify(receiver.url(), on='["blocked", "escalated"]'))
        loop = Loop(project, tmp_path, DONE)
        proc = loop.run("--session", "q1", "--prompt", "PROMPT.md", "--", *loop.cmd)
        assert proc.returncode == 0 and proc.stderr == "", proc
        time.sleep(0.5)
        assert receiver.posts == []
    assert events(project, "q1", "notification_sent") == []


def test_a_url_that_fails_is_recorded_and_the_others_still_get_it(project: Project, tmp_path: Path) -> None:
    dead = f"json://127.0.0.1:{closed_port()}/hook"
    with receiving() as receiver:
        project.write("ralph.toml", notify(dead, receiver.url()))
        loop = Loop(project, tmp_path, DONE)
        proc = loop.run("--session", "f1", "--prompt", "PROMPT.md", "--", *loop.cmd)
        (post,) = receiver.wait()
    assert proc.returncode == 0, proc  # the loop's outcome is the loop's, whatever the notification
    assert (
        proc.stdout.splitlines()[-1]
        == "ralph-ledger run: f1: COMPLETE after 1 iteration: agent promised COMPLETE"
    )
    (line,) = proc.stderr.splitlines()
    assert (
        line.startswith("ralph-ledger: notification for f1 not sent: json://: ") and "127.0.0.1:" not in line
    )
    assert post.body["title"] == "ralph-ledger: f1 completed"
    (error,) = events(project, "f1", "error_recorded")
    assert error["component"] == "notify" and error["message"] == line.split("f1 ", 1)[1]
    (sent,) = events(project, "f1", "notification_sent")
    assert (sent["targets"], sent["failed"]) == (2, 1)
    assert project.sessions()[0]["status"] == "complete"


def test_a_slow_webhook_is_reported_as_a_timeout(project: Project, tmp_path: Path) -> None:
    """A webhook that answers after the wait ran out: one line saying it timed out, naming the service,
    its host (no secret: apprise shows it in its private form) and the seconds waited; recorded so."""
    with receiving(delay_s=3) as receiver:
        project.write("ralph.toml", notify(receiver.url() + "?rto=0.5"))
        loop = Loop(project, tmp_path, DONE)
        proc = loop.run("--session", "t1", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert proc.returncode == 0, proc
    (line,) = proc.stderr.splitlines()
    assert line == (
        f"ralph-ledger: notification for t1 not sent: json://127.0.0.1:{receiver.port}: timed out: JSON "
        "did not answer within 0.5 s (?rto=SECONDS in the URL waits longer)"
    )
    (error,) = events(project, "t1", "error_recorded")
    assert error["message"] == line.split("t1 ", 1)[1]


def test_ctrl_c_while_a_finished_loop_waits_for_its_notification(project: Project, tmp_path: Path) -> None:
    """A loop that completed waits for its slow webhook: after a few seconds it says so; Ctrl-C then
    stops the wait, says the loop finished and the notification is not sent yet, and the run exits with
    the loop's own status (0), its outcome printed. The notification goes on and is recorded."""
    with receiving(delay_s=6) as receiver:
        project.write("ralph.toml", notify(receiver.url() + "?rto=30"))
        loop = Loop(project, tmp_path, DONE)
        proc = loop.start()
        err: queue.Queue[str] = queue.Queue()
        stderr = proc.stderr
        assert stderr is not None

        def read() -> None:
            for line in stderr:
                err.put(line)

        threading.Thread(target=read, daemon=True).start()
        try:
            waiting = err.get(timeout=20)
            said = "ralph-ledger: loop s1 finished (complete); waiting up to "
            assert waiting.startswith(said), waiting
            assert waiting.endswith(" s more for 1 notification to be sent (Ctrl-C stops waiting)\n")
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the run's whole process group
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.stdout is not None
        out = proc.stdout.read()
        (post,) = receiver.wait(timeout_s=30)  # the sender went on in its own session
    assert out.splitlines()[-1] == "ralph-ledger run: s1: COMPLETE after 1 iteration: agent promised COMPLETE"
    time.sleep(0.2)
    rest = []
    while not err.empty():
        rest.append(err.get())
    assert rest == [
        "ralph-ledger: loop s1 finished (complete); Ctrl-C stopped the wait: 1 notification not sent yet "
        "(still on the way in the background; `notification_sent` in the journal says when one went out)\n"
    ]
    assert post.body["title"] == "ralph-ledger: s1 completed"
    sent = wait_for_event(project, "s1", "notification_sent")
    assert (sent["targets"], sent["failed"]) == (1, 0)
    assert project.sessions()[0]["status"] == "complete"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[notify]\nurls = "json://127.0.0.1/hook"\n', "ralph.toml: notify.urls: expected a list, got "),
        ('[notify]\nurls = ["127.0.0.1/hook"]\n', "ralph.toml: notify.urls[0]: expected a notification URL"),
        (
            '[notify]\nurls = []\non = ["done"]\n',
            "ralph.toml: notify.on[0]: expected one of complete, blocked",
        ),
        ('[notify]\nurl = ["json://127.0.0.1/hook"]\n', "ralph.toml: notify.url: unknown key"),
    ],
)
def test_a_bad_notify_table_is_one_line_naming_the_key(
    project: Project, tmp_path: Path, table: str, message: str
) -> None:
    project.write("ralph.toml", table)
    loop = Loop(project, tmp_path, DONE)
    proc = loop.run("--session", "c1", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert proc.returncode == 1 and proc.stdout == "", proc
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"ralph-ledger run: {project.dir / 'ralph.toml'}: ") and message in line, line
    assert not (loop.state / "count").exists(), "the agent was started"
    start = project.cli("loop", "start", "Fix it", "--mode", "ledger")  # and the hook's loop alike
    assert start.returncode == 1 and message in start.stderr and len(start.stderr.splitlines()) == 1


# --- the Claude Code hook -------------------------------------------------------------------------


@pytest.mark.parametrize("warm", ["0", "1"])
def test_a_ledger_loop_stop_returns_before_the_webhook_answers(project: Project, warm: str) -> None:
    """The receiver takes 2 s to answer: the stop that completes the loop has printed its answer and
    exited long before (its output pipes closed: nothing it started holds them)."""
    claude = Claude(project)
    env = clean_env(RALPH_WARM=warm)
    with receiving(delay_s=2.0) as receiver:
        project.write("ralph.toml", notify(receiver.url()))
        assert project.cli("loop", "start", "Fix the tests", "--mode", "ledger").returncode == 0
        claude.prompt("Fix the tests")
        claude.text("Started.")
        try:
            block(claude.stop(env=env))
            if (
                warm == "1"
            ):  # the first stop ran in its own process and started the worker: it serves the next
                wait_for(lambda: (project.home / "stop-worker.sock").exists())
            claude.text("Fixed.\n<promise>COMPLETE</promise>")
            proc = claude.stop(env=env)
            returned = time.monotonic()
            assert proc.stdout.startswith("✅ Ralph loop complete after 2 iterations"), proc
            (post,) = receiver.wait()
        finally:
            stop_worker(project)
    assert returned < post.answered  # never waited for the network: the receiver answers 2 s after a POST
    assert post.body["title"] == f"ralph-ledger: cc-{claude.session} completed"
    sent = wait_for_event(project, f"cc-{claude.session}", "notification_sent")
    assert (sent["notice"], sent["failed"]) == ("complete", 0)


def test_a_plugin_loop_that_completes_is_posted(project: Project) -> None:
    claude = Claude(project)
    with receiving() as receiver:
        project.write("ralph.toml", notify(receiver.url()))
        start = project.cli(
            "loop", "start", "Write the parser", "--mode", "plugin", "--completion-promise", "DONE"
        )
        assert start.returncode == 0, start
        claude.prompt("/ralph-loop Write the parser")
        claude.text("Started on the parser.")
        block(claude.stop())
        claude.text("Parser written.\n<promise>DONE</promise>")
        assert claude.stop().stdout == "✅ Ralph loop: Detected <promise>DONE</promise>\n"
        (post,) = receiver.wait()
    sid = f"cc-{claude.session}"
    assert post.body["title"] == f"ralph-ledger: {sid} completed"
    assert (
        "Task: Write the parser" in post.body["message"]
        and "Status: complete at iteration 2" in post.body["message"]
    )
    assert wait_for_event(project, sid, "notification_sent")["targets"] == 1


def test_a_hook_whose_notification_fails_records_it_and_the_loop_goes_on(project: Project) -> None:
    """A broken [notify] (a bad URL written after the loop started, a closed port) never changes a
    stop's answer: the stop ends the loop as it would, the failure is in the journal."""
    claude = Claude(project)
    project.write("ralph.toml", notify(f"json://127.0.0.1:{closed_port()}/hook", on='["escalated"]'))
    start = project.cli("loop", "start", "Fix it", "--mode", "plugin", "--max-iterations", "2")
    assert start.returncode == 0, start
    claude.prompt("/ralph-loop Fix it")
    claude.text("Working.")
    block(claude.stop())
    claude.text("Still working.")
    proc = claude.stop()
    assert proc.stdout == "🛑 Ralph loop: Max iterations (2) reached.\n" and proc.stderr == "", proc
    sid = f"cc-{claude.session}"
    error = wait_for_event(project, sid, "error_recorded")
    assert error["component"] == "notify" and error["message"].startswith("not sent: json://: ")
    assert wait_for_event(project, sid, "notification_sent")["failed"] == 1
    assert project.sessions()[0]["status"] == "escalated"


def test_a_notify_table_broken_while_the_loop_runs_is_recorded_in_one_line(
    project: Project, tmp_path: Path
) -> None:
    """``[notify]`` is read when a notification is due: the agent breaks it, then completes; the run
    completes as it would, says in one line why nothing was sent, and records it."""
    with receiving() as receiver:
        project.write("ralph.toml", notify(receiver.url()))
        breaks = "pathlib.Path('ralph.toml').write_text('[notify]\\nurls = [\"nope\"]\\n')\n"
        loop = Loop(project, tmp_path, breaks + DONE)
        proc = loop.run("--session", "b1", "--prompt", "PROMPT.md", "--", *loop.cmd)
        time.sleep(0.3)
        assert receiver.posts == []
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1].startswith(
        "ralph-ledger run: b1: COMPLETE"
    ), proc
    expected = f"not sent: {project.dir / 'ralph.toml'}: notify.urls[0]: expected a notification URL"
    assert (
        proc.stderr.startswith(f"ralph-ledger: notification for b1 {expected}")
        and proc.stderr.count("\n") == 1
    )
    (error,) = events(project, "b1", "error_recorded")
    assert error["component"] == "notify" and error["message"].startswith(expected)
    assert events(project, "b1", "notification_sent") == []


# --- the MCP tools --------------------------------------------------------------------------------


def test_an_agent_that_blocks_through_the_mcp_server_is_posted(project: Project) -> None:
    """Through the installed ``ralph-ledger mcp``: the notification leaves the protocol's stdout alone
    (the server keeps answering after it) and reaches the receiver."""
    with receiving() as receiver:
        project.write("ralph.toml", notify(receiver.url(), on='["blocked"]'))

        async def journey() -> None:
            async with connect(project.dir) as agent:
                await agent.call("iteration_start", taskId="m1", task="Migrate the database")
                said = "<promise>BLOCKED</promise>\nReason: the staging database is down"
                blocked = await agent.call("iteration_validate", taskId="m1", agentOutput=said)
                assert blocked["completionSignal"] == "BLOCKED"
                status = await agent.call("iteration_status", taskId="m1")
                assert status["status"] == "blocked"

        anyio.run(journey)
        (post,) = receiver.wait()
    assert post.body["title"] == "ralph-ledger: m1 blocked" and post.body["type"] == "warning"
    assert "Reason: agent promised BLOCKED: the staging database is down" in post.body["message"]
    assert wait_for_event(project, "m1", "notification_sent")["notice"] == "blocked"

"""Journeys: a person steers a Claude Code loop (``pause`` / ``resume`` / ``steer`` / ``unblock``) while
the Stop hook drives it, in the ledger-native mode and the ``ralph-loop`` drop-in mode."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.loop.prompt.next_prompt import GUIDANCE_HEADING
from tests.journeys.conftest import Project
from tests.journeys.test_claude_code import CLAUDE, Claude, at_iteration_2, block, ledger_project, start

SID = f"cc-{CLAUDE}"


def paused_line(n: int) -> str:
    return (
        f"⏸ Ralph loop paused after iteration {n}: `ralph-ledger resume {SID}`, then the next stop "
        f"goes on with iteration {n + 1}\n"
    )


def ok(project: Project, *args: str) -> str:
    proc = project.cli(*args)
    assert proc.returncode == 0 and proc.stderr == "", proc
    return proc.stdout


def test_native_pause_steer_resume(project: Project) -> None:
    claude = at_iteration_2(project)  # iteration 2 begins
    assert (
        ok(project, "pause", SID)
        == f"{SID}: pausing once iteration 2 ends; resume it with `ralph-ledger resume {SID}`\n"
    )
    ok(project, "steer", SID, "use sqlite")
    claude.text("Step two.")
    assert claude.stop().stdout == paused_line(2)  # iteration 2 is validated, the stop allowed
    before = project.journal(SID)
    assert before[-1]["type"] == "stop_decided" and (before[-1]["decision"], before[-1]["reason"]) == (
        "allow",
        "paused",
    )
    claude.prompt("what are you doing?")  # the person talks to Claude meanwhile
    claude.text("Waiting for you.")
    assert claude.stop().stdout == paused_line(2)  # still paused: allowed, nothing recorded
    assert project.journal(SID) == before
    ok(project, "resume", SID)
    claude.prompt("carry on")
    claude.text("Sure.")
    answer = block(claude.stop())  # the next stop goes on: iteration 3, with the guidance
    assert answer["reason"] == f"Make it green\n\n{GUIDANCE_HEADING}\nuse sqlite"
    assert answer["systemMessage"] == "🔄 Ralph iteration 3 of 5 | resumed by a person"
    claude.text("Done.\n<promise>COMPLETE</promise>")
    assert claude.stop().stdout.startswith("✅ Ralph loop complete after 3 iterations")
    started = [
        (e["iteration"], e["guidance"]) for e in project.journal(SID) if e["type"] == "iteration_started"
    ]
    assert started == [(1, ""), (2, ""), (3, "use sqlite")]


def test_native_stop_while_paused_ends_blocked(project: Project) -> None:
    claude = at_iteration_2(project)
    ok(project, "pause", SID)
    claude.text("Step two.")
    assert claude.stop().stdout == paused_line(2)
    ok(project, "stop", SID, "--reason", "enough")
    claude.prompt("hello")
    claude.text("Hi.")
    assert claude.stop().stdout == "⛔ Ralph loop blocked at iteration 2: manual stop: enough\n"
    assert not (project.dir / ".claude" / "ralph-ledger.local.json").exists()


def blocked_native_loop(project: Project, session: str | None = None) -> tuple[Claude, Path]:
    """A ledger-native loop ("Pick a database", at most 3 iterations) that its agent blocked at
    iteration 1 (in Claude Code session ``session``, or the stand-in's own): its Claude Code
    stand-in, and where its (removed) loop file goes."""
    ledger_project(project)
    claude = Claude(project) if session is None else Claude(project, session=session)
    start(project, "Pick a database", "--max-iterations", "3")
    claude.prompt("go")
    claude.text("<promise>BLOCKED</promise>\nReason: which database?")
    assert claude.stop().stdout.startswith("⛔ Ralph loop blocked at iteration 1")
    loop_file = project.dir / ".claude" / "ralph-ledger.local.json"
    assert not loop_file.exists()
    return claude, loop_file


def test_native_unblock_then_the_next_stop_goes_on(project: Project) -> None:
    claude, loop_file = blocked_native_loop(project)
    out = ok(project, "unblock", SID, "use sqlite", "--iterations", "2")
    goes_on = "the next stop of its Claude Code session goes on with it"
    assert out == f"{SID}: unblocked; iteration 2 of 3 comes next; {goes_on}\n"
    assert loop_file.exists()
    claude.prompt("go on")
    claude.text("Alright.")
    answer = block(claude.stop())
    assert answer["reason"] == f"Pick a database\n\n{GUIDANCE_HEADING}\nuse sqlite"
    claude.text("sqlite it is.\n<promise>COMPLETE</promise>")
    assert claude.stop().stdout.startswith("✅ Ralph loop complete after 2 iterations")
    assert not loop_file.exists()


def test_native_unblock_keeps_a_session_id_that_ends_in_digits(project: Project) -> None:
    """A Claude Code session id whose last group is all digits (about 1 UUID in 250): ``unblock``
    writes the loop file for that whole id, never the id cut at its last '-' as if the group were a
    loop's number, and the session's next stop goes on with the loop."""
    digits = "4b0c6a1e-7d2f-4c3b-9a8e-123456789012"
    sid = f"cc-{digits}"
    claude, loop_file = blocked_native_loop(project, session=digits)
    out = ok(project, "unblock", sid, "use sqlite", "--iterations", "2")
    assert out.startswith(f"{sid}: unblocked; iteration 2 of 3 comes next")
    written = json.loads(loop_file.read_text())
    assert (written["claude_session_id"], written["ledger_session"]) == (digits, sid)
    claude.prompt("go on")
    claude.text("Alright.")
    answer = block(claude.stop())
    assert answer["reason"] == f"Pick a database\n\n{GUIDANCE_HEADING}\nuse sqlite"
    claude.text("sqlite it is.\n<promise>COMPLETE</promise>")
    assert claude.stop().stdout.startswith("✅ Ralph loop complete after 2 iterations")


def test_drop_in_pause_steer_resume(project: Project) -> None:
    claude = Claude(project)
    start(
        project,
        "Write the parser",
        "--completion-promise",
        "DONE",
        "--max-iterations",
        "9",
        "--mode",
        "plugin",
    )
    claude.prompt("/ralph-loop Write the parser")
    claude.text("Started.")
    assert block(claude.stop())["reason"] == "Write the parser"  # iteration 2
    ok(project, "steer", SID, "parse integers first")
    claude.text("Some progress.")
    assert block(claude.stop())["reason"] == f"Write the parser\n\n{GUIDANCE_HEADING}\nparse integers first"
    ok(project, "pause", SID)
    claude.text("More progress.")
    assert claude.stop().stdout == paused_line(3)  # allowed; the state file stays at iteration 3
    state = project.dir / ".claude" / "ralph-loop.local.md"
    assert "iteration: 3" in state.read_text()
    ok(project, "resume", SID)
    claude.prompt("continue")
    claude.text("Back at it.")
    assert block(claude.stop())["reason"] == "Write the parser"  # the guidance was given once
    claude.text("<promise>DONE</promise>")
    assert claude.stop().stdout == "✅ Ralph loop: Detected <promise>DONE</promise>\n"
    refused = project.cli("unblock", SID)
    assert (refused.returncode, refused.stderr) == (
        1,
        f"ralph-ledger unblock: session {SID!r} is a ralph-loop plugin loop, which unblock cannot "
        "restart: start it again with /ralph-loop\n",
    )
    events = project.journal(SID)
    assert [e["kind"] for e in events if e["type"] == "override"] == ["steer", "pause", "resume"]
    started = [(e["iteration"], e["guidance"]) for e in events if e["type"] == "iteration_started"]
    assert started == [(1, ""), (2, ""), (3, "parse integers first"), (4, "")]

"""Journeys: a loop blocks; the person unblocks it from ralph-tui (``u``, with guidance). A ledger-native
Claude Code loop goes on at the next stop of its Claude Code session, as after ``ralph-ledger unblock``
(the TUI's key and the CLI's command take the same path: ``ledger.drivers.steer``); a runner loop
shows as stalled, with the command that continues it, until ``run --resume`` does."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from ledger.loop.prompt.next_prompt import GUIDANCE_HEADING
from tests.journeys.conftest import Project
from tests.journeys.test_claude_code import CLAUDE, block
from tests.journeys.test_run import Loop, resume
from tests.journeys.test_steering_claude_code import blocked_native_loop
from tests.journeys.test_steering_run import BLOCKS
from tests.unit.test_tui_support import screen_text, until
from tui.app import RalphApp
from tui.screens.session_screen import SessionScreen

SID = f"cc-{CLAUDE}"


def test_unblock_from_ralph_tui_restarts_a_claude_code_loop(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude, loop_file = blocked_native_loop(project)

    monkeypatch.chdir(project.dir)  # ralph-tui started in the project, as a person would
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    app = RalphApp([project.home / "journals"])

    async def unblock() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: SID in screen.rows and screen.rows[SID].status == "blocked")
            await pilot.press("u")  # a dialog asks for optional guidance
            await pilot.press(*"use sqlite", "enter")
            await until(pilot, lambda: len(app.steering.steered) == 1)

    asyncio.run(unblock())
    goes_on = "the next stop of its Claude Code session goes on with it"
    assert app.steering.steered == [f"{SID}: unblocked; iteration 2 of 6 comes next; {goes_on}"]
    assert loop_file.exists()
    claude.prompt("go on")
    claude.text("Alright.")
    answer = block(claude.stop())  # the loop goes on: iteration 2, with the person's guidance
    assert answer["reason"] == f"Pick a database\n\n{GUIDANCE_HEADING}\nuse sqlite"
    claude.text("sqlite it is.\n<promise>COMPLETE</promise>")
    assert claude.stop().stdout.startswith("✅ Ralph loop complete after 2 iterations")
    assert not loop_file.exists()


def test_an_unblocked_runner_loop_is_stalled_until_run_resume_goes_on(
    project: Project, tmp_path: Path
) -> None:
    """A ``ralph-ledger run`` loop blocks (its runner exits 3); ``u`` in ralph-tui unblocks it. Nothing
    drives it until the person types the command ralph-tui names: the row says ``◌ stalled`` (never
    ``● running`` with nothing running), the session's title names ``run --resume``; the resume goes on
    and the row follows it to ``✔ complete``."""
    loop = Loop(project, tmp_path, BLOCKS)
    blocked = loop.run("--session", "s1", "--prompt", "PROMPT.md", "--", *loop.cmd)
    assert blocked.returncode == 3, blocked.stderr
    app = RalphApp([project.home])
    resumed: list[subprocess.CompletedProcess[str]] = []

    async def watch() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: app.feed.live and "s1" in screen.rows)
            assert screen.rows["s1"].status == "blocked"
            await pilot.press("u", *"use sqlite", "enter")
            await until(pilot, lambda: screen.rows["s1"].status == "running")  # unblocked, yet nothing runs
            await pilot.pause()
            assert screen.table.get_cell("s1", "status").plain == "◌ stalled"
            said = app.steering.steered[-1]
            assert said.endswith("(continue it with `ralph-ledger run --resume s1`)")
            assert (screen.fleet.running, screen.fleet.stalled) == (0, 1)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.loads > 0)
            assert any(
                "◌ stalled · continue it with `ralph-ledger run --resume s1`" in line
                for line in screen_text(app)
            )
            await pilot.press("escape")

            resumed.append(await asyncio.to_thread(resume, project))  # what the person types
            await until(pilot, lambda: screen.rows["s1"].status == "complete")
            assert screen.table.get_cell("s1", "status").plain == "✔ complete"
            assert (screen.fleet.stalled, screen.fleet.complete) == (0, 1)

    asyncio.run(watch())
    assert resumed[0].returncode == 0, resumed[0].stderr
    assert (loop.state / "prompt2.txt").read_text().endswith(f"{GUIDANCE_HEADING}\nuse sqlite")

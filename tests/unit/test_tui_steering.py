"""ralph-tui steers a live replayed loop with Textual's Pilot: ``P`` pauses it, ``g`` steers it, ``P``
on its session screen resumes it, ``u`` on a running loop is refused in one line; the palette offers
the same; each action is an override event in the session's journal."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from textual.widgets import Input

from tests.unit.test_tui_support import SAMPLE_FILES, until
from tui.app import RalphApp
from tui.commands import steering_commands
from tui.screens.guidance_dialog import GuidanceDialog
from tui.screens.session_screen import SessionScreen

SID = "torn-last-line"  # the sample loop that is still running


def overrides(journal: Path) -> list[tuple[str, str]]:
    """(kind, reason) of the journal's override events, in order."""
    rows = [json.loads(line) for line in journal.read_text().splitlines() if line.strip().endswith("}")]
    return [(r["kind"], r["reason"]) for r in rows if r.get("type") == "override"]


def test_pause_steer_and_resume_a_live_replayed_loop(tmp_path: Path) -> None:
    sample = next(f for f in SAMPLE_FILES if f.name == f"{SID}.jsonl")
    replay_dir = tmp_path / "replay"
    app = RalphApp(replay_files=[sample], replay_dir=replay_dir, speed=0)
    journal = replay_dir / sample.name

    async def scenario() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: app.replay.done and SID in screen.rows and app.feed.live)
            assert screen.selected() == SID and screen.rows[SID].status == "running"

            await pilot.press("P")  # pause: recorded, and the row shows it once the watcher reads it
            await until(pilot, lambda: screen.rows[SID].paused)
            assert app.steering.steered == [
                f"{SID}: pausing once iteration 2 ends; resume it with `ralph-ledger resume {SID}`"
            ]
            assert "⏸" in screen.table.get_cell(SID, "status").plain
            names = [name for name, _, _ in steering_commands(app)]
            assert names == [f"Resume loop {SID}", f"Steer loop {SID}"]

            await pilot.press("g")  # steer: a dialog asks for the guidance
            assert isinstance(app.screen, GuidanceDialog)
            await pilot.press(*"use min and max", "enter")
            await until(pilot, lambda: len(app.steering.steered) == 2)
            assert (
                app.steering.steered[-1] == f"{SID}: guidance recorded; the prompt of iteration 3 carries it"
            )

            await pilot.press("enter")  # the session screen: P resumes it there
            await until(pilot, lambda: isinstance(app.screen, SessionScreen))
            await pilot.press("P")
            await until(pilot, lambda: not screen.rows[SID].paused)
            assert app.steering.steered[-1] == f"{SID}: resumed; the loop goes on after iteration 2"

            await pilot.press("u", "enter")  # unblock a running loop: refused in one line
            await until(pilot, lambda: len(app.steering.steered) == 4)
            assert app.steering.steered[-1] == (
                f"unblock {SID}: session {SID!r} is running; only a blocked or escalated session is unblocked"
            )
            await pilot.press("g", "escape")  # a dialog cancelled steers nothing
            await pilot.pause()
            assert not isinstance(app.screen, GuidanceDialog) and len(app.steering.steered) == 4
            assert not app.query(Input).filter("#guidance")

    asyncio.run(scenario())
    assert overrides(journal) == [("pause", ""), ("steer", "use min and max"), ("resume", "")]

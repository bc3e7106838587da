"""ralph-tui's fleet as a person watches it, driven with Textual's Pilot (issue 24, item 3): an unblocked
runner loop shows as stalled with the command that continues it; a folder without ``journals/`` yet shows
the loops started later; a deleted home is announced and its sessions leave; counts say ``1 session``;
one escalation is one pop-up, and a burst of pop-ups stays small in a corner; the alert history names a
bad line's session and reads a cut alert in full."""

from __future__ import annotations

import asyncio
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets._toast import Toast

from ledger import events as E
from ledger.storage.journal import Journal
from tests.unit.test_tui_support import (
    NOW,
    SAMPLE_FILES,
    copy_samples,
    fixed_clock,
    screen_text,
    settle,
    until,
)
from tui.app import RalphApp
from tui.screens.alerts_screen import AlertsScreen
from tui.screens.help_screen import LEGEND
from tui.screens.session_screen import SessionScreen
from tui.screens.value_viewer import ValueViewer


def plain(value: object) -> str:
    """A table cell as text."""
    return value.plain if isinstance(value, Text) else str(value)


def started(sid: str) -> list[E.Event]:
    """The first events of a loop (as ``ralph-ledger run`` writes them)."""
    t0 = NOW - timedelta(minutes=1)
    return [
        E.SessionStarted(session_id=sid, ts=t0, task="count to three", agent="bot", command=["./agent"]),
        E.IterationStarted(session_id=sid, ts=t0, iteration=1, max_iterations=3),
    ]


# -- 1. unblock and the fleet ------------------------------------------------------------------------------
def test_an_unblocked_runner_loop_shows_as_stalled_with_the_command_that_continues_it(tmp_path: Path) -> None:
    """The ``blocked`` sample's runner exited when its loop blocked; ``u`` unblocks it. Nothing drives it
    until ``ralph-ledger run --resume``: the row says ``◌ stalled`` (not ``● running``), the fleet counts
    it apart, the unblock's line and the session's title name the command. Once an iteration starts
    (the resume), it runs again."""
    home = tmp_path / "home"
    copy_samples(home / "journals", ["blocked"])
    app = RalphApp([home], now=fixed_clock)
    resume = "ralph-ledger run --resume blocked"

    async def scenario() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: app.feed.live and "blocked" in screen.rows)
            assert screen.rows["blocked"].status == "blocked"
            await pilot.press("u", "enter")  # unblock, no guidance
            await until(pilot, lambda: screen.rows["blocked"].status == "running")
            assert app.steering.steered == [
                f"blocked: unblocked; iteration 3 of 7 comes next (continue it with `{resume}`)"
            ]
            await pilot.pause()
            assert plain(screen.table.get_cell("blocked", "status")) == "◌ stalled"
            assert "◌ 1 stalled" in screen_text(app)[0]
            row = screen.rows["blocked"]
            assert row.stalled and row.runner and row.last_signal == "BLOCKED"
            assert (screen.fleet.running, screen.fleet.stalled) == (0, 1)

            await pilot.press("enter")  # the session's title says how to go on
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.loads > 0)
            assert any(f"◌ stalled · continue it with `{resume}`" in line for line in screen_text(app))
            await pilot.press("escape")

            # `run --resume` starts the next iteration: the loop runs again
            Journal.for_session(home / "journals", "blocked", fsync=False).append(
                E.IterationStarted(session_id="blocked", ts=NOW, iteration=3, max_iterations=7)
            )
            await until(pilot, lambda: not screen.rows["blocked"].stalled)
            assert plain(screen.table.get_cell("blocked", "status")) == "● running"
            assert (screen.fleet.running, screen.fleet.stalled) == (1, 0)

    asyncio.run(scenario())


def test_a_loop_held_by_a_usage_limit_shows_as_waiting_until_its_reset_then_runs(tmp_path: Path) -> None:
    """A usage limit stopped the loop's latest turn (the runner's wait, or Claude Code's StopFailure):
    the row says ``◷ waiting`` and the session's title until when; the next turn makes it run again,
    and a reset already past is no wait."""
    home = tmp_path / "home"
    journal = Journal.for_session(home / "journals", "held", fsync=False)
    journal.append(*started("held"))
    reset = NOW + timedelta(minutes=42)
    journal.append(
        E.RateLimited(
            session_id="held", ts=NOW, iteration=1, reason="usage limit", resets_at=reset, wait_s=2580
        )
    )
    app = RalphApp([home], now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: app.feed.live and "held" in screen.rows)
            row = screen.rows["held"]
            assert row.waiting_until == reset and row.status == "running"
            assert row.waiting_at(reset - timedelta(seconds=1)) == reset and row.waiting_at(reset) is None
            await pilot.pause()
            assert plain(screen.table.get_cell("held", "status")) == "◷ waiting"
            await pilot.press("enter")
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.loads > 0)
            assert any(
                f"◷ waiting until {reset:%H:%M} UTC (usage limit)" in line for line in screen_text(app)
            )
            await pilot.press("escape")
            journal.append(
                E.AgentTurn(
                    session_id="held", ts=NOW, iteration=1, output_excerpt="done", stop_reason="end_turn"
                )
            )
            await until(pilot, lambda: screen.rows["held"].waiting_until is None)
            await pilot.pause()
            assert plain(screen.table.get_cell("held", "status")) == "● running"
            assert screen.rows["held"].waiting_at(NOW) is None

    asyncio.run(scenario())


# -- 3. a home whose journals/ is yet to come --------------------------------------------------------------
@pytest.mark.parametrize("two", [False, True], ids=["ralph-tui PATH", "ralph-tui a b"])
def test_a_folder_without_journals_yet_shows_the_loops_started_later(tmp_path: Path, two: bool) -> None:
    """``ralph-tui PATH`` on an existing, empty folder (``ralph-tui a/.ralph b/.ralph`` with ``b``
    empty): a loop started later with that folder as its home (``RALPH_HOME=PATH ralph-ledger run``
    writes ``PATH/journals/S.jsonl``) shows up, as with ``--home PATH``."""
    a, b = tmp_path / "a" / ".ralph", tmp_path / "b" / ".ralph"
    copy_samples(a / "journals", ["tdd-success"])
    b.mkdir(parents=True)
    app = RalphApp([a, b] if two else [b], now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: app.feed.live)
            assert sorted(screen.rows) == (["tdd-success"] if two else [])
            Journal.for_session(b / "journals", "later", fsync=False).append(*started("later"))
            await until(pilot, lambda: "later" in screen.rows)
            assert screen.rows["later"].status == "running"

    asyncio.run(scenario())
    assert sorted(p.name for p in b.iterdir()) == [
        "journals"
    ]  # (what the loop made: ralph-tui makes nothing)


# -- 4. a deleted home -----------------------------------------------------------------------------------
def test_a_deleted_home_is_announced_its_sessions_leave_and_it_is_watched_again(tmp_path: Path) -> None:
    home = tmp_path / "project" / ".ralph"
    copy_samples(home / "journals", ["tdd-success", "thrashing"])
    app = RalphApp([home], now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            screen = app.sessions_screen
            await until(pilot, lambda: app.feed.live and len(screen.rows) == 2)
            shutil.rmtree(home)
            await until(pilot, lambda: not screen.rows)
            assert app.alert_log.gone == [f"{home.resolve()} was deleted: 2 sessions gone from the list"]
            assert any(n.message == app.alert_log.gone[0] for n in app._notifications)
            assert screen.fleet.sessions == 0 and screen.table.row_count == 0
            assert app.alert_log.history[-1].kind == "deleted"
            assert app.feed.monitor is not None and app.feed.monitor.sessions() == []

            # the home made again: its loops show again
            Journal.for_session(home / "journals", "again", fsync=False).append(*started("again"))
            await until(pilot, lambda: "again" in screen.rows)
            assert sorted(screen.rows) == ["again"] and screen.fleet.sessions == 1

    asyncio.run(scenario())


# -- 7. words and markers ----------------------------------------------------------------------------------
def test_one_session_is_counted_in_the_singular_and_the_legend_has_every_marker(tmp_path: Path) -> None:
    app = RalphApp([copy_samples(tmp_path / "j", ["tdd-success"])], now=fixed_clock, watch=False)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, lambda: app.feed.loaded and app.sessions_screen.rows)
            assert screen_text(app)[0].startswith(" 1 session ● 0 running ✔ 1 complete")

    asyncio.run(scenario())
    for marker in (
        "● running",
        "◌ stalled",
        "◷ waiting",
        "✔ complete",
        "■ blocked",
        "▲ escalated",
        "⏸ paused",
        "⏹ stop",
    ):
        assert marker in LEGEND


def toasts(app: RalphApp) -> list[Toast]:
    """The pop-ups on screen."""
    return list(app.screen.query(Toast))


@pytest.mark.parametrize("size", [(80, 24), (40, 10)])
def test_the_pop_ups_of_a_replay_stay_a_few_lines_in_a_corner(tmp_path: Path, size: tuple[int, int]) -> None:
    """The bundled samples replayed at once raise their alerts together: at most a few one-line
    pop-ups and one ``+k more`` line show, the rest is in the history (``a``); each escalation is one
    pop-up (a guard trip and the escalation it forces are one alert)."""
    app = RalphApp(replay_files=SAMPLE_FILES, replay_dir=tmp_path / "replay", speed=0, now=fixed_clock)
    seen: list[list[tuple[str, int, int]]] = []  # each look: (text, lines, columns) of each pop-up
    width, height = size

    async def scenario() -> None:
        async with app.run_test(size=size, notifications=True) as pilot:

            def look() -> bool:
                laid_out = [t for t in toasts(app) if t.region.height]
                seen.append([(str(t.render()), t.region.height, t.region.width) for t in laid_out])
                rows = app.sessions_screen.rows
                return app.replay.done and len(rows) == 20 and len(app.alert_log.alerts) >= 20

            await until(pilot, look)
            await pilot.pause(0.2)
            look()

    asyncio.run(scenario())
    most = 3 if height >= 24 else 1
    shown = [t for look in seen for t in look]
    assert max(len(look) for look in seen) <= most + 1  # the pop-ups and the "+k more" line
    assert {lines for _, lines, _ in shown} == {1} and max(cols for _, _, cols in shown) <= width // 2
    assert all(text[0] in "✔■▲+" for text, _, _ in shown)
    assert len(app.alert_log.alerts) == 20  # 19 loops ended, one of them twice (blocked, unblocked)
    assert seen[-1][-1][0] == f"+{20 - most} more " + ("· a: alert history" if width >= 80 else "(a)")
    ended = {"circuit-breaker", "quality-regression", "thrashing", "validation-stall", "max-iterations"}
    assert sorted(a.split()[0] for a in app.alert_log.alerts if a.split()[0] in ended) == sorted(ended)


# -- 11. the alert history ---------------------------------------------------------------------------------
def test_a_bad_line_names_its_session_and_a_cut_alert_reads_in_full(tmp_path: Path) -> None:
    journals = copy_samples(tmp_path / "journals", ["thrashing"])
    with (journals / "thrashing.jsonl").open("a") as f:
        f.write("this is not an event\n")
    app = RalphApp([journals], now=fixed_clock)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.feed.live and app.alert_log.bad_lines)
            await pilot.press("a")
            screen = app.screen
            assert isinstance(screen, AlertsScreen)
            bad = next(e for e in screen.shown if e.kind == "bad line")
            assert bad.session_id == "thrashing" and bad.message.startswith(
                f"{journals / 'thrashing.jsonl'}:34: "
            )
            assert any(line.split()[2] == "thrashing" for line in screen_text(app) if "bad line" in line)
            # an alert longer than the table's column is cut there; Enter reads it whole
            table = screen.query_one("#alerts")
            table.move_cursor(row=screen.shown.index(bad))  # type: ignore[attr-defined]
            assert not any(bad.message in line for line in screen_text(app))
            await pilot.press("enter")
            await settle(pilot, lambda: isinstance(app.screen, ValueViewer))
            viewer = app.screen
            assert isinstance(viewer, ValueViewer) and viewer.text == bad.message
            assert viewer.title_text.startswith("bad line · thrashing · ")
            await pilot.press("escape", "o")  # o opens the alert's session
            await settle(pilot, lambda: isinstance(app.screen, SessionScreen))
            assert app.screen.session_id == "thrashing"  # type: ignore[attr-defined]

    asyncio.run(scenario())

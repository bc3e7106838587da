"""``ralph-tui --bell`` and ``--osc-notify 9|777``: each alert rings the bell and sends a desktop
notification through the terminal, once, written to the terminal's driver."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from ledger import events as E
from ledger.storage.journal import Journal
from tests.unit.test_tui_support import NOW, copy_samples, fixed_clock, until
from tui.app import RalphApp
from tui.attention import Attention
from tui.main import parse_args


def test_the_sequences_for_one_alert() -> None:
    message = "s1 complete after 3 iterations"
    assert Attention().sequence("completed", message) == ""
    assert Attention(bell=True).sequence("completed", message) == "\a"
    assert Attention(osc=9).sequence("completed", message) == f"\x1b]9;ralph-tui: completed: {message}\a"
    assert (
        Attention(bell=True, osc=777).sequence("guard", "a;b") == "\a\x1b]777;notify;ralph-tui: guard;a;b\a"
    )


def test_a_message_cannot_end_the_sequence_or_start_another() -> None:
    sent = Attention(osc=9).sequence("escalated", "evil\a\x1b]52;c;payload\x07\x9d\nnext line" + "x" * 500)
    assert sent.count("\x1b") == 1 and sent.count("\a") == 1 and sent.endswith("…\a")
    assert "\n" not in sent and "\x9d" not in sent


def test_the_command_line_takes_the_options() -> None:
    args = parse_args(["--bell", "--osc-notify", "777", "home"])
    assert (args.bell, args.osc_notify) == (True, 777)
    assert (parse_args([]).bell, parse_args([]).osc_notify) == (False, None)
    with pytest.raises(SystemExit) as exc:
        parse_args(["--osc-notify", "8"])
    assert exc.value.code == 2


def test_each_alert_rings_once_and_sends_one_desktop_notification(tmp_path: Path) -> None:
    journals = copy_samples(tmp_path / "journals", ["tdd-success"])
    app = RalphApp([journals], now=fixed_clock, attention=Attention(bell=True, osc=777))
    journal = Journal.for_session(journals, "live-one", fsync=False)
    t0 = NOW - timedelta(minutes=5)
    written: list[str] = []

    async def scenario() -> None:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await until(pilot, lambda: app.feed.live and len(app.sessions_screen.rows) == 1)
            assert app._driver is not None
            write = app._driver.write

            def capture(data: str) -> None:
                if "\a" in data or "\x1b]" in data:
                    written.append(data)
                write(data)

            app._driver.write = capture  # type: ignore[method-assign]
            journal.append(
                E.SessionStarted(session_id="live-one", ts=t0, task="count to three", agent="bot"),
                E.IterationStarted(session_id="live-one", ts=t0, iteration=1, max_iterations=3),
            )
            await until(pilot, lambda: "live-one" in app.sessions_screen.rows)
            assert written == []  # a loop that starts is no alert
            journal.append(E.SessionCompleted(session_id="live-one", ts=t0, iteration=1, total_iterations=1))
            await until(pilot, lambda: len(app.alert_log.alerts) == 1)
            await pilot.pause()
            assert written == ["\a\x1b]777;notify;ralph-tui: completed;live-one complete after 1 iteration\a"]

            Journal.for_session(journals, "live-two", fsync=False).append(
                E.SessionStarted(session_id="live-two", ts=t0, task="loop", agent="bot"),
                E.GuardTripped(
                    session_id="live-two", ts=t0, iteration=1, guard="stall", detail="no progress"
                ),
                E.SessionEscalated(
                    session_id="live-two", ts=t0, iteration=1, guard="stall", reason="stalled"
                ),
            )
            # the guard trip and the escalation it forces: one alert, one ring, one notification
            await until(pilot, lambda: len(app.alert_log.alerts) == 2)
            await pilot.pause()
            assert len(written) == 2 and all(w.count("\a") == 2 for w in written)
            assert (
                written[1]
                == "\a\x1b]777;notify;ralph-tui: escalated;live-two escalated at iteration 1: stalled\a"
            )

    asyncio.run(scenario())


def test_without_the_options_an_alert_writes_nothing_to_the_terminal(tmp_path: Path) -> None:
    journals = copy_samples(tmp_path / "journals", ["tdd-success"])
    app = RalphApp([journals], now=fixed_clock)
    journal = Journal.for_session(journals, "live-one", fsync=False)
    written: list[str] = []

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.feed.live and len(app.sessions_screen.rows) == 1)
            assert app._driver is not None
            app._driver.write = written.append  # type: ignore[method-assign,assignment]
            journal.append(
                E.SessionStarted(session_id="live-one", ts=NOW, task="t", agent="bot"),
                E.SessionCompleted(session_id="live-one", ts=NOW, iteration=1, total_iterations=1),
            )
            await until(pilot, lambda: len(app.alert_log.alerts) == 1)
            await pilot.pause()
            assert not [w for w in written if "\a" in w or "\x1b]" in w]

    asyncio.run(scenario())

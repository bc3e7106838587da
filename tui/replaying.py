"""Replaying recorded journals as if live: the replay worker, its clock, its speed and its pause.

``Replaying`` is a mixin of ``RalphApp`` (tui/app.py), which sets the state declared here in its
``__init__``: the replay worker copies the recordings line by line into the watched directory (at the
recorded gaps divided by the speed), where the live tail (tui/live.py) picks them up like any loop's.
The recordings start together unless ``sequential``; the clock is ledger's ``ReplayClock``, the
monitor's ``now``, so ages read from the replayed times.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

from textual import work

from ledger import one_line as first_line
from ledger.monitor.replay import ReplayClock, replay
from tui.commands import MAX_SPEED, MIN_SPEED, faster, slower, speed_label
from tui.messages import Failed, ReplayProgress
from tui.screens.fleet import SessionsScreen

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[None]
else:
    _AppBase = object

DEFAULT_SPEED: Final = 20.0
MAX_GAP_S: Final = 2.0


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


def count_lines(files: Sequence[Path]) -> int:
    """The lines a replay of ``files`` writes (a torn last line counts as one)."""
    total = 0
    for f in files:
        data = f.read_bytes()
        total += data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
    return total


class Replaying(_AppBase):
    """Replay recorded journals into the watched directory; + / - change the speed, p pauses."""

    replaying: bool
    replay_files: list[Path]
    replay_dir: Path | None
    speed: float
    paused: bool
    replay_lines: int
    replay_total: int
    replay_done: bool
    sequential: bool
    sessions_screen: SessionsScreen
    replay_clock: ReplayClock
    """The replayed time (``ledger.monitor.replay.ReplayClock``): the monitor's ``now`` in a replay, so
    ages and durations are measured on the replayed timeline."""
    _sleep: Callable[[float], object] | None
    _resume: threading.Event
    _stop: threading.Event

    def _replayed(self, replayed: float) -> None:
        """Called by the replay before each line: waits while paused, then notes the line's time."""
        while not self._resume.wait(0.1):
            if self._stop.is_set():
                return
        self.replay_clock.mark(replayed)

    def action_faster(self) -> None:
        """Replay twice as fast (up to no waiting at all)."""
        self.set_speed(faster(self.speed))

    def action_slower(self) -> None:
        """Replay half as fast (down to the slowest speed)."""
        self.set_speed(slower(self.speed))

    def set_speed(self, speed: float) -> None:
        """The replay's speed (0: no waiting), kept within the speeds a replay can play at."""
        self.speed = 0.0 if speed <= 0 else min(MAX_SPEED, max(MIN_SPEED, speed))
        self.show_replay()

    def action_pause(self) -> None:
        """Pause the replay (no line is written, the clock stands still), or resume it."""
        if self.replay_done:
            return
        self.paused = not self.paused
        if self.paused:
            self.replay_clock.pause()
            self._resume.clear()
        else:
            self.replay_clock.resume()
            self._resume.set()
        self.show_replay()

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def run_replay(self) -> None:
        """Copy the recordings into the watched directory as if the loops were running now."""
        assert self.replay_dir is not None
        total = count_lines(self.replay_files)
        self.post_message(ReplayProgress(0, total, False))
        written, last_post = 0, 0.0
        try:
            for written in replay(
                self.replay_files,
                self.replay_dir,
                speed=1.0,  # the gaps are scaled by the current speed in _replay_sleep
                max_gap_s=float("inf"),
                sleep=self._replay_sleep,
                stop=self._stop,
                on_line=self._replayed,
                sequential=self.sequential,
            ):
                if self.paused or time.monotonic() - last_post > 0.1:  # paused: the count it stopped at
                    last_post = time.monotonic()
                    self.post_message(ReplayProgress(written, total, False))
        except Exception as exc:
            self.post_message(Failed(f"replay failed: {first_line(exc)}"))
        self.post_message(ReplayProgress(written, total, True))

    def _replay_sleep(self, gap: float) -> None:
        """Wait a recorded gap at the current speed (capped), or not at all at speed 0."""
        speed = self.speed
        if speed <= 0:
            return
        wait = min(gap / speed, MAX_GAP_S)
        if self._sleep is not None:
            self._sleep(wait)
        else:
            self._stop.wait(wait)

    def on_replay_progress(self, message: ReplayProgress) -> None:
        """Show how far the replay has come."""
        if self._stop.is_set() or not self.is_running:  # quitting: the screens are going away
            return
        self.replay_lines, self.replay_total = message.lines, message.total
        self.replay_done = message.done
        self.show_replay()

    def show_replay(self) -> None:
        """The replay's progress bar (its speed, the lines written), then a note in the fleet line."""
        if not self.replaying:
            return
        screen = self.sessions_screen
        if self.replay_done:
            screen.show_progress("")
            screen.note(f"replayed {self.replay_lines} lines")
        else:
            state = "paused (p resumes)" if self.paused else "replaying"
            label = f"{state} {speed_label(self.speed)}: {self.replay_lines}/{self.replay_total} lines"
            label += "" if self.paused else " · p pauses"
            screen.show_progress(label, self.replay_lines, self.replay_total)

"""Replaying recorded journals as if live: the replay worker, its clock, its speed and its pause.

``Replay`` is owned by the app (``RalphApp.replay``): its worker copies the recordings line by line into
the watched directory (at the recorded gaps divided by the speed), where the feed (tui/feed.py) picks
them up like any loop's, and posts ``ReplayProgress``. The recordings start together unless
``sequential``; the clock is ledger's ``ReplayClock``, the monitor's ``now``, so ages read from the
replayed times.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from textual.app import App

from ledger import one_line as first_line
from ledger.monitor.replay import ReplayClock, replay
from tui.commands import MAX_SPEED, MIN_SPEED, faster, slower, speed_label
from tui.messages import Failed, ReplayProgress

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


class Replay:
    """Recorded journals played into a watched directory (none: not replaying); + / - change the
    speed, p pauses. The state here is written on the UI thread (the handlers), read by the worker."""

    def __init__(
        self,
        app: App[Any],
        files: Sequence[Path] = (),
        *,
        directory: Path | None = None,
        speed: float = DEFAULT_SPEED,
        sequential: bool = False,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        self._app = app
        self.files = list(files)
        self.on = bool(self.files)
        """Replaying at all (``--replay``)."""
        self._own_directory = False
        if self.on:
            if directory is None:
                directory = Path(tempfile.mkdtemp(prefix="ralph-tui-replay-"))
                self._own_directory = True
            directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        """Where the recordings are written (the directory the feed watches)."""
        self.speed = speed
        self.sequential = sequential
        self._sleep = sleep
        self.clock = ReplayClock()
        """The replayed time (``ledger.monitor.replay.ReplayClock``): the monitor's ``now`` in a replay, so
        ages and durations are measured on the replayed timeline."""
        self.paused = False
        self.lines = 0
        self.total = 0
        self.done = False
        self._resume = threading.Event()
        self._resume.set()
        self._stop = threading.Event()

    # -- the UI thread's side -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the replay worker."""
        self._app.run_worker(
            self._run, name="run_replay", group="replay", thread=True, exclusive=True, exit_on_error=False
        )

    def stop(self) -> None:
        """Stop the worker (at its next line or wait)."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        """Asked to stop (the app is quitting)."""
        return self._stop.is_set()

    def cleanup(self) -> None:
        """Remove the temporary directory the recordings were written to (one made here)."""
        if self._own_directory and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def faster(self) -> None:
        """Replay twice as fast (up to no waiting at all)."""
        self.set_speed(faster(self.speed))

    def slower(self) -> None:
        """Replay half as fast (down to the slowest speed)."""
        self.set_speed(slower(self.speed))

    def set_speed(self, speed: float) -> None:
        """The replay's speed (0: no waiting), kept within the speeds a replay can play at."""
        self.speed = 0.0 if speed <= 0 else min(MAX_SPEED, max(MIN_SPEED, speed))

    def toggle_pause(self) -> None:
        """Pause the replay (no line is written, the clock stands still), or resume it."""
        if self.done:
            return
        self.paused = not self.paused
        if self.paused:
            self.clock.pause()
            self._resume.clear()
        else:
            self.clock.resume()
            self._resume.set()

    def progress(self, message: ReplayProgress) -> None:
        """Keep how far the worker has come."""
        self.lines, self.total, self.done = message.lines, message.total, message.done

    def label(self) -> str:
        """The progress bar's label: paused or replaying, the speed, the lines written."""
        state = "paused (p resumes)" if self.paused else "replaying"
        label = f"{state} {speed_label(self.speed)}: {self.lines}/{self.total} lines"
        return label + ("" if self.paused else " · p pauses")

    # -- the worker's thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        """Copy the recordings into the watched directory as if the loops were running now."""
        assert self.directory is not None
        post = self._app.post_message
        total = count_lines(self.files)
        post(ReplayProgress(0, total, False))
        written, last_post = 0, 0.0
        try:
            for written in replay(
                self.files,
                self.directory,
                speed=1.0,  # the gaps are scaled by the current speed in _wait
                max_gap_s=float("inf"),
                sleep=self._wait,
                stop=self._stop,
                on_line=self._replayed,
                sequential=self.sequential,
            ):
                if self.paused or time.monotonic() - last_post > 0.1:  # paused: the count it stopped at
                    last_post = time.monotonic()
                    post(ReplayProgress(written, total, False))
        except Exception as exc:
            post(Failed(f"replay failed: {first_line(exc)}"))
        post(ReplayProgress(written, total, True))

    def _replayed(self, replayed: float) -> None:
        """Called by the replay before each line: waits while paused, then notes the line's time."""
        while not self._resume.wait(0.1):
            if self._stop.is_set():
                return
        self.clock.mark(replayed)

    def _wait(self, gap: float) -> None:
        """Wait a recorded gap at the current speed (capped), or not at all at speed 0."""
        speed = self.speed
        if speed <= 0:
            return
        wait = min(gap / speed, MAX_GAP_S)
        if self._sleep is not None:
            self._sleep(wait)
        else:
            self._stop.wait(wait)

"""Shared helpers for the TUI tests (no tests here): sample journals in a temporary directory, a fixed
clock, and waiting on the app's state instead of sleeping."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from textual.app import App
from textual.pilot import Pilot
from textual.strip import Strip

ROOT: Final = Path(__file__).resolve().parents[2]
SAMPLES: Final = ROOT / "sample_sessions"
SAMPLE_FILES: Final = sorted(SAMPLES.glob("*.jsonl"))
NOW: Final = datetime(2026, 4, 1, 16, 0, tzinfo=UTC)


def fixed_clock() -> datetime:
    """The clock of every TUI test: the afternoon the samples were recorded."""
    return NOW


def copy_samples(target: Path, names: list[str] | None = None) -> Path:
    """Copy the recorded sample journals (or some of them) into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for f in SAMPLE_FILES:
        if names is None or f.stem in names:
            shutil.copy(f, target / f.name)
    return target


async def settle(pilot: Pilot[Any], done: Callable[[], object], *, rounds: int = 400) -> None:
    """Let workers finish and messages land until ``done()`` holds (no fixed sleeps: each round
    waits for the app's workers, except the never-ending file watcher, and for its message queues to
    go idle)."""
    for _ in range(rounds):
        finite = [w for w in pilot.app.workers if w.group != "watch"]
        if finite:  # (an empty list would mean "every worker")
            await pilot.app.workers.wait_for_complete(finite)
        await pilot.pause()
        if done():
            await pilot.pause()
            return
    raise AssertionError("the app did not reach the expected state")


async def until(pilot: Pilot[Any], done: Callable[[], object], *, timeout: float = 15.0) -> None:
    """Poll the app's state until ``done()`` holds or ``timeout`` seconds pass (for work that depends
    on the outside world, such as file-system notifications)."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for the app")
        await pilot.pause(0.02)
    await pilot.pause()


def screen_strips(app: App[Any]) -> list[Strip]:
    """The screen as the terminal gets it: one strip (text and styles) per line."""
    return app.screen._compositor.render_strips()


def screen_text(app: App[Any]) -> list[str]:
    """The screen's lines as text."""
    return [strip.text for strip in screen_strips(app)]

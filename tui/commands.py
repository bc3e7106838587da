"""Command palette entries: open a session by id, SQL console and example queries, theme, replay speed,
and steering a loop (pause / resume, steer, unblock)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Final

from textual.command import DiscoveryHit, Hit, Hits, Provider

from ledger.monitor import EXAMPLE_QUERIES
from tui.messages import ralph_app

if TYPE_CHECKING:
    from tui.app import RalphApp

SPEEDS: Final = (1.0, 5.0, 20.0, 100.0, 0.0)
"""The replay speeds the palette offers (0: no waiting)."""
MIN_SPEED: Final = 0.25
MAX_SPEED: Final = 1000.0
"""A replay plays between 4 times slower and 1000 times faster than recorded, or without waiting (0)."""

Command = tuple[str, Callable[[], object], str]


def speed_label(speed: float) -> str:
    """``×20``, or ``max`` for no waiting at all."""
    return "max" if speed == 0 else f"×{speed:g}"


def valid_speed(speed: float) -> bool:
    """0 (no waiting), or a speed between ``MIN_SPEED`` and ``MAX_SPEED``."""
    return speed == 0 or MIN_SPEED <= speed <= MAX_SPEED


def faster(speed: float) -> float:
    """Twice as fast; past ``MAX_SPEED`` (and from there on) no waiting at all."""
    if speed == 0 or speed * 2 > MAX_SPEED:
        return 0.0
    return speed * 2


def slower(speed: float) -> float:
    """Half as fast, never below ``MIN_SPEED``; from no waiting, ``MAX_SPEED``."""
    return MAX_SPEED if speed == 0 else max(MIN_SPEED, speed / 2)


def steering_commands(app: RalphApp) -> list[Command]:
    """Pause or resume and steer each running loop, unblock each blocked or escalated one."""
    out: list[Command] = []
    for sid in app.session_ids():
        row = app.session_row(sid)
        if row is None:
            continue
        if row.status == "running":
            verb = "Resume" if row.paused else "Pause"
            out.append(
                (f"{verb} loop {sid}", partial(app.toggle_pause, sid), "As ralph-ledger pause / resume")
            )
            out.append((f"Steer loop {sid}", partial(app.ask_guidance, sid), "Guidance for its next prompt"))
        elif row.status in ("blocked", "escalated"):
            out.append(
                (f"Unblock loop {sid}", partial(app.ask_unblock, sid), "5 more iterations, with guidance")
            )
    return out


class RalphCommands(Provider):
    """The app's own commands (the system commands stay available too)."""

    def commands(self, *, sessions: bool = True) -> list[Command]:
        """Every command, with the sessions known now."""
        app = ralph_app(self)
        out: list[Command] = [
            ("SQL console", app.action_sql, "Query the ledger's views and detectors"),
            ("Toggle theme", app.action_toggle_theme, "Switch between the light and the dark theme"),
            ("Alert history", app.action_alerts, "Every alert since start-up; Enter opens the session"),
            ("Help", app.action_help, "Every key, by screen"),
        ]
        out += [
            (f"Example query: {name}", partial(app.open_example, name), "Load it in the SQL console, run it")
            for name in EXAMPLE_QUERIES
        ]
        if app.replaying:
            out += [
                (f"Replay speed {speed_label(s)}", partial(app.set_speed, s), "How fast the recording plays")
                for s in SPEEDS
            ]
            out.append(("Pause / resume the replay", app.action_pause, "Stop writing lines until resumed"))
        if sessions:
            out += [
                (f"Open session {sid}", partial(app.open_session, sid), "Show its iterations and events")
                for sid in app.session_ids()
            ]
            out += steering_commands(app)
        return out

    async def discover(self) -> Hits:
        """What the palette shows before anything is typed (sessions only once searched for)."""
        for name, callback, help_text in self.commands(sessions=False):
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        """Fuzzy-match every command and session id."""
        matcher = self.matcher(query)
        for name, callback, help_text in self.commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)

"""Command palette entries: open a session by id, SQL console and example queries, theme, replay speed,
and steering a loop (pause / resume, steer, unblock). Each entry runs one of the app's actions or posts
a message to it (``OpenSession``, ``OpenExample``, ``SetSpeed``, ``SteerLoop``); what the palette reads
of the app is ``CommandSource``, a shape the app has, not the app (no import of it)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Final, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.message import Message

from ledger.monitor import EXAMPLE_QUERIES, SessionRow
from tui.messages import OpenExample, OpenSession, SetSpeed, SteerLoop

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


class CommandSource(Protocol):
    """What the palette reads of the app it runs in: the sessions known, whether it replays; it acts
    by posting messages and running actions."""

    @property
    def replaying(self) -> bool:
        """Replaying recordings: the speed commands show."""
        ...

    def session_ids(self) -> list[str]:
        """Every session known, in the sessions table's order first."""
        ...

    def session_row(self, session_id: str) -> SessionRow | None:
        """The session's latest row."""
        ...

    def post_message(self, message: Message) -> bool:
        """Post a message to the app."""
        ...

    async def run_action(self, action: str) -> bool:
        """Run one of the app's actions by name."""
        ...


def post(source: CommandSource, message: Message) -> Callable[[], object]:
    """A palette callback that posts ``message`` to the app."""
    return partial(source.post_message, message)


def steering_commands(app: CommandSource) -> list[Command]:
    """Pause or resume and steer each running loop, unblock each blocked or escalated one."""
    out: list[Command] = []
    for sid in app.session_ids():
        row = app.session_row(sid)
        if row is None:
            continue
        if row.status == "running":
            verb = "Resume" if row.paused else "Pause"
            out.append(
                (f"{verb} loop {sid}", post(app, SteerLoop(sid, "pause")), "As ralph-ledger pause / resume")
            )
            out.append(
                (f"Steer loop {sid}", post(app, SteerLoop(sid, "steer")), "Guidance for its next prompt")
            )
        elif row.status in ("blocked", "escalated"):
            out.append(
                (
                    f"Unblock loop {sid}",
                    post(app, SteerLoop(sid, "unblock")),
                    "5 more iterations, with guidance",
                )
            )
    return out


class RalphCommands(Provider):
    """The app's own commands (the system commands stay available too)."""

    def commands(self, *, sessions: bool = True) -> list[Command]:
        """Every command, with the sessions known now."""
        app = cast(CommandSource, self.app)
        out: list[Command] = [
            ("SQL console", partial(app.run_action, "sql"), "Query the ledger's views and detectors"),
            (
                "Toggle theme",
                partial(app.run_action, "toggle_theme"),
                "Switch between the light and the dark theme",
            ),
            (
                "Alert history",
                partial(app.run_action, "alerts"),
                "Every alert since start-up; Enter opens the session",
            ),
            ("Help", partial(app.run_action, "help"), "Every key, by screen"),
        ]
        out += [
            (f"Example query: {name}", post(app, OpenExample(name)), "Load it in the SQL console, run it")
            for name in EXAMPLE_QUERIES
        ]
        if app.replaying:
            out += [
                (f"Replay speed {speed_label(s)}", post(app, SetSpeed(s)), "How fast the recording plays")
                for s in SPEEDS
            ]
            out.append(
                (
                    "Pause / resume the replay",
                    partial(app.run_action, "pause"),
                    "Stop writing lines until resumed",
                )
            )
        if sessions:
            out += [
                (f"Open session {sid}", post(app, OpenSession(sid)), "Show its iterations and events")
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

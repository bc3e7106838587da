"""Steering the selected loop from ralph-tui, as ``ralph-ledger pause`` / ``resume`` / ``steer`` /
``unblock`` do: ``P`` pauses or resumes it, ``g`` asks for guidance for its next iteration, ``u``
unblocks a blocked or escalated loop (with optional guidance). The keys (``SteeringScreen``) and the
palette post ``SteerLoop`` to the app, which hands it to its ``Steering``: the dialog, then a thread
worker that writes the journal and posts ``Steered`` (its line is shown as a notification, and the
watcher picks the new event up like any other). A dataset's session (``--dataset``) is read-only: each
key says so in one line, naming the session's own home."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.app import App

from ledger import EngineError, one_line, steer_journal
from ledger.monitor import DatasetMonitor, Monitor, SessionRow
from tui.messages import Steered
from tui.screens.guidance_dialog import GuidanceDialog


class Steering:
    """The app's steering: the dialogs, the worker that writes the journal, what each action did."""

    def __init__(
        self,
        app: App[Any],
        monitor: Callable[[], Monitor | None],
        session_row: Callable[[str], SessionRow | None],
    ) -> None:
        self._app = app
        self._monitor = monitor
        self._session_row = session_row
        self.steered: list[str] = []
        """What each steering action from the keys or the palette did, one line each (tests read it)."""

    def ask(self, session_id: str, action: str) -> None:
        """Act on a ``SteerLoop``: ``pause`` (or resume), ``steer`` or ``unblock``."""
        if action == "pause":
            self.toggle_pause(session_id)
        elif action == "steer":
            self.ask_guidance(session_id)
        elif action == "unblock":
            self.ask_unblock(session_id)

    def toggle_pause(self, session_id: str) -> None:
        """Pause the loop, or resume it when it is paused."""
        row = self._session_row(session_id)
        self.steer(session_id, "resume" if row is not None and row.paused else "pause")

    def ask_guidance(self, session_id: str) -> None:
        """Ask for guidance, then record it for the loop's next iteration."""
        if isinstance(self._monitor(), DatasetMonitor):  # read-only: no dialog, the one line
            self.steer(session_id, "steer")
            return
        dialog = GuidanceDialog(
            f"Steer {session_id}", "Added once to the prompt of the loop's next iteration."
        )

        def given(text: str | None) -> None:
            if text:
                self.steer(session_id, "steer", text)

        self._app.push_screen(dialog, given)

    def ask_unblock(self, session_id: str) -> None:
        """Ask for (optional) guidance, then unblock the loop with it."""
        if isinstance(self._monitor(), DatasetMonitor):
            self.steer(session_id, "unblock")
            return
        dialog = GuidanceDialog(
            f"Unblock {session_id}",
            "5 more iterations; the next one's prompt carries this guidance (optional).",
            optional=True,
        )

        def given(text: str | None) -> None:
            if text is not None:
                self.steer(session_id, "unblock", text)

        self._app.push_screen(dialog, given)

    def steer(self, session_id: str, action: str, text: str = "") -> None:
        """Record the steering action in the session's journal, in a thread worker."""
        work = partial(self._write, session_id, action, text)
        self._app.run_worker(work, name="steer", group="steer", thread=True, exit_on_error=False)

    def _write(self, session_id: str, action: str, text: str) -> None:
        """(In the worker's thread.) Write the action to the journal; post what it did."""
        post = self._app.post_message
        monitor = self._monitor()
        if isinstance(monitor, DatasetMonitor):  # a dataset is a copy: say where the session's home is
            post(Steered(session_id, monitor.steering_hint(session_id, action), True))
            return
        name = f"{session_id}.jsonl"
        path = next((p for p in monitor.journal_files() if p.name == name), None) if monitor else None
        if path is None:
            post(Steered(session_id, f"{session_id}: no journal to steer", True))
            return
        try:
            line = steer_journal(path, action, text)
        except (EngineError, OSError) as exc:
            post(Steered(session_id, f"{action} {session_id}: {one_line(exc)}", True))
        else:
            post(Steered(session_id, line, False))

    def steered_line(self, message: Steered) -> None:
        """Say what the steering did (the watcher shows its event as it shows any)."""
        self.steered.append(message.line)
        self._app.notify(message.line, severity="error" if message.error else "information", markup=False)

"""Steering the selected loop from ralph-tui, as ``ralph-ledger pause`` / ``resume`` / ``steer`` /
``unblock`` do: ``P`` pauses or resumes it, ``g`` asks for guidance for its next iteration, ``u``
unblocks a blocked or escalated loop (with optional guidance). Keys on the sessions and session
screens (``SteeringScreen``), commands in the palette; the journal is written in a thread worker
(``Steering.steer``) that posts ``Steered``: its line is shown as a notification, and the watcher
picks the new event up like any other. A dataset's session (``--dataset``) is read-only: each key
says so in one line, naming the session's own home."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Label

from ledger import EngineError, one_line, steer_journal
from ledger.monitor import DatasetMonitor
from tui.messages import ralph_app

if TYPE_CHECKING:
    from textual.app import App

    from ledger.monitor import Monitor, SessionRow

    _AppBase = App[None]
else:
    _AppBase = object


class Steered(Message):
    """A steering action was recorded (``line`` says what happens next), or refused (``error``)."""

    def __init__(self, session_id: str, line: str, error: bool) -> None:
        super().__init__()
        self.session_id = session_id
        self.line = line
        self.error = error


class GuidanceDialog(ModalScreen[str | None]):
    """One line of guidance: Enter gives it (empty only when ``optional``), Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    GuidanceDialog { align: center middle; }
    GuidanceDialog > Vertical {
        width: 80%; height: auto; border: round $primary; background: $surface; padding: 0 1;
    }
    GuidanceDialog #guidance { border: tall $accent; }
    """

    def __init__(self, title: str, hint: str, *, optional: bool = False) -> None:
        super().__init__(id="guidance-dialog")
        self.title_text, self.hint, self.optional = title, hint, optional

    def compose(self) -> ComposeResult:
        """The hint and the input, in a bordered box."""
        with Vertical() as box:
            box.border_title = self.title_text
            box.border_subtitle = "enter gives it · esc cancels"
            yield Label(self.hint)
            yield Input(placeholder="guidance for the agent", id="guidance")

    def on_mount(self) -> None:
        """Type straight away."""
        self.query_one("#guidance", Input).focus()

    @on(Input.Submitted, "#guidance")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if text or self.optional:
            self.dismiss(text)

    def action_cancel(self) -> None:
        """Close without steering."""
        self.dismiss(None)


class SteeringScreen(Screen[None]):
    """A screen showing a session it can steer (``steering_target``): the steering keys."""

    # not in the footer (it has no room left for them): the help screen and the palette list them
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("P", "pause_loop", "Pause/resume loop", show=False),
        Binding("g", "steer_loop", "Steer", show=False),
        Binding("u", "unblock_loop", "Unblock", show=False),
    ]

    def steering_target(self) -> str | None:
        """The session the keys act on (``None``: none)."""
        raise NotImplementedError

    def action_pause_loop(self) -> None:
        """Pause the session's loop, or resume it when paused."""
        if (sid := self.steering_target()) is not None:
            ralph_app(self).toggle_pause(sid)

    def action_steer_loop(self) -> None:
        """Ask for guidance for the loop's next iteration."""
        if (sid := self.steering_target()) is not None:
            ralph_app(self).ask_guidance(sid)

    def action_unblock_loop(self) -> None:
        """Ask for the guidance an unblocked loop goes on with."""
        if (sid := self.steering_target()) is not None:
            ralph_app(self).ask_unblock(sid)


class Steering(_AppBase):
    """``RalphApp``'s steering: the dialogs, the worker that writes the journal, the notifications."""

    monitor: Monitor | None
    steered: list[str]

    def session_row(self, session_id: str) -> SessionRow | None:
        """The session's latest row, as the sessions screen holds it."""
        raise NotImplementedError

    def toggle_pause(self, session_id: str) -> None:
        """Pause the loop, or resume it when it is paused."""
        row = self.session_row(session_id)
        self.steer(session_id, "resume" if row is not None and row.paused else "pause")

    def ask_guidance(self, session_id: str) -> None:
        """Ask for guidance, then record it for the loop's next iteration."""
        if isinstance(self.monitor, DatasetMonitor):  # read-only: no dialog, the one line
            self.steer(session_id, "steer")
            return
        dialog = GuidanceDialog(
            f"Steer {session_id}", "Added once to the prompt of the loop's next iteration."
        )

        def given(text: str | None) -> None:
            if text:
                self.steer(session_id, "steer", text)

        self.push_screen(dialog, given)

    def ask_unblock(self, session_id: str) -> None:
        """Ask for (optional) guidance, then unblock the loop with it."""
        if isinstance(self.monitor, DatasetMonitor):
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

        self.push_screen(dialog, given)

    @work(thread=True, group="steer", exit_on_error=False)
    def steer(self, session_id: str, action: str, text: str = "") -> None:
        """Record the steering action in the session's journal (in this worker's thread)."""
        monitor = self.monitor
        if isinstance(monitor, DatasetMonitor):  # a dataset is a copy: say where the session's home is
            self.post_message(Steered(session_id, monitor.steering_hint(session_id, action), True))
            return
        name = f"{session_id}.jsonl"
        path = next((p for p in monitor.journal_files() if p.name == name), None) if monitor else None
        if path is None:
            self.post_message(Steered(session_id, f"{session_id}: no journal to steer", True))
            return
        try:
            line = steer_journal(path, action, text)
        except (EngineError, OSError) as exc:
            self.post_message(Steered(session_id, f"{action} {session_id}: {one_line(exc)}", True))
        else:
            self.post_message(Steered(session_id, line, False))

    def on_steered(self, message: Steered) -> None:
        """Say what the steering did (the watcher shows its event as it shows any)."""
        self.steered.append(message.line)
        self.notify(message.line, severity="error" if message.error else "information", markup=False)

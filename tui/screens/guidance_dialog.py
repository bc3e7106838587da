"""The steering dialog: one line of guidance for a loop's next iteration (steer, unblock)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


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

"""The SQL console's value viewer: one result cell's whole value."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import TextArea

from ledger import plural


class ValueViewer(ModalScreen[None]):
    """One result cell's whole value, scrollable and selectable; ``c`` copies it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Close"),
        Binding("c", "copy", "Copy"),
    ]

    DEFAULT_CSS = """
    ValueViewer { align: center middle; }
    ValueViewer > Vertical {
        width: 90%; height: 80%; border: round $primary; background: $surface; padding: 0 1;
    }
    ValueViewer #value, ValueViewer #value:focus { height: 1fr; border: none; }
    """

    def __init__(self, title: str, text: str) -> None:
        super().__init__(id="value-viewer")
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        """The value in a read-only text area, in a bordered box."""
        with Vertical() as box:
            box.border_title = self.title_text
            box.border_subtitle = "c copies · esc closes"
            yield TextArea(self.text, read_only=True, soft_wrap=True, id="value")

    def on_mount(self) -> None:
        """Focus the text (arrows and the mouse scroll and select)."""
        area = self.query_one("#value", TextArea)
        if self.app.is_headless:
            area.cursor_blink = False
        area.focus()

    def action_copy(self) -> None:
        """Copy the whole value."""
        self.app.copy_to_clipboard(self.text)
        self.notify(f"copied {plural(len(self.text), 'character')}", markup=False)

"""The SQL console's export dialog: the path to export a result to (``.csv`` or ``.json``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Final

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

EXPORT_FORMATS: Final = {".csv": "csv", ".json": "json"}


def export_format(path: Path) -> str:
    """``csv`` or ``json``, from the file name's suffix; ``ValueError`` for any other."""
    kind = EXPORT_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: expected a file name ending in .csv or .json")
    return kind


class ExportDialog(ModalScreen[Path | None]):
    """Ask for the file to export the result to (``.csv`` or ``.json``)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    DEFAULT_CSS = """
    ExportDialog { align: center middle; }
    ExportDialog > Vertical {
        width: 72; max-width: 100%; height: auto; border: round $primary; background: $surface;
        padding: 0 1;
    }
    ExportDialog Input { margin-top: 1; }
    ExportDialog #export-hint { color: $text-muted; width: 1fr; height: auto; }
    """

    def __init__(self, default: str) -> None:
        super().__init__(id="export-dialog")
        self.default = default

    def compose(self) -> ComposeResult:
        """The file name, pre-filled."""
        with Vertical() as box:
            box.border_title = "Export the result"
            yield Input(self.default, id="export-path")
            yield Label(
                "Enter writes it (.csv or .json, relative to the current folder) · esc cancels",
                id="export-hint",
            )

    def on_mount(self) -> None:
        """Focus the file name."""
        field = self.query_one("#export-path", Input)
        if self.app.is_headless:
            field.cursor_blink = False
        field.focus()

    @on(Input.Submitted, "#export-path")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        self.dismiss(Path(text).expanduser() if text else None)

    def action_cancel(self) -> None:
        """Close without exporting."""
        self.dismiss(None)

"""The footer: the keys of the screen and the focused widget, as many as fit on one line.

Textual's ``Footer`` lays every key shown in a row and cuts the row at the terminal's edge, so at 80
columns the last keys (and any added later) never appear. ``KeyFooter`` measures the keys first: it
goes compact (less space around each key) when they do not fit, then leaves out the keys listed in
``DROP_FIRST`` (the help screen, ``?``, lists every key), then the last ones, until the row fits.
"""

from __future__ import annotations

from typing import Final

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

DROP_FIRST: Final = (
    "toggle_theme",
    "alerts",
    "reverse",
    "quit",
    "slower",
    "faster",
    "focus_events",
    "focus_timeline",
    "history(-1)",
    "examples",
)
"""Actions whose keys give way first when the footer is too narrow, in this order."""
Key = tuple[Binding, bool, str]
"""A key shown: its binding, whether it is enabled, its tooltip."""
PALETTE_WIDTH: Final = 13
"""``▏^p palette `` docked on the right."""


def key_width(key: str, description: str, *, compact: bool) -> int:
    """Cells one key takes: `` ^r Run `` (``^r Run `` compact, with its margin)."""
    return len(key) + len(description) + (2 if compact else 3)


class KeyFooter(Footer):
    """A footer that shows the keys that fit, dropping the least needed first."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[str] = []
        """The actions whose keys are on screen (for tests)."""
        self._width = 0

    def fit(self, keys: list[Key], width: int) -> tuple[list[Key], bool]:
        """The keys that fit ``width`` cells, and whether they are drawn compact."""
        app = self.app

        def needed(chosen: list[Key], compact: bool) -> int:
            widths = (key_width(app.get_key_display(b), b.description, compact=compact) for b, _, _ in chosen)
            return sum(widths)

        room = width - (PALETTE_WIDTH if self.show_command_palette and app.ENABLE_COMMAND_PALETTE else 0)
        if needed(keys, False) <= room:
            return keys, False
        chosen = list(keys)
        for action in DROP_FIRST:
            if needed(chosen, True) <= room:
                break
            chosen = [k for k in chosen if k[0].action != action]
        while len(chosen) > 1 and needed(chosen, True) > room:
            chosen.pop()
        return chosen, True

    def compose(self) -> ComposeResult:
        """One ``FooterKey`` per key that fits (one per action), then the command palette's key."""
        if not self._bindings_ready:
            return
        active = self.screen.active_bindings
        keys: list[Key] = []
        actions: set[str] = set()
        for _, binding, enabled, tooltip in active.values():
            if binding.show and binding.action not in actions:
                actions.add(binding.action)
                keys.append((binding, enabled, tooltip))
        self._width = self.size.width or self.app.size.width
        chosen, compact = self.fit(keys, self._width)
        self.set_reactive(Footer.compact, compact)
        self.set_class(compact, "-compact")
        self.shown = [b.action for b, _, _ in chosen]
        for binding, enabled, tooltip in chosen:
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                binding.action,
                disabled=not enabled,
                tooltip=tooltip,
            ).data_bind(compact=Footer.compact)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            palette = active.get(self.app.COMMAND_PALETTE_BINDING)
            if palette is not None:
                _, binding, enabled, tooltip = palette
                yield FooterKey(
                    binding.key,
                    self.app.get_key_display(binding),
                    binding.description,
                    binding.action,
                    classes="-command-palette",
                    disabled=not enabled,
                    tooltip=binding.tooltip or binding.description,
                )

    def on_resize(self) -> None:
        """Another width: the keys that fit it."""
        if self.size.width != self._width and self._bindings_ready:
            self.call_after_refresh(self.recompose)

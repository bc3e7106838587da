"""The status colours on screen: the current theme's, readable on whatever they are drawn on.

Cells are written in ``tui.format``'s palette (green, blue, amber, red, grey). ``ThemeColours`` is a
line filter the app applies to every line painted: a segment in a palette colour gets the colour of
its role in the current theme (``$text-success`` for green, ...), lightened or darkened until it has
a contrast of at least 4.5:1 (WCAG AA) against the segment's own background, so a status stays
readable on the cursor row and in a light theme, and the theme picker changes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import LineFilter

from tui import format as fmt

if TYPE_CHECKING:
    from textual.app import App


def rgb(colour: Color) -> fmt.RGB:
    """A Textual colour as an (r, g, b) triple."""
    return (colour.r, colour.g, colour.b)


def hex_rgb(value: str) -> fmt.RGB:
    """``#rrggbb`` as an (r, g, b) triple."""
    return rgb(Color.parse(value))


CACHE_SIZE: Final = 4096
"""Styles remembered (with what they are drawn as) before the filter starts again."""
PALETTE: dict[fmt.RGB, str] = {hex_rgb(colour): role for colour, role in fmt.THEME_ROLES.items()}
"""The palette's colours (as triples) -> their theme roles."""


def theme_colours(variables: dict[str, str]) -> dict[str, fmt.RGB]:
    """Each role's colour in a theme's variables (``muted``: the foreground 60% over the surface)."""
    out = {role: rgb(Color.parse(variables[role])) for role in fmt.THEME_ROLES.values() if role != "muted"}
    surface = Color.parse(variables["surface"])
    out["muted"] = rgb(surface.blend(Color.parse(variables["foreground"]), 0.6))
    return out


class ThemeColours(LineFilter):
    """Paint the palette in the current theme's colours, readable on their backgrounds."""

    def __init__(self, app: App[Any]) -> None:
        super().__init__()
        self.app = app
        self._theme = ""
        self._roles: dict[str, fmt.RGB] = {}
        self._styles: dict[tuple[Style, Color], Style | None] = {}

    def _switch(self) -> None:
        """The theme changed: its colours, and nothing painted in the last one's."""
        self._theme = self.app.theme
        self._roles = theme_colours(self.app.theme_variables)
        self._styles.clear()

    def colour(self, palette: fmt.RGB, background: fmt.RGB) -> fmt.RGB:
        """What a palette colour is drawn as on ``background`` in the current theme."""
        if self.app.theme != self._theme:
            self._switch()
        return fmt.readable(self._roles[PALETTE[palette]], background)

    def themed(self, style: Style, background: Color) -> Style | None:
        """``style`` with its palette colour replaced, or ``None`` when it has no palette colour."""
        if style.color is None:
            return None
        c = style.color.get_truecolor()
        fg = (c.red, c.green, c.blue)
        if fg not in PALETTE:
            return None
        if style.bgcolor is not None:
            b = style.bgcolor.get_truecolor()
            bg = (b.red, b.green, b.blue)
        else:
            bg = rgb(background)
        return style + Style(color=RichColor.from_rgb(*self.colour(fg, bg)))

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        """Recolour the palette's segments (others pass through untouched)."""
        if self.app.theme != self._theme:
            self._switch()
        cache = self._styles
        out: list[Segment] = []
        for segment in segments:
            style = segment.style
            if style is None or segment.control:
                out.append(segment)
                continue
            key = (style, background)
            if key in cache:
                themed = cache[key]
            else:
                if len(cache) >= CACHE_SIZE:  # styles carrying per-cell meta are many: start again
                    cache.clear()
                themed = cache[key] = self.themed(style, background)
            out.append(segment if themed is None else Segment(segment.text, themed, segment.control))
        return out

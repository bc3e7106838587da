"""The colours on screen: the current theme's, and every character of text readable (WCAG AA,
4.5:1) on what it is drawn on, in every theme and under ``NO_COLOR``.

``ThemeColours`` is a line filter the app applies to every line painted: a palette colour
(``tui.format``) becomes its role in the current theme, then, like any other text (not borders,
scrollbars or spaces), is lightened or darkened until it is readable on its own background; under
``NO_COLOR`` it runs before Textual's grey filter and reaches the contrast between the greys.
docs/design/tui.md ("Colours") says how and why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import LineFilter, Monochrome

from tui import format as fmt

if TYPE_CHECKING:
    from collections.abc import Sequence

    from textual.app import App


def rgb(colour: Color) -> fmt.RGB:
    """A Textual colour as an (r, g, b) triple."""
    return (colour.r, colour.g, colour.b)


def hex_rgb(value: str) -> fmt.RGB:
    """``#rrggbb`` as an (r, g, b) triple."""
    return rgb(Color.parse(value))


def grey(colour: fmt.RGB) -> fmt.RGB:
    """The grey Textual draws ``colour`` as under ``NO_COLOR`` (``Color.monochrome``)."""
    return rgb(Color(*colour).monochrome)


CACHE_SIZE: Final = 4096
"""Styles remembered (with what they are drawn as) before the filter starts again."""
PALETTE: dict[fmt.RGB, str] = {hex_rgb(colour): role for colour, role in fmt.THEME_ROLES.items()}
"""The palette's colours (as triples) -> their theme roles."""
FIXED: Final = frozenset(hex_rgb(colour) for colour in fmt.CHART_COLOURS)
"""The charts' colours: readable, in no theme's role."""
NOT_TEXT: Final = frozenset(chr(c) for c in range(0x2500, 0x25A0)) | {" ", "\u00a0"}
"""Box-drawing and block characters, and spaces: borders and scrollbars, not text."""


def is_text(text: str) -> bool:
    """Whether a segment holds a character of text (not only borders, blocks or spaces)."""
    return not NOT_TEXT.issuperset(text)


def theme_colours(variables: dict[str, str]) -> dict[str, fmt.RGB]:
    """Each role's colour in a theme's variables (``muted``: the foreground 60% over the surface)."""
    out = {role: rgb(Color.parse(variables[role])) for role in fmt.THEME_ROLES.values() if role != "muted"}
    surface = Color.parse(variables["surface"])
    out["muted"] = rgb(surface.blend(Color.parse(variables["foreground"]), 0.6))
    return out


def triple(colour: RichColor) -> fmt.RGB:
    """A Rich colour as an (r, g, b) triple."""
    c = colour.get_truecolor()
    return (c.red, c.green, c.blue)


class ThemeColours(LineFilter):
    """Paint the palette in the current theme's colours, and every text readable on its background."""

    def __init__(self, app: App[Any]) -> None:
        super().__init__()
        self.app = app
        self._theme = ""
        self._roles: dict[str, fmt.RGB] = {}
        self._styles: dict[tuple[Style, Color], tuple[Style | None, Style | None]] = {}
        self.monochrome = False
        """The screen is turned grey after this filter (``NO_COLOR``): contrasts are the greys'."""

    def place(self, filters: Sequence[LineFilter]) -> list[LineFilter]:
        """Textual's filters with this one added: last, or just before the one turning colours grey
        (which would leave no palette colour to recognise)."""
        out = list(filters)
        at = next((n for n, f in enumerate(out) if isinstance(f, Monochrome)), None)
        self.monochrome = at is not None
        out.insert(len(out) if at is None else at, self)
        return out

    def _switch(self) -> None:
        """The theme changed: its colours, and nothing painted in the last one's."""
        self._theme = self.app.theme
        self._roles = theme_colours(self.app.theme_variables)
        self._styles.clear()

    def readable(self, fg: fmt.RGB, bg: fmt.RGB) -> fmt.RGB:
        """``fg``, or the least changed colour readable on ``bg`` as the terminal will show them."""
        if not self.monochrome:
            return fmt.readable(fg, bg)
        return fmt.readable(grey(fg), grey(bg))

    def colour(self, palette: fmt.RGB, background: fmt.RGB) -> fmt.RGB:
        """What a palette (or chart) colour is drawn as on ``background`` in the current theme."""
        if self.app.theme != self._theme:
            self._switch()
        role = palette if palette in FIXED else self._roles[PALETTE[palette]]
        return self.readable(role, background)

    def themed(self, style: Style, background: Color) -> tuple[Style | None, Style | None]:
        """``style`` recoloured for a segment of the palette (or ``None``: not one), and for a
        segment of text (``None``: readable as it is)."""
        if style.color is None or style.reverse:
            return None, None
        fg = triple(style.color)
        bg = triple(style.bgcolor) if style.bgcolor is not None else rgb(background)
        if fg in PALETTE or fg in FIXED:
            return style + Style(color=RichColor.from_rgb(*self.colour(fg, bg))), None
        readable = self.readable(fg, bg)
        if readable == (grey(fg) if self.monochrome else fg):
            return None, None
        return None, style + Style(color=RichColor.from_rgb(*readable))

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        """Recolour the palette's segments and the unreadable text (others pass through untouched)."""
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
                palette, text = cache[key]
            else:
                if len(cache) >= CACHE_SIZE:  # styles carrying per-cell meta are many: start again
                    cache.clear()
                palette, text = cache[key] = self.themed(style, background)
            if palette is not None:
                out.append(Segment(segment.text, palette, segment.control))
            elif text is not None and is_text(segment.text):
                out.append(Segment(segment.text, text, segment.control))
            else:
                out.append(segment)
        return out

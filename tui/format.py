"""Pure formatting helpers: status glyphs, sparklines, ages, token counts (no Textual here)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Final

from rich.text import Text

if TYPE_CHECKING:
    from ledger.monitor import SessionRow, SessionStatus

BLOCKS: Final = "▁▂▃▄▅▆▇█"

# The palette cells are written in. On screen each colour is the theme's colour of its role (THEME_ROLES),
# made readable on the background it is drawn on (``readable``): see tui/colours.py.
GREEN: Final = "#2fa84f"
BLUE: Final = "#3b82f6"
AMBER: Final = "#d98e04"
RED: Final = "#e0453a"
GREY: Final = "#8a8a8a"

STATUS: Final[dict[SessionStatus, tuple[str, str]]] = {
    "running": ("●", BLUE),
    "complete": ("✔", GREEN),
    "blocked": ("■", AMBER),
    "escalated": ("▲", RED),
}
"""status -> (symbol, colour): a status is told by its symbol and by its colour."""
STALLED: Final = ("◌", AMBER)
"""A running session that nothing drives (``SessionRow.stalled``): its symbol and colour."""
WAITING: Final = ("◷", AMBER)
"""A running session waiting out a usage limit (``SessionRow.waiting_at``): its symbol and colour."""
CHAIN_BROKEN: Final = ("✗", RED)
"""A session whose journal's hash chain is broken (``SessionRow.chain_break``): its symbol and colour."""

THEME_ROLES: Final[dict[str, str]] = {
    GREEN: "text-success",
    BLUE: "text-primary",
    AMBER: "text-warning",
    RED: "text-error",
    GREY: "muted",
}
"""Palette colour -> the theme variable it stands for (``muted``: the foreground faded into the surface)."""
SKY: Final = "#5b8def"
VIOLET: Final = "#b07cd8"
TEAL: Final = "#5f8f8f"
CHART_COLOURS: Final = (SKY, VIOLET, TEAL)
"""The charts' own colours (tokens in / out / cache, a file modified): no theme role, drawn as they
are where readable, made readable like the palette where not."""
MIN_CONTRAST: Final = 4.5
"""WCAG AA contrast for text: every palette colour is drawn at least this far from its background."""

RGB = tuple[int, int, int]


def luminance(rgb: RGB) -> float:
    """WCAG relative luminance of an sRGB colour."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: RGB, b: RGB) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def mix(a: RGB, b: RGB, t: float) -> RGB:
    """``a`` moved a fraction ``t`` of the way to ``b``."""
    return (round(a[0] + (b[0] - a[0]) * t), round(a[1] + (b[1] - a[1]) * t), round(a[2] + (b[2] - a[2]) * t))


def readable(fg: RGB, bg: RGB, ratio: float = MIN_CONTRAST) -> RGB:
    """``fg``, or the least lightened or darkened version of it that reaches ``ratio`` against
    ``bg``: lightened when ``fg`` is the lighter of the two and white can reach it (a green on a blue
    cursor row turns pale green, not near-black), darkened when it is the darker and black can,
    else towards whichever of white and black stands out more."""
    if contrast(fg, bg) >= ratio:
        return fg
    white, black = (255, 255, 255), (0, 0, 0)
    lighter = luminance(fg) >= luminance(bg)
    if lighter and contrast(white, bg) >= ratio:
        target = white
    elif not lighter and contrast(black, bg) >= ratio:
        target = black
    else:
        target = white if contrast(white, bg) >= contrast(black, bg) else black
    for step in range(1, 41):
        candidate = mix(fg, target, step / 40)
        if contrast(candidate, bg) >= ratio:
            return candidate
    return target


SIGNALS: Final[dict[str, str]] = {"CONTINUE": BLUE, "COMPLETE": GREEN, "BLOCKED": AMBER, "ESCALATE": RED}


def status_text(status: SessionStatus, *, word: bool = True) -> Text:
    """``● running`` in the status colour (symbol only when ``word`` is false)."""
    symbol, colour = STATUS[status]
    return Text(f"{symbol} {status}" if word else symbol, style=colour)


def row_status_text(row: SessionRow, now: datetime) -> Text:
    """A session's status as the screens show it: ``◌ stalled`` for a running session that nothing
    drives (its loop blocked or escalated and nothing has run since), ``◷ waiting`` for one waiting
    out a usage limit at ``now``, else ``status_text``."""
    if row.stalled:
        symbol, colour = STALLED
        return Text(f"{symbol} stalled", style=colour)
    if row.waiting_at(now) is not None:
        symbol, colour = WAITING
        return Text(f"{symbol} waiting", style=colour)
    return status_text(row.status)


def signal_text(signal: str) -> Text:
    """A loop signal in its colour."""
    return Text(signal, style=SIGNALS.get(signal, ""))


def score_colour(score: float | None) -> str:
    """Red below 50, amber below 100, green at 100."""
    if score is None:
        return GREY
    return GREEN if score >= 100 else AMBER if score >= 50 else RED


def score_text(score: float | None) -> Text:
    """A score as an integer in its colour, ``-`` when there is none."""
    if score is None:
        return Text("-", style=GREY, justify="right")
    return Text(f"{score:.0f}", style=score_colour(score), justify="right")


def block(score: float, low: float = 0.0, high: float = 100.0) -> str:
    """The block (▁ .. █) standing for ``score`` between ``low`` and ``high``."""
    span = high - low
    level = 0 if span <= 0 else round((min(max(score, low), high) - low) / span * (len(BLOCKS) - 1))
    return BLOCKS[level]


def sparkline(scores: Sequence[float], width: int = 10) -> str:
    """The last ``width`` scores (0..100) as unicode blocks, oldest first."""
    return "".join(block(s) for s in scores[-width:]) if width > 0 else ""


def sparkline_text(scores: Sequence[float], width: int = 10) -> Text:
    """A sparkline whose blocks are coloured by score."""
    text = Text()
    for s in scores[-width:] if width > 0 else []:
        text.append(block(s), style=score_colour(s))
    return text


def age(then: datetime | None, now: datetime) -> str:
    """``42s``, ``12m``, ``3h`` or ``5d`` since ``then``; ``-`` when unknown."""
    if then is None:
        return "-"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def tokens(n: int) -> str:
    """``950``, ``12.3k``, ``4.5M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def cost(usd: float | None) -> str:
    """US dollars in at most 7 cells: ``$0.012``, ``$12.34``, ``$12.3k``, ``<$0.001`` for a cost
    too small to show (never ``$0.000``, which reads as free); ``–`` when not known."""
    if usd is None:
        return "–"
    if 0 < usd < 0.0005:
        return "<$0.001"
    if usd < 10:
        return f"${usd:.3f}"
    if usd < 1000:
        return f"${usd:.2f}"
    return f"${usd / 1000:.1f}k"


def cost_text(usd: float | None) -> Text:
    """``cost(usd)`` right-aligned in a table cell, grey when not known."""
    return Text(cost(usd), justify="right", style="" if usd is not None else GREY)


def context_text(used: float | None) -> Text:
    """How full the context window was, ``45%``, right-aligned: amber from 80%, red from 90%; a grey
    ``–`` when not known."""
    if used is None:
        return Text("–", justify="right", style=GREY)
    return Text(f"{used:.0%}", justify="right", style=RED if used >= 0.9 else AMBER if used >= 0.8 else "")


def truncate(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` cells with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def truncate_left(text: str, width: int) -> str:
    """``text`` cut to its last ``width`` cells (a path keeps its file name)."""
    return text if len(text) <= width else "…" + text[len(text) - max(0, width - 1) :]


def cell_width(value: object) -> int:
    """How many cells a table value takes on one line."""
    if isinstance(value, Text):
        return value.cell_len
    width = getattr(value, "width", None)
    text = getattr(value, "session_id", None)
    if isinstance(width, int) and isinstance(text, str):
        return min(width, len(text))
    return len(str(value))


def column_widths(labels: Sequence[str], rows: Sequence[Sequence[object]], cap: int = 60) -> list[int]:
    """Each column's width: its widest cell or label, at most ``cap``.

    Tables get explicit widths so that a row drawn before the table has measured its new rows is
    never drawn, and cached, with the labels' widths."""
    widths = [len(label) for label in labels]
    for row in rows:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], cell_width(value))
    return [min(cap, w) for w in widths]


def percent(rate: float | None) -> str:
    """``25%``, or ``-`` before anything ended."""
    return "-" if rate is None else f"{100 * rate:.0f}%"

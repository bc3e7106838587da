"""Small plot widgets drawn with unicode blocks: scores per iteration, files x iterations, tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from rich.text import Text
from textual.dom import NoScreen
from textual.widget import Widget

from ledger import plural
from ledger.monitor import Checkpoint, Heat, IterationRow
from tui.format import AMBER, BLOCKS, GREY, RED, SKY, TEAL, VIOLET, cost, score_colour, tokens, truncate_left

EIGHTHS = " " + BLOCKS  # index 0..8: how many eighths of a cell are filled
PLOT_AXIS: Final = 4
"""Cells left of the score plot's bars: ``100┤``."""
HEAT_LEAST_NAME: Final = 10
"""The heat grid's file names give way down to this many cells before its iterations do."""


def tick_step(longest: int, cell: int) -> int:
    """Label every k-th iteration, k the first of 1, 2, 5, 10, 20, 50, ... that leaves room for a
    label ``longest`` cells long and a space, at ``cell`` cells per iteration."""
    step = 1
    while step * cell < longest + 1:
        step = step * 5 // 2 if str(step).startswith("2") else step * 2
    return step


def axis(numbers: Sequence[int], cell: int, room: int) -> str:
    """The iteration numbers under columns ``cell`` cells wide: every k-th one whole
    (``tick_step``), each starting under its column, none past ``room`` cells."""
    if not numbers:
        return ""
    step = tick_step(max(len(str(n)) for n in numbers), cell)
    line = [" "] * max(room, len(numbers) * cell)
    end = 0
    for i, n in enumerate(numbers):
        label, start = str(n), i * cell
        if n % step or start < end or start + len(label) > room:
            continue
        line[start : start + len(label)] = label
        end = start + len(label) + 1
    return "".join(line).rstrip()


class IterationChart(Widget):
    """A chart with a column or a line per iteration. The charts of a screen show the same window:
    the latest iterations that every one of them has room for (``window``)."""

    shown: list[int]
    """The iterations drawn last (for tests)."""

    def capacity(self) -> int | None:
        """How many iterations this chart can show at its size (``None``: it shows none, or has no size)."""
        raise NotImplementedError

    def window(self, *, without: IterationChart | None = None) -> int | None:
        """The iterations every chart on the screen (but ``without``) has room for (``None``: no limit)."""
        sizes = [c.capacity() for c in self.charts() if c is not without]
        known = [n for n in sizes if n is not None]
        return min(known) if known else None

    def charts(self) -> list[IterationChart]:
        """The charts of this one's screen (itself alone before it is on one)."""
        try:
            return list(self.screen.query(IterationChart))
        except NoScreen:
            return [self]

    def latest(self, count: int) -> int:
        """How many of ``count`` iterations to draw: the window's."""
        window = self.window()
        return count if window is None else max(1, min(count, window))

    def on_resize(self) -> None:
        """This chart's room changed, so may the window: every chart draws again."""
        for chart in self.charts():
            if chart is not self:
                chart.refresh(layout=isinstance(chart, TokenBars))


class ScorePlot(IterationChart):
    """Scores over iterations as vertical bars (0..100), one bar per iteration, newest right."""

    DEFAULT_CSS = "ScorePlot { height: 7; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.points: list[tuple[int, float | None]] = []
        self.shown = []

    def show(self, iterations: Sequence[IterationRow]) -> None:
        """Plot these iterations' scores."""
        self.points = [(i.iteration, i.score) for i in iterations]
        self.refresh()

    def capacity(self) -> int | None:
        """A bar per cell at the most."""
        if all(score is None for _, score in self.points) or not self.size.width:
            return None
        return max(1, self.size.width - PLOT_AXIS)

    def render(self) -> Text:
        """Rows of bars, a y axis (0, 50, 100) and the iteration numbers underneath."""
        height = max(1, self.size.height - 1)
        width = max(1, self.size.width - PLOT_AXIS)
        if all(score is None for _, score in self.points):
            return Text("no scores recorded", style=GREY)
        points = self.points[-self.latest(len(self.points)) :]
        bar = 3 if len(points) * 3 <= width else 2 if len(points) * 2 <= width else 1
        points = points[-(width // bar) :]
        self.shown = [n for n, _ in points]
        out = Text(no_wrap=True, overflow="crop")
        for row in range(height):  # row 0 is the top
            floor = (height - 1 - row) * 8  # eighths below this row
            label = {0: "100", (height - 1) // 2: " 50", height - 1: "  0"}.get(row, "")
            out.append(f"{label:>3}┤" if label else "   │", style=GREY)
            for _, score in points:
                eighths = 0 if score is None else round(max(0.0, min(100.0, score)) / 100 * height * 8)
                fill = min(8, max(0, eighths - floor))
                if row == height - 1 and score is not None and fill == 0:
                    fill = 1  # a score of 0 still shows a sliver
                cell = EIGHTHS[fill] * max(1, bar - 1) + (" " if bar > 1 else "")
                out.append(cell, style=score_colour(score))
            out.append("\n")
        out.append(" " * PLOT_AXIS)
        out.append(axis([n for n, _ in points], bar, width), style=GREY)
        return out


class HeatGrid(IterationChart):
    """Which files were modified in which iteration: a row per file, a column per iteration.

    A file modified in many iterations (the thrashing guard's evidence) is drawn amber, then red."""

    DEFAULT_CSS = "HeatGrid { height: auto; text-wrap: nowrap; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.heat = Heat(files=[], iterations=[], cells=[])
        self.shown = []

    def show(self, heat: Heat) -> None:
        """Draw this heat map."""
        self.heat = heat
        self.refresh(layout=True)

    def capacity(self) -> int | None:
        """A column per cell at the most, the file names cut to their least."""
        if not self.heat.files or not self.size.width:
            return None
        return max(1, self.size.width - HEAT_LEAST_NAME - 5)

    def render(self) -> Text:
        """The grid, files most often modified first, over the window's iterations (the counts are
        the whole session's)."""
        heat = self.heat
        if not heat.files:
            return Text("no files modified", style=GREY)
        width = self.size.width or 80
        shown_its = self.latest(len(heat.iterations))
        first = len(heat.iterations) - shown_its
        self.shown = heat.iterations[first:]
        # the iterations come first: file names give way (cut from the left) down to 10 cells, then
        # each iteration takes one cell instead of two
        name_width = min(22, max(len(f) for f in heat.files))
        cell = 2 if HEAT_LEAST_NAME + 5 + 2 * shown_its <= width else 1
        name_width = max(HEAT_LEAST_NAME, min(name_width, width - 5 - cell * shown_its))
        lines = max(1, self.size.height - 1) if self.size.height else len(heat.files)
        shown = len(heat.files) if len(heat.files) <= lines else max(0, lines - 1)
        out = Text(no_wrap=True, overflow="crop")
        out.append(" " * name_width + " ", style=GREY)
        out.append(axis(heat.iterations[first:], cell, width - name_width - 1), style=GREY)
        out.append("\n")
        for name, row in zip(heat.files[:shown], heat.cells[:shown], strict=True):
            count = sum(row)
            colour = RED if count >= 5 else AMBER if count >= 3 else SKY
            label = f"{truncate_left(name, name_width):<{name_width}} "
            out.append(label, style=colour if count >= 3 else "")
            for hit in row[first:]:
                mark = "█" if hit else "·"
                out.append(mark + " " * (cell - 1), style=colour if hit else GREY)
            out.append(f"{'' if cell > 1 else ' '}×{count}\n", style=colour if count >= 3 else GREY)
        if shown < len(heat.files):
            out.append(f"+ {plural(len(heat.files) - shown, 'more file', 'more files')}", style=GREY)
        out.rstrip()
        return out

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        """One line of iteration numbers plus one line per file."""
        return 1 + max(1, len(self.heat.files)) if self.heat.files else 1


TOKEN_PARTS: Final = (("in", SKY), ("out", VIOLET), ("cache", TEAL))
"""The parts of an iteration's tokens, as drawn (the ``turn_tokens`` view defines them)."""


class TokenBars(IterationChart):
    """Tokens per iteration as horizontal bars: input, output and cache stacked, labelled with their
    total (input + output + cache: the same number as the timeline, the title and the sessions table)
    and, when any iteration's is known, the iteration's cost (``turn_costs``; ``–`` not known)."""

    DEFAULT_CSS = "TokenBars { height: auto; text-wrap: nowrap; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[tuple[int, tuple[int, int, int], int]] = []
        self.costs: list[float | None] = []
        self.shown = []

    def show(self, iterations: Sequence[IterationRow]) -> None:
        """Draw these iterations' token counts."""
        self.rows = [
            (i.iteration, (i.tokens_input, i.tokens_output, i.tokens_cache), i.tokens_total)
            for i in iterations
        ]
        self.costs = [i.cost_usd for i in iterations]
        self.refresh(layout=True)

    @property
    def recorded(self) -> bool:
        """Whether any iteration used tokens (else the chart says there are none)."""
        return any(total for _, _, total in self.rows)

    def capacity(self) -> int | None:
        """A line per iteration under the legend."""
        if not self.recorded or not self.size.height:
            return None
        return max(1, self.size.height - 1)

    def legend(self, width: int, priced: bool) -> Text:
        """``█in █out █cache = tokens  $ cost``, shorter where that does not fit ``width``."""
        parts = Text(no_wrap=True, overflow="crop")
        for name, colour in TOKEN_PARTS:
            parts.append("█", style=colour)
            parts.append(f"{name} ", style=GREY)
        for tail in ("= tokens  $ cost" if priced else "= tokens", "= tokens", ""):
            if parts.cell_len + len(tail) <= width:
                return parts + Text(tail, style=GREY)
        return parts

    def render(self) -> Text:
        """A legend, then ``  3 ██████░░ 12.3k $0.012`` per iteration: the window's iterations."""
        if not self.recorded:
            return Text("no token usage recorded", style=GREY)
        rows = list(zip(self.rows, self.costs, strict=True))[-self.latest(len(self.rows)) :]
        self.shown = [n for (n, _, _), _ in rows]
        top = max(max(total, sum(parts)) for (_, parts, total), _ in rows)
        priced = any(c is not None for c in self.costs)
        label = max(3, len(str(rows[-1][0][0])))
        width = max(4, self.size.width - (label + 16 if priced else label + 8))
        out = Text(no_wrap=True, overflow="crop")
        out.append_text(self.legend(self.size.width or 80, priced))
        out.append("\n")
        for (n, parts, total), usd in rows:
            out.append(f"{n:>{label}} ", style=GREY)
            drawn, running = 0, 0
            for count, (_, colour) in zip(parts, TOKEN_PARTS, strict=True):
                running += count  # rounded as a running sum: the parts never add up past the width
                cells = (round(running / top * width) if top else 0) - drawn
                out.append("█" * cells, style=colour)
                drawn += cells
            out.append(" " * max(0, width - drawn))
            out.append(f" {tokens(total):>6}")
            out.append(f" {cost(usd):>7}" if priced else "", style="" if usd is not None else GREY)
            out.append("\n")
        out.rstrip()
        return out

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        """The legend and one line per iteration of the other charts' window (one line saying there
        are no tokens); a height of its own may leave room for fewer, and narrow the window."""
        if not self.recorded:
            return 1
        window = self.window(without=self)
        return 1 + (len(self.rows) if window is None else min(len(self.rows), window))


def checkpoints_text(checkpoints: Sequence[Checkpoint]) -> Text:
    """One line per checkpoint, the latest first: iteration, id, trigger, and whether it expired."""
    if not checkpoints:
        return Text("no checkpoints", style=GREY)
    out = Text(no_wrap=True, overflow="ellipsis")
    for c in reversed(checkpoints):  # the latest first (a short panel shows the latest)
        out.append(f"it {c.iteration:<3}", style=GREY)
        out.append(c.checkpoint_id, style="strike " + GREY if c.expired else "")
        out.append(f"  {c.trigger}", style=GREY)
        out.append("  expired\n" if c.expired else "\n", style=GREY)
    out.rstrip()
    return out

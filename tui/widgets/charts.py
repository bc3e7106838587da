"""Small plot widgets drawn with unicode blocks: scores per iteration, files x iterations, tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from rich.text import Text
from textual.widget import Widget

from ledger.monitor import Checkpoint, Heat, IterationRow
from tui.format import AMBER, BLOCKS, GREY, RED, cost, score_colour, tokens, truncate_left

EIGHTHS = " " + BLOCKS  # index 0..8: how many eighths of a cell are filled


class ScorePlot(Widget):
    """Scores over iterations as vertical bars (0..100), one bar per iteration, newest right."""

    DEFAULT_CSS = "ScorePlot { height: 7; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.points: list[tuple[int, float | None]] = []

    def show(self, iterations: Sequence[IterationRow]) -> None:
        """Plot these iterations' scores."""
        self.points = [(i.iteration, i.score) for i in iterations]
        self.refresh()

    def render(self) -> Text:
        """Rows of bars, a y axis (0, 50, 100) and the iteration numbers underneath."""
        height = max(1, self.size.height - 1)
        axis = 4
        width = max(1, self.size.width - axis)
        if all(score is None for _, score in self.points):
            return Text("no scores recorded", style=GREY)
        bar = 3 if len(self.points) * 3 <= width else 2 if len(self.points) * 2 <= width else 1
        points = self.points[-(width // bar) :]
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
        out.append("    ")
        for n, _ in points:
            label = str(n)[-(bar - 1) :] if bar > 1 else str(n)[-1]
            out.append(f"{label:<{bar}}", style=GREY)
        return out


class HeatGrid(Widget):
    """Which files were modified in which iteration: a row per file, a column per iteration.

    A file modified in many iterations (the thrashing guard's evidence) is drawn amber, then red."""

    DEFAULT_CSS = "HeatGrid { height: auto; text-wrap: nowrap; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.heat = Heat(files=[], iterations=[], cells=[])

    def show(self, heat: Heat) -> None:
        """Draw this heat map."""
        self.heat = heat
        self.refresh(layout=True)

    def render(self) -> Text:
        """The grid, files most often modified first."""
        heat = self.heat
        if not heat.files:
            return Text("no files modified", style=GREY)
        width = self.size.width or 80
        # the iterations come first: file names give way (cut from the left) down to 10 cells
        name_width = min(22, max(len(f) for f in heat.files))
        if name_width + 5 + 2 * len(heat.iterations) > width:
            name_width = max(10, min(name_width, width - 5 - 2 * len(heat.iterations)))
        room = max(1, (width - name_width - 5) // 2)
        first = max(0, len(heat.iterations) - room)
        lines = max(1, self.size.height - 1) if self.size.height else len(heat.files)
        shown = len(heat.files) if len(heat.files) <= lines else max(0, lines - 1)
        out = Text(no_wrap=True, overflow="crop")
        out.append(" " * name_width + " ", style=GREY)
        for n in heat.iterations[first:]:
            out.append(f"{str(n)[-1]} ", style=GREY)
        out.append("\n")
        for name, row in zip(heat.files[:shown], heat.cells[:shown], strict=True):
            count = sum(row)
            colour = RED if count >= 5 else AMBER if count >= 3 else "#5b8def"
            label = f"{truncate_left(name, name_width):<{name_width}} "
            out.append(label, style=colour if count >= 3 else "")
            for hit in row[first:]:
                out.append("█ " if hit else "· ", style=colour if hit else GREY)
            out.append(f"×{count}\n", style=colour if count >= 3 else GREY)
        if shown < len(heat.files):
            out.append(f"+ {len(heat.files) - shown} more file(s)", style=GREY)
        out.rstrip()
        return out

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        """One line of iteration numbers plus one line per file."""
        return 1 + max(1, len(self.heat.files)) if self.heat.files else 1


TOKEN_PARTS: Final = (("in", "#5b8def"), ("out", "#b07cd8"), ("cache", "#5f8f8f"))
"""The parts of an iteration's tokens, as drawn (the ``turn_tokens`` view defines them)."""


class TokenBars(Widget):
    """Tokens per iteration as horizontal bars: input, output and cache stacked, labelled with their
    total (input + output + cache: the same number as the timeline, the title and the sessions table)
    and, when any iteration's is known, the iteration's cost (``turn_costs``; ``–`` not known)."""

    DEFAULT_CSS = "TokenBars { height: auto; text-wrap: nowrap; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[tuple[int, tuple[int, int, int], int]] = []
        self.costs: list[float | None] = []

    def show(self, iterations: Sequence[IterationRow]) -> None:
        """Draw these iterations' token counts."""
        self.rows = [
            (i.iteration, (i.tokens_input, i.tokens_output, i.tokens_cache), i.tokens_total)
            for i in iterations
        ]
        self.costs = [i.cost_usd for i in iterations]
        self.refresh(layout=True)

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
        """A legend, then ``  3 ██████░░ 12.3k $0.012`` per iteration: the latest iterations that fit."""
        if not self.rows or not any(total for _, _, total in self.rows):
            return Text("no token usage recorded", style=GREY)
        fit = max(1, self.size.height - 1) if self.size.height else len(self.rows)
        rows = list(zip(self.rows, self.costs, strict=True))[-fit:]
        top = max(max(total, sum(parts)) for (_, parts, total), _ in rows)
        priced = any(c is not None for c in self.costs)
        label = max(3, len(str(rows[-1][0][0])))
        width = max(4, self.size.width - (label + 16 if priced else label + 8))
        out = Text(no_wrap=True, overflow="crop")
        out.append_text(self.legend(self.size.width or 80, priced))
        out.append("\n")
        for (n, parts, total), usd in rows:
            out.append(f"{n:>{label}} ", style=GREY)
            drawn = 0
            for count, (_, colour) in zip(parts, TOKEN_PARTS, strict=True):
                cells = round(count / top * width) if top else 0
                out.append("█" * cells, style=colour)
                drawn += cells
            out.append(" " * max(0, width - drawn))
            out.append(f" {tokens(total):>6}")
            out.append(f" {cost(usd):>7}" if priced else "", style="" if usd is not None else GREY)
            out.append("\n")
        out.rstrip()
        return out

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        """The legend and one line per iteration (one line saying there are no tokens)."""
        return 1 + len(self.rows) if any(total for _, _, total in self.rows) else 1


def checkpoints_text(checkpoints: Sequence[Checkpoint]) -> Text:
    """One line per checkpoint: id, iteration, trigger, and whether it expired."""
    if not checkpoints:
        return Text("no checkpoints", style=GREY)
    out = Text(no_wrap=True, overflow="ellipsis")
    for c in checkpoints:
        out.append(f"it {c.iteration:<3}", style=GREY)
        out.append(c.checkpoint_id, style="strike " + GREY if c.expired else "")
        out.append(f"  {c.trigger}", style=GREY)
        out.append("  expired\n" if c.expired else "\n", style=GREY)
    out.rstrip()
    return out

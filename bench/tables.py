"""What the bench scripts share: their Markdown tables and the name of the machine's CPU."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path


def markdown_table(rows: Sequence[Sequence[str]], right: Collection[int] = ()) -> str:
    """A Markdown table of ``rows`` (the first is the header), padded to line up in a terminal;
    the columns numbered in ``right`` are right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(values: Sequence[str]) -> str:
        cells = enumerate(zip(values, widths, strict=True))
        parts = [v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in cells]
        return "| " + " | ".join(parts) + " |"

    rules = [("-" * (w + 1) + ":") if i in right else "-" * (w + 2) for i, w in enumerate(widths)]
    sep = "|" + "|".join(rules) + "|"
    return "\n".join([line(rows[0]), sep, *(line(r) for r in rows[1:])])


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ("unknown CPU" elsewhere)."""
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                return text.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"

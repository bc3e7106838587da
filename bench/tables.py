"""What the bench scripts share: their Markdown tables, the name of the machine's CPU, and ``--smoke``."""

from __future__ import annotations

import argparse
import sys
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


def parse_with_smoke(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, smoke: Sequence[str]
) -> argparse.Namespace:
    """``parser``'s arguments, with ``--smoke`` added: the bench's smallest run, which still prints its
    whole table (``tests/architecture/test_bench.py`` runs every bench so). It stands for the arguments
    ``smoke``; options given beside it override them."""
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run: {' '.join(smoke)}")
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(given)
    return parser.parse_args([*smoke, *given]) if args.smoke else args

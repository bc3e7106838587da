"""Render query results as an aligned table, CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Final, Protocol

FORMATS: Final = ("table", "csv", "json")
MAX_CELL: Final = 60


class Result(Protocol):
    """A DB-API style result, such as a DuckDB cursor: ``description`` and ``fetchall()``."""

    @property
    def description(self) -> Any:
        """One tuple per column, its name first."""
        ...

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every remaining row."""
        ...


def _plain(value: Any) -> Any:
    """A JSON-friendly version of a DuckDB value."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def cell(value: Any) -> str:
    """Text of one table cell: NULL as '-', floats compact, long text cut."""
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, list | dict):
        text = json.dumps(_plain(value), separators=(",", ":"))
    elif isinstance(value, datetime):
        text = value.isoformat(sep=" ", timespec="seconds")
    else:
        text = str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned text table: a header, a dashed rule, one line per row, then the row count."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines) + "\n"


def render_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str) -> str:
    """``rows`` in ``fmt``: ``csv`` (header first; NULL empty, lists and dicts as JSON), ``json`` (an
    array of objects), or an aligned table for any other value.
    """
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow(
                [
                    "" if v is None else json.dumps(_plain(v)) if isinstance(v, list | dict) else _plain(v)
                    for v in row
                ]
            )
        return buf.getvalue()
    if fmt == "json":
        data = [dict(zip(columns, (_plain(v) for v in row), strict=True)) for row in rows]
        return json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    return table(columns, rows)


def render(result: Any, fmt: str) -> str:
    """Render a DuckDB cursor or a ``QueryResult``."""
    if hasattr(result, "columns") and hasattr(result, "rows"):
        return render_rows(result.columns, result.rows, fmt)
    columns = [d[0] for d in result.description or []]
    return render_rows(columns, result.fetchall(), fmt)

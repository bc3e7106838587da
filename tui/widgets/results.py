"""How the SQL console reads a result's values as text: a cell for the table, a value whole, a row as JSON."""

from __future__ import annotations

import json
from numbers import Number
from typing import TYPE_CHECKING, Any

from rich.text import Text

from ledger import output
from tui import format as fmt

if TYPE_CHECKING:
    pass


def cell(value: Any) -> Any:
    """A result value as a table cell, as the CLI's table shows it (NULL as a dim ∅, numbers right
    aligned; never parsed as markup)."""
    if value is None:
        return Text("∅", style=fmt.GREY)
    if isinstance(value, bool):
        return Text(str(value).lower())
    if isinstance(value, Number):
        return Text(output.cell(value), justify="right")
    return Text(output.cell(value))


def full_text(value: Any) -> str:
    """A value whole, as text: a string as it is, anything else as the CLI's JSON output gives it
    (indented); NULL as ``NULL``."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return value
    try:
        plain = json.loads(output.render_rows(["v"], [[value]], "json"))[0]["v"]
    except Exception:  # a type the JSON output cannot carry: its text
        return str(value)
    return plain if isinstance(plain, str) else json.dumps(plain, indent=2, ensure_ascii=False)


def row_text(columns: list[str], row: tuple[Any, ...]) -> str:
    """One result row as a JSON object (the CLI's ``--json`` for that row)."""
    try:
        data = json.loads(output.render_rows(columns, [row], "json"))[0]
    except Exception:
        data = {c: str(v) for c, v in zip(columns, row, strict=True)}
    return json.dumps(data, ensure_ascii=False)

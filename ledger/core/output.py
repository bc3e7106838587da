"""Query results as an aligned table, CSV or JSON, for every DuckDB type.

Values reach Python through ``fetch``, which casts the types Python cannot take as they are to
DuckDB's text in SQL, nested or not, and reads that text back (``restore``); then each value has one
text in every format (NULL, NaN and infinities, UTC timestamps, exact HUGEINT and DECIMAL, BLOB,
nested types as JSON). The text of each type: docs/cli.md (Output).
"""

from __future__ import annotations

import csv
import io
import json
import math
import struct
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final
from uuid import UUID

import duckdb
from duckdb.sqltypes import DuckDBPyType

from ledger.core.errors import printable

FORMATS: Final = ("table", "csv", "json")
MAX_CELL: Final = 60
NAN: Final = "NaN"
INFINITY: Final = "Infinity"

_TEXT: Final = duckdb.sqltype("VARCHAR")
_TIMESTAMPS: Final = frozenset(
    {"timestamp", "timestamp_s", "timestamp_ms", "timestamp_ns", "timestamp with time zone"}
)
_AS_TEXT: Final = _TIMESTAMPS | {"date", "interval"}


@dataclass(frozen=True, slots=True)
class Rows:
    """A result's column names, their DuckDB types (as text) and its rows, ready to render."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]


def _kids(t: DuckDBPyType) -> list[tuple[str, DuckDBPyType]]:
    """The child types of a nested type, by name (an ARRAY's size left out)."""
    return [(name, kid) for name, kid in t.children if isinstance(kid, DuckDBPyType)]


def _shown_type(t: DuckDBPyType) -> DuckDBPyType | None:
    """The type ``t`` is fetched as, or ``None`` when Python takes it as it is."""
    kind = t.id
    if kind in _AS_TEXT:
        return _TEXT  # a TIMESTAMPTZ in the connection's zone, UTC (see ``utc``)
    if kind not in ("list", "array", "map", "struct", "union"):
        return None
    kids = _kids(t)
    if kind == "union":
        kids = kids[1:]  # the first child is the tag
    shown = [(name, kid, _shown_type(kid)) for name, kid in kids]
    if all(s is None for _, _, s in shown):
        return None
    new = [s or kid for _, kid, s in shown]
    if kind == "list":
        return duckdb.list_type(new[0])
    if kind == "array":
        size = dict(t.children)["size"]
        return duckdb.array_type(new[0], size if isinstance(size, int) else 0)
    if kind == "map":
        return duckdb.map_type(new[0], new[1])
    members = {name: s or kid for name, kid, s in shown}
    return duckdb.struct_type(members) if kind == "struct" else duckdb.union_type(members)


def utc(con: duckdb.DuckDBPyConnection) -> None:
    """Make the connection's time zone UTC (a no-op when it is), so that ``TIMESTAMPTZ`` values are
    fetched as UTC instants."""
    row = con.execute("SELECT current_setting('TimeZone')").fetchone()
    if row is None or row[0] != "UTC":
        con.execute("SET TimeZone = 'UTC'")


def shown_select(rel: duckdb.DuckDBPyRelation) -> str | None:
    """A select list over ``rel``'s columns (by position) that casts what Python cannot fetch as
    it is, or ``None`` when every column can be fetched as it is."""
    items: list[str] = []
    changed = False
    for i, t in enumerate(rel.types, start=1):
        shown = _shown_type(t)
        name = '"' + rel.columns[i - 1].replace('"', '""') + '"'
        if shown is None:
            items.append(f"#{i} AS {name}")
        else:
            changed = True
            items.append(f"CAST(#{i} AS {shown}) AS {name}")
    return ", ".join(items) if changed else None


def wrap(sql: str, rel: duckdb.DuckDBPyRelation) -> str:
    """``sql`` (one SELECT) as a query whose values Python can fetch (see ``shown_select``)."""
    select = shown_select(rel)
    return sql if select is None else f"SELECT {select} FROM (\n{sql}\n)"


def fetch(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None) -> Rows:
    """Run one SELECT on ``con`` (time zone UTC) and fetch every row in a form ``render`` takes."""
    rel = con.sql(sql, params=params) if params is not None else con.sql(sql)
    cur = con.execute(wrap(sql, rel), params) if params is not None else con.execute(wrap(sql, rel))
    return Rows(list(rel.columns), [str(t) for t in rel.types], restore(cur.fetchall(), rel.types))


def restore(rows: list[tuple[Any, ...]], types: Sequence[DuckDBPyType]) -> list[tuple[Any, ...]]:
    """Rows fetched through ``wrap`` with their timestamps read back from DuckDB's text: an aware
    datetime, or the text itself when Python has none for it (``infinity``, a year before 1 or after
    9999); a ``REAL`` as the shortest float that is the same REAL (``0.1``, as DuckDB writes it, not
    ``0.10000000149011612``). ``types`` are the query's own column types."""
    columns = [(i, t) for i, t in enumerate(types) if _restores(t)]
    if not columns:
        return rows
    out = []
    for row in rows:
        values = list(row)
        for i, t in columns:
            values[i] = _restored(values[i], t)
        out.append(tuple(values))
    return out


_NESTED_KEYS: Final = frozenset({"list", "array", "struct", "map"})
"""MAP key types Python cannot hash: DuckDB gives such a MAP as ``{"key": [...], "value": [...]}``."""


def _restores(t: DuckDBPyType) -> bool:
    """Whether ``t`` is, or holds, what ``restore`` reads back: a timestamp, a ``REAL``, a MAP with
    nested keys."""
    kind = t.id
    if kind in _TIMESTAMPS or kind == "float":
        return True
    if kind == "map" and _kids(t)[0][1].id in _NESTED_KEYS:
        return True
    return kind in ("list", "array", "map", "struct") and any(_restores(kid) for _, kid in _kids(t))


def _restored(value: Any, t: DuckDBPyType) -> Any:
    """``value`` of type ``t`` with its timestamps (cast to text) read back as datetimes, its REALs
    as DuckDB writes them, a MAP with nested keys as a dict whose keys are their JSON text."""
    if value is None:
        return None
    kind = t.id
    if kind in _TIMESTAMPS:
        return _timestamp(value) if isinstance(value, str) else value
    if kind == "float":
        return _real(value) if isinstance(value, float) else value
    if kind not in ("list", "array", "map", "struct"):
        return value
    kids = _kids(t)
    if kind in ("list", "array") and isinstance(value, list | tuple):
        return [_restored(v, kids[0][1]) for v in value]
    if kind == "map" and isinstance(value, dict):
        key_type, value_type = kids[0][1], kids[1][1]
        if key_type.id in _NESTED_KEYS:
            pairs = zip(value.get("key") or [], value.get("value") or [], strict=False)
            return {to_json(plain(_restored(k, key_type))): _restored(v, value_type) for k, v in pairs}
        return {_restored(k, key_type): _restored(v, value_type) for k, v in value.items()}
    if kind == "struct" and isinstance(value, dict):
        types = dict(kids)
        return {k: _restored(v, types[k]) if k in types else v for k, v in value.items()}
    return value


def _timestamp(text: str) -> datetime | str:
    """DuckDB's text of a timestamp (``2024-01-01 10:00:00.5+00``, no zone: UTC) as an aware datetime,
    or the text when Python has no datetime for it."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return text
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _real(value: float) -> float:
    """A ``REAL`` (single precision, fetched as a double) as the shortest float that is the same REAL."""
    if not math.isfinite(value):
        return value
    for digits in range(1, 10):
        short = float(f"{value:.{digits}g}")
        try:
            if struct.unpack("f", struct.pack("f", short))[0] == value:
                return short
        except OverflowError:  # rounded past the largest REAL
            continue
    return value


_BLOB_ESCAPED: Final = frozenset(b"\"'\\")  # DuckDB writes these printable bytes as \xHH too


def blob_text(value: bytes) -> str:
    """Bytes as DuckDB writes a BLOB: printable ASCII as is except the quotes and the backslash,
    any other byte as ``\\xHH``."""
    return "".join(chr(b) if 32 <= b < 127 and b not in _BLOB_ESCAPED else f"\\x{b:02X}" for b in value)


def _float_text(value: float) -> str | None:
    """``NaN`` / ``Infinity`` / ``-Infinity`` for a float that is not finite, else ``None``."""
    if math.isnan(value):
        return NAN
    if math.isinf(value):
        return INFINITY if value > 0 else "-" + INFINITY
    return None


def _time_text(value: datetime | date) -> str:
    """A timestamp or date in ISO 8601; a timestamp with its zone (a naive one is UTC)."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return value.isoformat()


def plain(value: Any) -> Any:
    """A value as JSON holds it: None, bool, int, str, a finite float, a Decimal (written exactly),
    a list or a dict with string keys. Not finite floats become the strings of the module docstring."""
    if value is None or isinstance(value, bool | int | str | Decimal):
        return value
    if isinstance(value, float):
        return _float_text(value) or value
    if isinstance(value, datetime | date):
        return _time_text(value)
    if isinstance(value, time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return blob_text(bytes(value))
    if isinstance(value, dict):
        return {_key(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, UUID | timedelta):
        return str(value)
    return str(value)


def _key(key: Any) -> str:
    """A MAP key as a JSON object key: its text (a timestamp's ISO text, a number's digits), a nested
    key as its JSON text."""
    shown = plain(key)
    return shown if isinstance(shown, str) else to_json(shown)


def to_json(value: Any, indent: int | None = None) -> str:
    """``plain`` values as RFC 8259 JSON (UTF-8 text unescaped; a Decimal written digit for digit)."""
    return "".join(_json_chunks(value, indent, 0))


def _json_chunks(value: Any, indent: int | None, level: int) -> Iterator[str]:
    if isinstance(value, Decimal):
        yield _decimal_text(value)
    elif isinstance(value, float):
        special = _float_text(value)
        yield json.dumps(special) if special else repr(value)
    elif isinstance(value, dict | list):
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
        if not items:
            yield opening + closing
            return
        pad = "" if indent is None else "\n" + " " * (indent * (level + 1))
        yield opening
        for n, (k, v) in enumerate(items):
            yield ("," if n else "") + pad
            if isinstance(value, dict):
                yield json.dumps(str(k), ensure_ascii=False) + (":" if indent is None else ": ")
            yield from _json_chunks(v, indent, level + 1)
        yield ("" if indent is None else "\n" + " " * (indent * level)) + closing
    else:
        yield json.dumps(value, ensure_ascii=False)


def _decimal_text(value: Decimal) -> str:
    """A finite Decimal as a JSON number (``1.50``, ``1E+3`` -> ``1000``); NaN and infinities as
    the strings of the module docstring."""
    if value.is_nan():
        return json.dumps(NAN)
    if value.is_infinite():
        return json.dumps(INFINITY if value > 0 else "-" + INFINITY)
    text = format(value, "f")
    return text


def text(value: Any) -> str:
    """One value as text, the same in the table and in CSV (NULL aside; ``cell`` only keeps a table's
    cell on one line and short): nested values as compact JSON, floats in full (``repr``: ``100.0``,
    ``0.1``, as DuckDB and JSON write them), timestamps in ISO 8601 with their zone and their fraction
    when it is not zero (``2024-05-01T10:00:00.500000+00:00``), the rest as in JSON without quotes."""
    value = plain(value)
    if isinstance(value, dict | list):
        return to_json(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def cell(value: Any) -> str:
    """Text of one table cell: NULL as '-', else ``text`` (what CSV prints), on one line (line breaks
    as spaces, other unprintable characters escaped), long text cut."""
    if value is None:
        return "-"
    shown = printable(text(value).replace("\r\n", " ").replace("\n", " "))
    if width(shown) <= MAX_CELL:
        return shown
    kept, used = 0, 0  # cut to the columns a terminal gives it, wide characters too
    while used + _width(shown[kept]) <= MAX_CELL - 1:
        used += _width(shown[kept])
        kept += 1
    return shown[:kept] + "…"


def width(shown: str) -> int:
    """How many terminal columns ``shown`` takes: two for a wide character (CJK, most emoji), none for
    a combining mark or a zero-width one, one for the rest."""
    if shown.isascii():
        return len(shown)
    return sum(_width(c) for c in shown)


def _width(c: str) -> int:
    if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned text table: a header, a dashed rule, one line per row, then the row count; each
    column as wide as a terminal shows its widest cell (``width``)."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([width(c)] + [width(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v + " " * (w - width(v)) for v, w in zip(values, widths, strict=True)).rstrip()

    lines = [line(columns), "  ".join("-" * w for w in widths)]
    lines += [line(r) for r in cells]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines) + "\n"


def render_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str) -> str:
    """``rows`` in ``fmt``: ``csv`` (header first; NULL empty, nested values as JSON), ``json`` (an
    array of objects, valid RFC 8259), or an aligned table for any other value."""
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        w.writerows(["" if v is None else text(v) for v in row] for row in rows)
        return buf.getvalue()
    if fmt == "json":
        return to_json(_objects(columns, rows), indent=1) + "\n"
    return table(columns, rows)


def json_keys(columns: Sequence[str]) -> list[str]:
    """The columns' names as distinct JSON keys: a repeated name (``SELECT 1 AS a, 2 AS a``, a join's
    two ``session_id``) gets the first free ``_1``, ``_2``, ... suffix, as DuckDB names them in a
    subquery, so no column's values are lost."""
    keys: dict[str, None] = {}
    for name in columns:
        key, n = name, 0
        while key in keys:
            n += 1
            key = f"{name}_{n}"
        keys[key] = None
    return list(keys)


def _objects(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Rows as JSON objects (see ``json_keys``), their values ``plain``."""
    keys = json_keys(columns)
    return [dict(zip(keys, map(plain, row), strict=True)) for row in rows]


def render_many(parts: Sequence[tuple[str, str, Rows]], fmt: str) -> str:
    """Several results in one output: ``(name, title, rows)`` each. The table shows each under its
    title; CSV gives each its own header, the parts separated by an empty line; JSON is one object,
    ``name`` -> the array of rows."""
    if fmt == "json":
        data = {name: _objects(r.columns, r.rows) for name, _, r in parts}
        return to_json(data, indent=1) + "\n"
    if fmt == "csv":
        return "\n".join(render_rows(r.columns, r.rows, fmt) for _, _, r in parts)
    return "\n".join(f"{title}\n{render_rows(r.columns, r.rows, fmt)}" for _, title, r in parts)


def render(result: Any, fmt: str) -> str:
    """Render ``Rows``, a ``QueryResult`` (``columns`` and ``rows``) or a DB-API cursor."""
    if hasattr(result, "columns") and hasattr(result, "rows"):
        return render_rows(result.columns, result.rows, fmt)
    columns = [d[0] for d in result.description or []]
    return render_rows(columns, result.fetchall(), fmt)

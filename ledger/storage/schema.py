"""The ledger's ``events`` table, derived from the event vocabulary.

All events share one wide table: the envelope, a ``type`` column, and one
typed column per payload field name (NULL where an event has no such field).
Nested values become STRUCT / LIST columns, free-form dicts become JSON.
Deriving the table from ``ledger.events`` keeps one vocabulary.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from functools import cache
from typing import Final

import msgspec
import msgspec.inspect as mi

from ledger.events import EVENT_TYPES, Event

ENVELOPE: Final = ("session_id", "seq", "ts", "iteration")


class SchemaConflict(TypeError):
    """Two events use one field name with different types."""


def duckdb_type(t: mi.Type) -> str:
    """DuckDB column type for one msgspec type."""
    match t:
        case mi.StrType() | mi.LiteralType():
            return "VARCHAR"
        case mi.BoolType():
            return "BOOLEAN"
        case mi.IntType():
            return "BIGINT"
        case mi.FloatType():
            return "DOUBLE"
        case mi.DateTimeType():
            return "TIMESTAMP"
        case mi.ListType(item_type=item):
            return f"{duckdb_type(item)}[]"
        case mi.DictType(key_type=mi.StrType(), value_type=mi.StrType()):
            return "MAP(VARCHAR, VARCHAR)"
        case mi.DictType() | mi.AnyType():
            return "JSON"
        case mi.StructType(fields=fields):
            inner = ", ".join(f'"{f.encode_name}" {duckdb_type(f.type)}' for f in fields)
            return f"STRUCT({inner})"
        case mi.UnionType(types=types):
            concrete = [x for x in types if not isinstance(x, mi.NoneType)]
            if len(concrete) == 1:
                return duckdb_type(concrete[0])
    raise SchemaConflict(f"no DuckDB column type for {t!r}")


def _struct_fields(cls: type[Event]) -> tuple[mi.Field, ...]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return info.fields


def event_columns() -> dict[str, str]:
    """Column name -> DuckDB type for the ``events`` table, in a stable order."""
    columns: dict[str, str] = {
        "session_id": "VARCHAR",
        "seq": "BIGINT",
        "ts": "TIMESTAMP",
        "iteration": "BIGINT",
        "type": "VARCHAR",
    }
    owner: dict[str, str] = {}
    for cls in EVENT_TYPES:
        tag = str(cls.__struct_config__.tag)
        for f in _struct_fields(cls):
            if f.encode_name in ENVELOPE:
                continue
            col = duckdb_type(f.type)
            seen = columns.get(f.encode_name)
            if seen is not None and seen != col:
                raise SchemaConflict(
                    f"field {f.encode_name!r} is {seen} in {owner[f.encode_name]} but {col} in {tag}"
                )
            columns[f.encode_name] = col
            owner.setdefault(f.encode_name, tag)
    return columns


EVENT_COLUMNS: Final = event_columns()

SCHEMA_VERSION: Final = hashlib.sha256(repr(sorted(EVENT_COLUMNS.items())).encode()).hexdigest()[:16]


def create_events_sql(table: str = "events") -> str:
    """``CREATE TABLE IF NOT EXISTS`` for the events table (named ``table``), one column per field."""
    cols = ",\n  ".join(f'"{name}" {typ}' for name, typ in EVENT_COLUMNS.items())
    return f"CREATE TABLE IF NOT EXISTS {table} (\n  {cols}\n)"


@cache
def read_json_columns() -> str:
    """The ``columns={...}`` argument of ``read_json`` matching the table."""
    inner = ", ".join(f"'{name}': '{typ}'" for name, typ in EVENT_COLUMNS.items())
    return "{" + inner + "}"


def utc_naive(ts: datetime) -> datetime:
    """Timestamps are stored as naive UTC in the ledger."""
    return ts.replace(tzinfo=None) if ts.tzinfo is None else ts.astimezone(tz=None).replace(tzinfo=None)


def _literal(value: object, typ: str) -> str:
    """SQL literal for a field default, cast to its column type."""
    import msgspec

    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        return f"TIMESTAMP '{utc_naive(value).isoformat(sep=' ')}'"
    text = msgspec.json.encode(value).decode().replace("'", "''")
    return f"'{text}'::JSON" if typ == "JSON" else f"'{text}'::JSON::{typ}"


def _default_of(f: mi.Field) -> object:
    if f.default is not msgspec.NODEFAULT:
        return f.default
    if f.default_factory is not msgspec.NODEFAULT:
        return f.default_factory()
    return msgspec.NODEFAULT


def normalise_select(source: str) -> str:
    """SELECT list turning rows read by ``read_json`` into ``events`` rows.

    Fields missing from a line (written by an older vocabulary) get their
    vocabulary default, per event type, exactly as msgspec would decode them.
    """
    per_col: dict[str, list[str]] = {c: [] for c in EVENT_COLUMNS}
    for cls in EVENT_TYPES:
        tag = str(cls.__struct_config__.tag)
        for f in _struct_fields(cls):
            if f.encode_name in ENVELOPE:
                if _default_of(f) is msgspec.NODEFAULT:
                    continue
                per_col[f.encode_name][:1] = [
                    f"WHEN '' THEN coalesce(\"{f.encode_name}\", "
                    f"{_literal(_default_of(f), EVENT_COLUMNS[f.encode_name])})"
                ]
                continue
            default = _default_of(f)
            if default is msgspec.NODEFAULT or default is None:
                continue
            lit = _literal(default, EVENT_COLUMNS[f.encode_name])
            per_col[f.encode_name].append(f"WHEN '{tag}' THEN coalesce(\"{f.encode_name}\", {lit})")
    parts = []
    for col, whens in per_col.items():
        if not whens:
            parts.append(f'"{col}"')
        elif col in ENVELOPE:
            parts.append(whens[0].split(" THEN ")[1] + f' AS "{col}"')
        else:
            parts.append(f'CASE "type" {" ".join(whens)} ELSE "{col}" END AS "{col}"')
    return f"SELECT {', '.join(parts)} FROM {source}"


@cache
def invalid_rows_predicate() -> str:
    """WHERE clause matching rows msgspec would reject: unknown tag, missing
    required field, a value outside a Literal, a bad envelope. One CASE on the
    type, so that a row meets only its own type's checks (a chain of
    ``"type" = tag AND ...`` terms compared every row with every tag: 3x slower)."""
    whens = []
    for cls in EVENT_TYPES:
        checks = []
        for f in _struct_fields(cls):
            if f.encode_name in ENVELOPE:
                continue
            if _default_of(f) is msgspec.NODEFAULT:
                checks.append(f'"{f.encode_name}" IS NULL')
            if isinstance(f.type, mi.LiteralType):
                allowed = ", ".join(f"'{v}'" for v in f.type.values)
                checks.append(f'"{f.encode_name}" NOT IN ({allowed})')
        whens.append(f"WHEN '{cls.__struct_config__.tag!s}' THEN {' OR '.join(checks) or 'FALSE'}")
    return f'session_id IS NULL OR CASE "type" {" ".join(whens)} ELSE TRUE END'


@cache
def lacking_defaults_predicate() -> str:
    """WHERE clause matching rows that miss a field that has a default (``defaulted_columns``):
    written by an older vocabulary, they need ``normalise_select``."""
    whens = [
        f"WHEN '{tag}' THEN {' OR '.join(f'{chr(34)}{c}{chr(34)} IS NULL' for c in cols)}"
        for tag, cols in defaulted_columns().items()
        if cols
    ]
    return f'CASE "type" {" ".join(whens)} ELSE FALSE END' if whens else "FALSE"


@cache
def defaulted_columns() -> dict[str, list[str]]:
    """Per tag, the columns that have a default. A line written by an older
    vocabulary may lack them; such rows need ``normalise_select``."""
    out: dict[str, list[str]] = {}
    for cls in EVENT_TYPES:
        cols = [
            f.encode_name
            for f in _struct_fields(cls)
            if f.encode_name not in ("session_id", "seq") and _default_of(f) not in (msgspec.NODEFAULT, None)
        ]
        out[str(cls.__struct_config__.tag)] = cols
    return out

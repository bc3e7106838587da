"""The views and detectors in the SQL of other engines, transpiled by ``sqlglot`` from the one
DuckDB definition of each (``ledger/storage/sql``).

DuckDB gets the definitions as they are: views, and detectors as table macros. Spark and Trino
have no table macros, so a detector becomes a view with its ``-- params:`` defaults substituted
(``session := NULL`` keeps every session): ``SELECT * FROM failure_streak`` there is
``SELECT * FROM failure_streak()`` in DuckDB. Other thresholds are a copy of the view with other
literals. What ``sqlglot`` cannot translate is written once, in the definitions themselves, in
constructs that it can (``docs/fleet.md``, "Rewritten once in the definitions").
"""

from __future__ import annotations

from functools import cache
from typing import Final

import sqlglot
from sqlglot import exp

from ledger.storage.schema import EVENT_COLUMNS
from ledger.storage.sql import Definition, install_order

DIALECTS: Final = ("duckdb", "spark", "trino")
"""The engines ``schema --portable --dialect`` and ``export`` write SQL for."""

EVENTS_GLOB: Final = "events/*/*/*.parquet"
PRICES: Final = "_model_prices.parquet"
PRICES_DIR: Final = "model_prices"
"""The prices again, one ``source=NAME/part-0.parquet`` per home: Spark and Trino skip ``_*`` files."""
PRICE_COLUMNS: Final = (
    "model, above, input, output, cache_read, cache_write, context_window, provider, price_model, "
    "prices_from, note"
)
_RELATIVE: Final = """-- The path is relative to the directory {engine} runs in: run it from the dataset's
-- directory, or put the dataset's location instead (for example 's3://bucket/ralph/{path}')."""
_PRICES_DOC: Final = """-- The model prices the exporting homes computed costs with (turn_costs), one row
-- per model and price band (the first found where homes' prices differ)."""
_DUCKDB: Final = (
    f"""-- The events of every home exported to this dataset.
{_RELATIVE.format(engine="DuckDB", path=EVENTS_GLOB)}
CREATE OR REPLACE VIEW events AS
SELECT * FROM read_parquet('{EVENTS_GLOB}', hive_partitioning = true, union_by_name = true,
                           hive_types = {{'source': VARCHAR, 'day': DATE}});

-- A dataset holds the events, not the journals: whether a session's hash chain holds is known to
-- its home's ledger only (ralph-ledger verify there), so no session is listed here.
CREATE OR REPLACE VIEW chain_breaks AS
SELECT CAST(NULL AS VARCHAR) AS session_id, CAST(NULL AS VARCHAR) AS chain_break WHERE 1 = 0;
""",
    f"""{_PRICES_DOC} The path is relative,
-- as in 00-events.sql.
CREATE OR REPLACE VIEW model_prices AS
SELECT DISTINCT ON (model, above) *
FROM read_parquet('events/*/{PRICES}', hive_partitioning = false, union_by_name = true)
ORDER BY model, above;
""",
)
_SPARK: Final = (
    f"""-- The events of every home exported to this dataset, with the source= and day= partitions.
{_RELATIVE.format(engine="Spark", path="events")}
CREATE OR REPLACE TEMPORARY VIEW events
USING parquet
OPTIONS (path 'events', mergeSchema 'true');

-- A dataset holds the events, not the journals: whether a session's hash chain holds is known to
-- its home's ledger only (ralph-ledger verify there), so no session is listed here.
CREATE OR REPLACE TEMPORARY VIEW chain_breaks AS
SELECT CAST(NULL AS STRING) AS session_id, CAST(NULL AS STRING) AS chain_break WHERE 1 = 0;
""",
    f"""{_PRICES_DOC} The path is relative,
-- as in 00-events.sql.
CREATE OR REPLACE TEMPORARY VIEW model_prices_parquet
USING parquet
OPTIONS (path '{PRICES_DIR}');
CREATE OR REPLACE TEMPORARY VIEW model_prices AS
SELECT {PRICE_COLUMNS}
FROM (SELECT *, row_number() OVER (PARTITION BY model, above ORDER BY source) AS n
      FROM model_prices_parquet)
WHERE n = 1;
""",
)


def _trino_tables() -> tuple[str, str]:
    """Trino's Hive-connector tables over the dataset: events (partition columns last) and the
    homes' prices, then their views."""
    cols = ",\n  ".join(
        f"{name} {exp.DataType.build(typ, dialect='duckdb').sql('trino').replace('JSON', 'VARCHAR')}"
        for name, typ in EVENT_COLUMNS.items()
    )
    events = f"""-- The events of every home exported to this dataset, as a Hive-connector table: put the
-- dataset's location in external_location, then register its partitions (after each export too):
--   CALL hive.system.sync_partition_metadata(current_schema, 'events_parquet', 'FULL');
CREATE TABLE IF NOT EXISTS events_parquet (
  {cols},
  source VARCHAR,
  day DATE
)
WITH (external_location = 's3://bucket/ralph/events', format = 'PARQUET',
      partitioned_by = ARRAY['source', 'day']);
CREATE OR REPLACE VIEW events AS SELECT * FROM events_parquet;

-- A dataset holds the events, not the journals: whether a session's hash chain holds is known to
-- its home's ledger only (ralph-ledger verify there), so no session is listed here.
CREATE OR REPLACE VIEW chain_breaks AS
SELECT CAST(NULL AS VARCHAR) AS session_id, CAST(NULL AS VARCHAR) AS chain_break WHERE 1 = 0;
"""
    prices = f"""{_PRICES_DOC}
-- Put the dataset's {PRICES_DIR} folder in external_location, and sync its partitions as events'.
CREATE TABLE IF NOT EXISTS model_prices_parquet (
  model VARCHAR, above BIGINT, input DOUBLE, output DOUBLE, cache_read DOUBLE, cache_write DOUBLE,
  context_window BIGINT, provider VARCHAR, price_model VARCHAR, prices_from VARCHAR, note VARCHAR,
  source VARCHAR
)
WITH (external_location = 's3://bucket/ralph/{PRICES_DIR}', format = 'PARQUET',
      partitioned_by = ARRAY['source']);
CREATE OR REPLACE VIEW model_prices AS
SELECT {PRICE_COLUMNS}
FROM (SELECT *, row_number() OVER (PARTITION BY model, above ORDER BY source) AS n
      FROM model_prices_parquet)
WHERE n = 1;
"""
    return events, prices


def dataset_tables(dialect: str) -> tuple[str, str]:
    """The SQL of ``00-events.sql`` and ``00-model_prices.sql`` in ``dialect``: the dataset's
    ``events`` and ``model_prices`` for that engine (written by hand per engine: how an engine
    reads files is not SQL that transpiles)."""
    if dialect == "duckdb":
        return _DUCKDB
    if dialect == "spark":
        return _SPARK
    return _trino_tables()


def _defaults(d: Definition) -> dict[str, exp.Expr]:
    """A detector's parameters and their default values, as SQL expressions."""
    out: dict[str, exp.Expr] = {}
    for part in filter(None, (p.strip() for p in d.params.split(","))):
        name, _, value = part.partition(":=")
        out[name.strip()] = sqlglot.parse_one(value.strip(), read="duckdb")
    return out


def _macro_names() -> frozenset[str]:
    return frozenset(d.name for d in install_order() if d.kind == "detector")


def _portable(d: Definition) -> exp.Expr:
    """The definition's SELECT as a sqlglot tree, parameters at their defaults and macro calls
    (``failure_streak()``) read as the views they become."""
    tree = sqlglot.parse_one(d.sql, read="duckdb")
    params = _defaults(d)
    macros = _macro_names()

    def swap(node: exp.Expression) -> exp.Expr:
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
            index = node.expressions[0]
            if isinstance(index, exp.Column) and not index.table and index.name in params:
                # sqlglot holds a literal index 0-based and shifts it to each engine's base when
                # printing (a parameter is left as written): the 1-based default, held as a literal
                value = int(params[index.name].name) - 1
                return exp.Bracket(this=node.this, expressions=[exp.Literal.number(value)])
        if isinstance(node, exp.Column) and not node.table and node.name in params:
            return params[node.name].copy()
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous):
            name = node.this.name
            if name in macros and not node.this.expressions:
                return exp.Table(this=exp.to_identifier(name), alias=node.args.get("alias"))
        return node

    return tree.transform(swap)


@cache
def transpiled(name: str, dialect: str) -> str:
    """The SELECT of definition ``name`` in ``dialect`` (``duckdb``: the file's own text)."""
    d = next(x for x in install_order() if x.name == name)
    if dialect == "duckdb":
        return d.sql
    tree = _portable(d)
    for struct in tree.find_all(exp.Struct):
        # a struct of events' columns (iterations' guards, sorted by seq) has their types, so that
        # Trino gets a ROW with named fields (sqlglot names them only when the types are known)
        fields = [(f, f.expression) for f in struct.expressions if isinstance(f, exp.PropertyEQ)]
        if fields and all(isinstance(v, exp.Column) and v.name in EVENT_COLUMNS for _, v in fields):
            for field, value in fields:
                field.type = exp.DataType.build(EVENT_COLUMNS[value.name], dialect="duckdb")
            struct.type = exp.DataType.build("STRUCT", dialect="duckdb")
    return tree.sql(dialect=dialect, pretty=True)


def ddl(d: Definition, dialect: str) -> str:
    """The statement creating ``d`` in ``dialect``: a DuckDB view or table macro, a Spark temporary
    view (the dataset's ``events`` is one), a Trino view."""
    if dialect == "duckdb":
        return d.ddl(temp=False)
    scope = "TEMPORARY " if dialect == "spark" else ""
    return f"CREATE OR REPLACE {scope}VIEW {d.name} AS\n{transpiled(d.name, dialect)}"

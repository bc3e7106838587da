"""The views on Spark: PySpark in local mode (the engine a cluster runs) reads a dataset that three
homes exported, runs the shipped ``views/spark/*.sql`` as they are, and every view and detector
returns the rows one DuckDB ledger over the same journals does.

Rows are compared as sorted sets of normalised values: floats to 9 significant digits (Spark and
DuckDB sum doubles in other orders), timestamps as naive UTC, structs and maps as sorted
(key, value) pairs, lists as tuples, decimals and integers as Python ints.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ledger.core.home import Home
from ledger.storage.database import Ledger
from ledger.storage.sql import definitions
from tests.unit.test_fleet import export, fleet_homes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """One local Spark for the module (a JVM start is ~10 s), in UTC, tuned for tiny data. PySpark (the
    ``spark`` extra) is imported here, so that a run without it still collects this module."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("ralph-ledger-views")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "1")
        # a few hundred rows: compiling each plan to Java (whole-stage codegen) and re-planning it
        # adaptively cost more than running it; the results are the same either way
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def norm(value: Any) -> Any:
    """A value as both engines' rows are compared (see the module's docstring)."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        value = value.asDict()
    if isinstance(value, dict):
        return tuple(sorted((str(k), norm(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(norm(v) for v in value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, Decimal):
        value = int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return float(f"{value:.9g}") if math.isfinite(value) else value
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def rowset(names: list[str], rows: list[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and the normalised rows, sorted."""
    return names, sorted((tuple(norm(v) for v in r) for r in rows), key=repr)


def statements(text: str) -> list[str]:
    """A file's statements: each ends with ``;`` at the end of a line that is not a comment."""
    out, lines = [], []
    for line in text.splitlines():
        lines.append(line)
        if line.rstrip().endswith(";") and not line.lstrip().startswith("--"):
            out.append("\n".join(lines).rstrip().rstrip(";"))
            lines = []
    return out


def targets() -> Iterator[tuple[str, str]]:
    """(name, DuckDB query) of every view and detector (a detector at its defaults)."""
    for d in definitions():
        yield d.name, f"SELECT * FROM {d.name}" + ("()" if d.kind == "detector" else "")


@pytest.fixture
def homes(fixture_home: Home, tmp_path: Path, engine: Any, work: Path) -> dict[str, Home]:
    """The fleet's homes (``tests.unit.test_fleet.fleet_homes``)."""
    return fleet_homes(fixture_home, tmp_path, engine, work)


def test_every_view_and_detector_on_spark_returns_the_ledgers_rows(
    spark: SparkSession, homes: dict[str, Home], tmp_path: Path
) -> None:
    dest = tmp_path / "fleet"
    for source, home in homes.items():
        assert export(home, dest, "--source", source) == 0
    whole = Ledger.memory()
    whole.ingest([j for home in homes.values() for j in home.journal_files()])

    for path in sorted((dest / "views" / "spark").glob("*.sql")):
        # the only edit: the dataset's location for the relative paths (Spark's directory is its own)
        text = path.read_text(encoding="utf-8")
        for folder in ("events", "model_prices"):
            text = text.replace(f"(path '{folder}'", f"(path '{dest / folder}'")
        for statement in statements(text):
            spark.sql(statement)
    per_source = {r[0]: r[1] for r in spark.sql("SELECT source, count(*) FROM events GROUP BY 1").collect()}
    assert sum(per_source.values()) == whole.con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
    assert sorted(per_source) == sorted(homes)

    failures: dict[str, str] = {}
    counts: dict[str, int] = {}
    for name, sql in targets():
        cur = whole.con.execute(sql)
        local = rowset([d[0] for d in cur.description or []], cur.fetchall())
        try:
            frame = spark.sql(f"SELECT * FROM {name}")
            remote = rowset(frame.columns, frame.collect())
        except Exception as exc:  # every view's failure is reported at once
            failures[name] = str(exc).splitlines()[0]
            continue
        if remote != local:
            diff = (
                [r for r in remote[1] if r not in local[1]][:2],
                [r for r in local[1] if r not in remote[1]][:2],
            )
            failures[name] = f"columns {remote[0]} vs {local[0]}; spark only / duckdb only: {diff}"
        counts[name] = len(local[1])
    assert failures == {}
    # every view and detector had rows to compare: none agrees by being empty on both sides
    assert [name for name, n in counts.items() if n == 0] == [], counts
    assert sum(counts.values()) > 200

"""The views for other engines, as a user gets them: ``schema --portable --dialect`` prints them and
``export`` writes the same files into the dataset, one folder per engine."""

from __future__ import annotations

from tests.journeys.conftest import Project


def test_schema_prints_each_engines_sql_as_export_writes_it(project: Project) -> None:
    dest = project.dir / "fleet"
    proc = project.cli("export", "--parquet", str(dest), "--source", "dev")
    assert proc.returncode == 0, proc.stderr
    for dialect, view in (
        ("duckdb", "CREATE OR REPLACE MACRO thrashing("),
        ("spark", "CREATE OR REPLACE TEMPORARY VIEW thrashing AS"),
        ("trino", "CREATE OR REPLACE VIEW thrashing AS"),
    ):
        proc = project.cli("schema", "--portable", "--dialect", dialect)
        assert proc.returncode == 0, proc.stderr
        files = sorted((dest / "views" / dialect).glob("*.sql"))
        assert proc.stdout == "\n".join(p.read_text(encoding="utf-8") for p in files), dialect
        assert view in proc.stdout, dialect
    # DuckDB's files stay where earlier releases wrote them, for scripts that read views/*.sql
    assert [p.read_text() for p in sorted((dest / "views").glob("*.sql"))] == [
        p.read_text() for p in sorted((dest / "views" / "duckdb").glob("*.sql"))
    ]


def test_an_unknown_dialect_is_a_usage_error_naming_the_choices(project: Project) -> None:
    proc = project.cli("schema", "--dialect", "oracle")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'oracle'" in lines[0] and "'spark'" in lines[0], proc.stderr
    assert proc.stdout == ""

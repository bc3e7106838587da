"""The Spark and Trino SQL generated from the definitions, snapshot-tested: a change to a view, a
detector or the transpiler shows up as a reviewed diff (``--snapshot-update`` accepts it)."""

from __future__ import annotations

import pytest
from syrupy.assertion import SnapshotAssertion

from ledger.storage.export import views_bundle


@pytest.mark.parametrize("dialect", ["spark", "trino"])
def test_generated_sql_matches_its_snapshot(dialect: str, snapshot: SnapshotAssertion) -> None:
    bundle = dict(views_bundle(dialect))
    assert bundle == snapshot

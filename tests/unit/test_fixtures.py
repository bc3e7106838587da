"""The committed sample home is exactly what tests/fixtures/scenarios.py writes."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.scenarios import HAND_TYPED, HOME, write_home


def test_generated_journals_are_up_to_date(tmp_path: Path) -> None:
    write_home(tmp_path)
    generated = {p.name: p.read_bytes() for p in (tmp_path / "journals").glob("*.jsonl")}
    committed = {
        p.name: p.read_bytes() for p in (HOME / "journals").glob("*.jsonl") if p.name not in HAND_TYPED
    }
    assert generated == committed

"""The real Claude Code transcripts the tests read (``tests/fixtures/claude-code/``, whose README says
where they come from), as pytest parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "claude-code"
FIXTURE_FILES = sorted(FIXTURES.glob("*.jsonl"))
FIXTURE_PARAMS = [pytest.param(p, id=p.stem) for p in FIXTURE_FILES]

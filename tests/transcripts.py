"""The real Claude Code transcripts the tests read (``shared/fixtures/claude-code`` beside this checkout
or a folder above it: not in this repository, docs/development.md#fixtures-outside-the-repository), as
pytest parameters; skipped where they are not."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = next(
    (d / "shared/fixtures/claude-code" for d in Path(__file__).resolve().parents if (d / "shared").is_dir()),
    Path("/work/shared/fixtures/claude-code"),
)
FIXTURE_FILES = sorted(FIXTURES.glob("*.jsonl")) if FIXTURES.is_dir() else []
FIXTURE_PARAMS = [pytest.param(p, id=p.stem) for p in FIXTURE_FILES] or [
    pytest.param(None, marks=pytest.mark.skip(reason=f"no transcripts in {FIXTURES}"))
]

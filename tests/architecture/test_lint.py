"""ruff and mypy --strict stay clean (they are part of the test command)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_ruff_clean() -> None:
    proc = subprocess.run(
        [
            str(BIN / "ruff"),
            "check",
            *[d for d in ("ledger", "tui", "tests", "bench", "sample_sessions") if (ROOT / d).is_dir()],
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_clean() -> None:
    """Every Python file, and the Python blocks of the Markdown files, as ``ruff format`` writes them."""
    proc = subprocess.run(
        [str(BIN / "ruff"), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr

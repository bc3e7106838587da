"""The developer's loop (``Makefile``): each target names the command it runs, and ``make fast``
leaves out exactly the journeys, the real clients and the slow files, while ``.ci/run`` runs all."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SLOW_FILES

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("venv", "lint", "fast", "journeys", "clients", "long", "test", "bench", "bench-quick")


def collected(*args: str) -> list[str]:
    """The node ids pytest collects with ``args``."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # a parameter's id may hold a function's repr, whose address differs between processes
    return [re.sub(r" at 0x[0-9a-f]+", "", line) for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_every_target_names_its_command() -> None:
    said = {
        t: subprocess.run(["make", "-n", t], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        for t in TARGETS
    }
    assert "pytest -m" in said["fast"] and "not journey and not clients and not slow" in said["fast"]
    assert said["test"].strip() == ".venv/bin/python -m pytest"  # what .ci/run runs
    assert "--long" in said["long"] and "tests/journeys" in said["journeys"]
    assert "ruff check" in said["lint"] and "mypy" in said["lint"]


def test_the_fast_run_leaves_out_journeys_clients_and_slow_files_only() -> None:
    everything = collected()
    fast = collected("-m", "not journey and not clients and not slow")
    left_out = set(everything) - set(fast)
    assert fast and all(not re.match(r"tests/(journeys|clients)/", t) for t in fast)
    assert all(Path(t.split("::")[0]).name not in SLOW_FILES for t in fast)
    assert left_out == {
        t
        for t in everything
        if re.match(r"tests/(journeys|clients)/", t) or Path(t.split("::")[0]).name in SLOW_FILES
    }


def test_ci_runs_everything() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m pytest\n" in ci and " -m " not in ci.split("pytest", 1)[1].split("\n")[0]

"""Journeys: the installed console scripts run as a user (or Claude Code) runs them, in a fresh git
project and a fresh home, with real files, stdin JSON, signals and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent
"""The folder holding the installed console scripts (the venv's ``bin``)."""

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def script(name: str) -> str:
    """The installed console script ``name`` (``ralph-ledger``, ``ralph-tui``), which must exist."""
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{path} is not installed: run `pip install -e .` in this venv")
    return str(path)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell has: no RALPH_HOME, no CLAUDE_* variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "RALPH_HOME" and not k.startswith("CLAUDE")}
    env.update(extra)
    return env


class Project:
    """A fresh git project (one commit) whose ledger home is its own ``.ralph``."""

    def __init__(self, root: Path) -> None:
        self.dir = root
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "README.md").write_text("# demo\n")
        subprocess.run(["git", "init", "-q"], cwd=self.dir, check=True)
        subprocess.run([*GIT, "add", "-A"], cwd=self.dir, check=True)
        subprocess.run([*GIT, "commit", "-qm", "init"], cwd=self.dir, check=True)
        self.home = self.dir / ".ralph"

    def cli(
        self,
        *args: str,
        input: str | None = None,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """``ralph-ledger ARGS`` run in the project (or ``cwd``), as a user types it."""
        return subprocess.run(
            [script("ralph-ledger"), *args],
            cwd=cwd or self.dir,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(env) if env is not None else clean_env(),
        )

    def write(self, name: str, text: str) -> Path:
        """Write ``text`` to ``name`` in the project (folders made as needed)."""
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def journal(self, session: str) -> list[dict[str, Any]]:
        """The events of ``session``'s journal in this project's home, as JSON objects."""
        path = self.home / "journals" / f"{session}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def sessions(self) -> list[dict[str, Any]]:
        """``ralph-ledger sessions --json`` in the project."""
        proc = self.cli("sessions", "--json")
        assert proc.returncode == 0, proc.stderr
        rows: list[dict[str, Any]] = json.loads(proc.stdout)
        return rows


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A fresh git project in a temporary folder."""
    return Project(tmp_path / "project")

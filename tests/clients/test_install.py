"""``clients/install.py``: each pinned version set is installed once, into its own folder, and a failed
install leaves nothing behind (npm itself replaced by a stand-in that logs its calls)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.clients.conftest import ROOT

FAKE_NPM = """#!/bin/sh
echo "npm $*" >> "$NPM_LOG"
[ -n "$NPM_FAIL" ] && { echo "npm ERR! network" >&2; exit 7; }
mkdir -p node_modules/.bin && touch node_modules/.bin/claude
"""


def installer(tmp_path: Path, pins: str | None = None) -> Path:
    """A copy of ``clients/`` (with other pins when given) in ``tmp_path``."""
    folder = tmp_path / "clients"
    shutil.copytree(ROOT / "clients", folder)
    if pins is not None:
        (folder / "package.json").write_text(pins)
    return folder / "install.py"


def run(script: Path, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "npm").write_text(FAKE_NPM)
    (fake / "npm").chmod(0o755)
    environ = {
        **os.environ,
        "PATH": f"{fake}:/usr/bin:/bin",
        "RALPH_CLIENTS_CACHE": str(tmp_path / "cache"),
        "NPM_LOG": str(tmp_path / "npm.log"),
        **env,
    }
    return subprocess.run(
        [sys.executable, str(script), *args], env=environ, capture_output=True, text=True, timeout=60
    )


def test_a_version_set_is_installed_once_and_a_bump_installs_another(tmp_path: Path) -> None:
    script = installer(tmp_path)
    assert run(script, tmp_path, "--check").returncode == 1
    first = run(script, tmp_path)
    assert first.returncode == 0, first.stderr
    bin_dir = Path(first.stdout.strip())
    assert (bin_dir / "claude").exists() and bin_dir.parent.parent.parent == tmp_path / "cache"
    again = run(script, tmp_path)
    assert again.stdout == first.stdout
    assert (tmp_path / "npm.log").read_text().count("npm install") == 1  # nothing installed again
    assert run(script, tmp_path, "--check").stdout == first.stdout
    bumped = (script.parent / "package.json").read_text().replace('"2.1.328"', '"2.1.329"')
    (script.parent / "package.json").write_text(bumped)
    other = run(script, tmp_path)
    assert other.returncode == 0 and other.stdout != first.stdout
    assert (tmp_path / "npm.log").read_text().count("npm install") == 2


def test_a_failed_install_says_so_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    script = installer(tmp_path)
    failed = run(script, tmp_path, NPM_FAIL="1")
    assert failed.returncode != 0
    assert failed.stderr.strip().splitlines()[-1] == "clients/install.py: npm install failed with exit 7"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".lock"]
    assert run(script, tmp_path, "--check").returncode == 1


def test_the_pins_are_exact_versions() -> None:
    """A range would make the set's name say nothing about what was tested."""
    import json

    pins = json.loads((ROOT / "clients" / "package.json").read_text())["dependencies"]
    assert set(pins) == {
        "@anthropic-ai/claude-code",
        "@openai/codex",
        "@google/gemini-cli",
        "opencode-ai",
        "@github/copilot",
    }
    assert all(v.replace(".", "").isdigit() for v in pins.values()), pins

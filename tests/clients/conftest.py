"""The contract suite's fixtures: the pinned clients (installed once per version set by
``clients/install.py``), a throwaway home for each run, and a fresh git project."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def installed_bin() -> Path:
    """The folder of the pinned clients' commands, installed by ``clients/install.py`` if this
    version set is not yet (the one way the suite and the capture scripts get the clients)."""
    spec = importlib.util.spec_from_file_location("clients_install", ROOT / "clients" / "install.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.install())


@pytest.fixture(scope="session")
def client_bin() -> Path:
    """The folder of the pinned clients' commands."""
    return installed_bin()


def client_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A client's environment: a throwaway ``HOME``, the venv's scripts and node on ``PATH``, no
    variable of the user's agents or of ralph-ledger, plus ``extra``."""
    home.mkdir(parents=True, exist_ok=True)
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT", "RALPH_WARM")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env["XDG_DATA_HOME"] = str(home / ".local" / "share")
    env["XDG_CACHE_HOME"] = str(home / ".cache")
    env["XDG_STATE_HOME"] = str(home / ".local" / "state")
    env.update(extra or {})
    return env

"""Install the pinned agent CLIs (``clients/package.json``) from npm, once per version set.

Each version set (the hash of ``package.json``) gets its own folder under the cache,
``$RALPH_CLIENTS_CACHE`` or ``$XDG_CACHE_HOME/ralph-ledger/clients`` or ``~/.cache/ralph-ledger/clients``;
a second run finds it and installs nothing. Each package carries its native binary, so nothing is fetched
after the install. Prints the folder of the installed commands (``node_modules/.bin``).

    python3 clients/install.py            # install if needed, print the bin folder
    python3 clients/install.py --check    # exit 1 (one line) when the set is not installed yet

To bump a client, change its line in ``clients/package.json``; the next run installs the new set.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

PINS = Path(__file__).resolve().with_name("package.json")


def cache_root() -> Path:
    """Where version sets are installed."""
    if env := os.environ.get("RALPH_CLIENTS_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ralph-ledger" / "clients"


def version_set() -> str:
    """The name of the pinned set: a hash of ``package.json``."""
    return hashlib.sha256(PINS.read_bytes()).hexdigest()[:16]


def bin_dir() -> Path:
    """The bin folder of the pinned set (installed or not)."""
    return cache_root() / version_set() / "node_modules" / ".bin"


def installed() -> bool:
    return (cache_root() / version_set() / ".complete").is_file()


def install() -> Path:
    """Install the pinned set unless it is there; return its bin folder."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if root.stat().st_uid != os.getuid():
        raise SystemExit(f"clients/install.py: {root} is not owned by this user; set RALPH_CLIENTS_CACHE")
    target = root / version_set()
    with open(root / ".lock", "a") as lock:  # one installer at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed():
            return bin_dir()
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("clients/install.py: npm was not found on PATH (node 20 and npm are needed)")
        staging = root / f".{version_set()}.{os.getpid()}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)
        staging.mkdir()
        shutil.copy2(PINS, staging / "package.json")
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--no-save"],
            cwd=staging,
            stdout=sys.stderr,
            check=False,
        )
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise SystemExit(f"clients/install.py: npm install failed with exit {done.returncode}")
        staging.rename(target)
        (target / ".complete").write_text(PINS.read_text())
    return bin_dir()


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        if installed():
            print(bin_dir())
            return 0
        print(f"clients/install.py: the pinned clients are not installed in {cache_root()}", file=sys.stderr)
        return 1
    if argv[1:]:
        print("usage: python3 clients/install.py [--check]", file=sys.stderr)
        return 2
    print(install())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

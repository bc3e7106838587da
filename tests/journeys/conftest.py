"""Journeys: the installed console scripts run as a user (or Claude Code) runs them, in a fresh git
project and a fresh home, with real files, stdin JSON, signals and exit codes."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
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


def spawn(
    argv: Sequence[str], cwd: Path, stdin: str, env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``argv`` in ``cwd`` with ``env`` (the user's environment, ``clean_env``, by default),
    ``stdin`` written and closed, stdout and stderr piped: ``communicate()`` then only reads."""
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else clean_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    proc.stdin = None
    return proc


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


class Terminal:
    """A program in a real terminal: a pane of a private tmux server (``cols`` x ``rows``), its screen
    read as the user sees it, keys typed into it, its exit code."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        size: tuple[int, int] = (100, 30),
    ) -> None:
        if shutil.which("tmux") is None:
            pytest.fail("tmux is not installed: these journeys need it for a real terminal")
        self.socket = f"ralph-{uuid.uuid4().hex[:12]}"
        self._dir = Path(tempfile.mkdtemp(prefix="ralph-term-"))
        self.rc_file = self._dir / "exit-code"
        command = " ".join(shlex.quote(a) for a in argv)
        shell = f"{command}; echo $? > {shlex.quote(str(self.rc_file))}; sleep 600"
        self.env = {**(env if env is not None else clean_env()), "TERM": "xterm-256color"}
        cols, rows = size
        self.tmux("new-session", "-d", "-s", "main", "-x", str(cols), "-y", str(rows), "-c", str(cwd), shell)

    def tmux(self, *args: str) -> str:
        """Run a tmux command against this terminal's server; its output."""
        proc = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=30,
        )
        return proc.stdout

    def screen(self) -> str:
        """The text on the screen now."""
        return self.tmux("capture-pane", "-p", "-t", "main")

    def wait_for(self, done: str | Callable[[str], object], timeout: float = 30.0) -> str:
        """Poll the screen until it shows ``done`` (a text, or a test of the screen); the screen then."""
        test = (lambda s: done in s) if isinstance(done, str) else done
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if test(text):
                return text
            if time.monotonic() > deadline:
                pytest.fail(f"the screen never showed what was expected; it shows:\n{text}")
            time.sleep(0.05)

    def press(self, *keys: str) -> None:
        """Press keys, one after another (tmux names: ``C-c``, ``Enter``, ``Escape``, or text)."""
        for key in keys:
            self.tmux("send-keys", "-t", "main", key)

    def resize(self, cols: int, rows: int) -> None:
        """Give the terminal a new size (the program gets SIGWINCH)."""
        self.tmux("resize-window", "-t", "main", "-x", str(cols), "-y", str(rows))

    def exit_code(self, timeout: float = 20.0) -> int:
        """Wait for the program to end; its exit code."""
        deadline = time.monotonic() + timeout
        while not self.rc_file.exists() or not self.rc_file.read_text().strip():
            if time.monotonic() > deadline:
                pytest.fail(f"the program did not end; the screen shows:\n{self.screen()}")
            time.sleep(0.05)
        return int(self.rc_file.read_text())

    def close(self) -> None:
        """End the tmux server (and anything still running in it) and remove what it left."""
        self.tmux("kill-server")
        folder = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (folder / self.socket).unlink(missing_ok=True)
        shutil.rmtree(self._dir, ignore_errors=True)


def folded(screen: str) -> str:
    """The screen's text without its white space: a path or a name that the screen wrapped over two
    lines (a long temporary folder) reads whole."""
    return "".join(screen.split())


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    """Terminals a test opens (append them); all closed when it ends."""
    opened: list[Terminal] = []
    yield opened
    for t in opened:
        t.close()


# --- a full disk --------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted at ``tmp_path/disk`` (root only; owner-only, as a home must be),
    unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root; this machine runs the tests as a user")
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mount.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> None:
    """Fill ``disk`` up to its last byte."""
    with (disk / "filler").open("wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)
    with (disk / "filler-tail").open("wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0")


def release(disk: Path, nbytes: int | None = None) -> None:
    """Give back ``nbytes`` of what ``fill`` took on ``disk`` (all of it by default)."""
    filler = disk / "filler"
    if nbytes is None:
        filler.unlink(missing_ok=True)
        (disk / "filler-tail").unlink(missing_ok=True)
    else:
        os.truncate(filler, max(0, filler.stat().st_size - nbytes))

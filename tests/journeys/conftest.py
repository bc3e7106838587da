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


class Terminal:
    """A program running in a real pseudo-terminal, its screen kept by a VT100 emulator (``pyte``)."""

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        size: tuple[int, int] = (100, 30),
    ) -> None:
        import pty
        import threading

        import pyte

        cols, rows = size
        self.screen = pyte.Screen(cols, rows)
        self._stream = pyte.ByteStream(self.screen)
        self._lock = threading.Lock()
        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes the program
            try:
                os.chdir(cwd)
                child_env = dict(env if env is not None else clean_env())
                child_env.update(TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
                os.execvpe(argv[0], argv, child_env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self._resize(cols, rows)
        self.returncode: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _resize(self, cols: int, rows: int) -> None:
        import fcntl
        import struct
        import termios

        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def resize(self, cols: int, rows: int) -> None:
        """Give the terminal a new size (the program gets SIGWINCH)."""
        with self._lock:
            self.screen.resize(rows, cols)
        self._resize(cols, rows)

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._stream.feed(data)

    def text(self) -> str:
        """What the screen shows now, one line per row."""
        with self._lock:
            return "\n".join(self.screen.display)

    def wait_for(self, needle: str, timeout: float = 15) -> str:
        """Wait until ``needle`` is on the screen; the screen's text (fails with it after ``timeout``)."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = self.text()
            if needle in shown:
                return shown
            if self.poll() is not None:
                break
            time.sleep(0.05)
        pytest.fail(f"{needle!r} not on screen after {timeout} s (exit {self.returncode}):\n{self.text()}")

    def send(self, keys: str) -> None:
        """Type ``keys`` (``\\x03`` is Ctrl-C, ``\\r`` Enter)."""
        os.write(self.fd, keys.encode())

    def poll(self) -> int | None:
        """The exit code once the program has ended, else None."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float = 15) -> int:
        """Wait for the program to end; its exit code (fails after ``timeout``)."""
        import time

        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"still running after {timeout} s:\n{self.text()}")
            time.sleep(0.05)
        assert self.returncode is not None
        return self.returncode

    def close(self) -> None:
        """End the program if it still runs and release the terminal."""
        import signal

        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.returncode = -9
        os.close(self.fd)

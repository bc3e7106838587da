"""A session starts once (``Engine.start`` re-checks under the journal's lock) and is run by one
process at a time (``ledger.core.runners``)."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger import events as E
from ledger.core.home import Home
from ledger.core.runners import SessionBusy, pid_file, running
from ledger.drivers.runner.agent_path import agent_problem
from ledger.drivers.runner.agent_process import Output
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decide.limits import limit_for as real_limit_for
from ledger.loop.engine import Engine
from ledger.loop.engine_types import EngineError
from ledger.storage.journal import Journal, journal_path


def test_a_start_that_another_start_overtook_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two starters both see no session, then both append: the second is refused under the lock
    (it wrote a second ``session_started`` into the journal)."""
    home = Home(tmp_path / "home")
    overtaken: list[bool] = []

    def limit_for(*args: Any) -> Any:
        if not overtaken:  # the other process starts the session between the check and the append
            overtaken.append(True)
            Engine(home).start("s1", LoopConfig(task="theirs"))
        return real_limit_for(*args)

    monkeypatch.setattr("ledger.loop.engine.limit_for", limit_for)
    with pytest.raises(EngineError, match="session 's1' already exists"):
        Engine(home).start("s1", LoopConfig(task="mine"))
    events = Journal(journal_path(home.journals, "s1")).read_all().events
    started = [e for e in events if isinstance(e, E.SessionStarted)]
    assert [s.task for s in started] == ["theirs"]


def test_a_journal_of_errors_only_still_starts(tmp_path: Path) -> None:
    """A Stop hook that failed before its loop started leaves errors only: the loop starts there."""
    home = Home(tmp_path / "home")
    Journal(journal_path(home.journals, "s1")).append(
        E.ErrorRecorded(session_id="s1", component="hook", message="x")
    )
    assert Engine(home).start("s1", LoopConfig()).iteration == 1


def test_one_runner_per_session_and_a_dead_ones_file_is_taken_over(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    with running(home, "s1"):
        assert pid_file(home, "s1").read_text() == f"{os.getpid()}\n"
        assert oct(pid_file(home, "s1").stat().st_mode & 0o777) == "0o600"
        with pytest.raises(SessionBusy) as busy, running(home, "s1"):
            pass
        assert busy.value.pid == os.getpid()
        assert str(busy.value) == (
            f"session 's1' is already running in another process (PID {os.getpid()}): one run at a time"
        )
        with running(home, "s2"):  # another session: its own
            pass
    assert not pid_file(home, "s1").exists()
    pid_file(home, "s1").write_text("1\n")  # left by a killed runner; pid 1 lives, and holds no lock
    with running(home, "s1"):
        assert pid_file(home, "s1").read_text() == f"{os.getpid()}\n"


class Broken(io.StringIO):
    """A stream whose reader went away after ``n`` writes."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def write(self, text: str, /) -> int:
        if self.n <= 0:
            raise BrokenPipeError(32, "Broken pipe")
        self.n -= 1
        return super().write(text)


def test_output_drops_writes_once_its_reader_is_gone() -> None:
    out = Output(Broken(1))
    assert out.write("one\n") == 4 and not out.gone
    assert out.write("two\n") == 4 and out.gone
    out.write("three\n")
    out.flush()
    assert isinstance(out.stream, Broken) and out.stream.getvalue() == "one\n"


def test_the_agent_is_looked_for_where_it_runs(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "agent").write_text("#!/bin/sh\n")
    (bin_dir / "agent").chmod(0o755)
    (bin_dir / "plain").write_text("#!/bin/sh\n")
    (bin_dir / "plain").chmod(0o644)
    env = {"PATH": f"bin{os.pathsep}/nowhere"}  # a relative entry: from the folder it runs in
    assert agent_problem("agent", tmp_path, env) == ""
    assert agent_problem("agent", bin_dir, env) == "agent command not found: agent (not on PATH)"
    assert agent_problem("plain", tmp_path, env) == (
        f"agent command is not executable: {bin_dir / 'plain'} (make it so: chmod +x {bin_dir / 'plain'})"
    )
    assert agent_problem("bin/agent", tmp_path) == ""
    assert agent_problem("./agent", tmp_path) == (
        f"agent command not found: ./agent (no such file in {tmp_path}, where the agent runs)"
    )
    assert agent_problem("bin", tmp_path / "x/..") == "agent command not found: bin (not on PATH)"
    assert agent_problem("./bin", tmp_path) == "agent command is a folder, not a program: ./bin"
    assert agent_problem(sys.executable, tmp_path / "nowhere") == ""

"""The warm stop worker (``ledger.drivers.claude_code.stop.warm``, ``RALPH_WARM=1``), with the installed
console scripts.

A ledger-native loop's stops are served by the home's worker once the first stop has started it:
the same answers and journal as stops run in-process, the project's rules run in the project with
each stop's own environment, an owner-only socket in the home. A worker that is absent, broken or
silent leaves the stop to the hook process; an idle worker exits and removes its socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.drivers.claude_code.stop.warm import MAX_PATH
from tests.journeys.conftest import Project, clean_env, script, spawn
from tests.journeys.test_claude_code import Claude, start

RECORD = "import os; open('rule.log', 'a').write(f\"{os.getppid()} {os.environ.get('RALPH_MARK', '')}\\n\")"


def native_project(root: Path) -> Project:
    """A project whose one rule records which process ran it and the stop's ``RALPH_MARK`` (a
    variable a stop is sent: docs/design/warm-worker.md), in the project."""
    project = Project(root)
    argv = json.dumps([sys.executable, "-c", RECORD])
    project.write(
        "ralph.toml", f"max_iterations = 20\n[[rules]]\nname = 'ok'\ntype = 'command'\nargv = {argv}\n"
    )
    start(project, "Write the parser")
    return project


def worker_pid(project: Project) -> int:
    return int((project.home / "stop-worker.lock").read_text().strip() or 0)


def wait_for(check: object, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {check}")


def stop_worker(project: Project) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.kill(worker_pid(project), signal.SIGTERM)


def drive(project: Project, warm: bool, stops: int) -> list[str]:
    claude = Claude(project)
    answers = []
    for n in range(1, stops + 1):
        claude.text(f"Turn {n}: parser half done.")
        env = clean_env(RALPH_MARK=f"m{n}", **({"RALPH_WARM": "1"} if warm else {}))
        answers.append(claude.stop(env=env).stdout)
        if warm and n == 1:  # the first stop ran in-process and started the worker
            wait_for(lambda: (project.home / "stop-worker.sock").exists())
    return answers


@pytest.fixture
def warm_project(tmp_path: Path) -> Iterator[Project]:
    project = native_project(tmp_path / "w")
    yield project
    stop_worker(project)


@pytest.mark.parametrize("deep", [False, True], ids=["home", "home in a long path"])
def test_the_worker_serves_stops_as_the_hook_would(tmp_path: Path, deep: bool) -> None:
    """A home whose socket path is over ``MAX_PATH`` (a project deep in long folder names) has its
    worker too: reached through its folder's descriptor (docs/design/warm-worker.md)."""
    root = tmp_path.joinpath(*["a-folder-with-a-rather-long-name"] * 4) if deep else tmp_path
    warm_project = native_project(root / "w")
    assert (len(str(warm_project.home / "stop-worker.sock")) > MAX_PATH) == deep
    try:
        served_warm(warm_project, native_project(tmp_path / "c"))
    finally:
        stop_worker(warm_project)


def served_warm(warm_project: Project, cold: Project) -> None:
    warm_answers = drive(warm_project, True, 4)
    cold_answers = drive(cold, False, 4)
    assert warm_answers == cold_answers and all('"block"' in a for a in warm_answers)
    sid = f"cc-{Claude(cold).session}"
    strip = [(e["type"], e["iteration"], e.get("decision", "")) for e in cold.journal(sid)]
    assert [(e["type"], e["iteration"], e.get("decision", "")) for e in warm_project.journal(sid)] == strip
    sock = warm_project.home / "stop-worker.sock"
    assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
    pid = worker_pid(warm_project)
    runs = [line.split() for line in (warm_project.dir / "rule.log").read_text().splitlines()]
    assert [mark for _, mark in runs] == ["m1", "m2", "m3", "m4"]  # each stop's own environment
    assert runs[0][0] != str(pid) and all(ppid == str(pid) for ppid, _ in runs[1:])  # served warm
    stop_worker(warm_project)
    wait_for(lambda: not sock.exists())


def test_a_silent_or_absent_worker_leaves_the_stop_to_the_hook(warm_project: Project) -> None:
    sock = warm_project.home / "stop-worker.sock"
    warm_project.home.mkdir(exist_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock))
    server.listen(4)
    held: list[socket.socket] = []

    def silent() -> None:  # takes connections and never answers
        with contextlib.suppress(OSError):
            while True:
                held.append(server.accept()[0])

    threading.Thread(target=silent, daemon=True).start()
    claude = Claude(warm_project)
    claude.text("Turn 1.")
    started = time.monotonic()
    assert '"block"' in claude.stop(env=clean_env(RALPH_WARM="1", RALPH_MARK="silent")).stdout
    assert time.monotonic() - started < 30
    with contextlib.suppress(OSError):
        server.shutdown(socket.SHUT_RDWR)
    server.close()
    for conn in held:
        conn.close()
    sock.unlink()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock))  # the file of a worker that died: nobody listens
    stale.close()
    # a socket nobody listens on: the hook runs the stop and starts a worker
    claude.text("Turn 2.")
    assert '"block"' in claude.stop(env=clean_env(RALPH_WARM="1", RALPH_MARK="refused")).stdout
    runs = [line.split() for line in (warm_project.dir / "rule.log").read_text().splitlines()]
    assert [mark for _, mark in runs] == ["silent", "refused"]
    wait_for(lambda: (warm_project.home / "stop-worker.lock").exists() and worker_pid(warm_project) > 0)
    assert all(ppid != str(worker_pid(warm_project)) for ppid, _ in runs)


def test_an_idle_worker_exits_and_removes_its_socket(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.drivers.claude_code.stop.warm_worker", str(home), "0.5"]
    )
    try:
        wait_for(lambda: (home / "stop-worker.sock").exists())
        assert proc.wait(timeout=20) == 0
        assert not (home / "stop-worker.sock").exists()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_worker_removes_the_temporary_sockets_of_workers_killed_while_starting(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = home / f".stop-worker.sock.{dead.pid}"  # a worker killed between bind and rename
    orphan.write_text("")
    live = home / f".stop-worker.sock.{os.getpid()}"  # a pid that is alive is left alone
    live.write_text("")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.drivers.claude_code.stop.warm_worker", str(home), "0.5"]
    )
    try:
        wait_for(lambda: (home / "stop-worker.sock").exists())
        assert not orphan.exists() and live.exists()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_hook_killed_while_the_worker_serves_its_stop_gets_no_decision_recorded(tmp_path: Path) -> None:
    """The worker runs a slow rule for a stop whose hook process is then killed (SIGKILL): the
    worker records nothing of the step (a step is one all-or-nothing append: no turn, no decision;
    docs/design/loop-step.md), only an ``error_recorded`` saying why, and the next stop goes on
    from the same iteration, as after a killed in-process stop."""
    project = Project(tmp_path / "project")
    slow = "import time; open('rule-started', 'a').write('x'); time.sleep(1.5)"
    argv = json.dumps([sys.executable, "-c", slow])
    project.write(
        "ralph.toml", f"max_iterations = 20\n[[rules]]\nname = 'slow'\ntype = 'command'\nargv = {argv}\n"
    )
    start(project, "Write the parser")
    claude = Claude(project)
    warm = clean_env(RALPH_WARM="1")
    try:
        claude.text("Turn 1.")
        assert '"block"' in claude.stop(env=warm).stdout  # in-process; it starts the worker
        wait_for(lambda: (project.home / "stop-worker.sock").exists())
        claude.text("Turn 2.")
        hook = spawn([script("ralph-ledger"), "hook", "claude-code"], project.dir, claude.event(), warm)
        wait_for(lambda: len((project.dir / "rule-started").read_text()) == 2)  # the worker runs it
        hook.kill()
        assert hook.communicate(timeout=10)[0] == ""
        journal = project.home / "journals" / f"cc-{claude.session}.jsonl"

        def said() -> list[dict[str, object]]:
            return [json.loads(x) for x in journal.read_text().splitlines()]

        wait_for(lambda: any(e["type"] == "error_recorded" for e in said()))
        events = said()
        assert not any(e.get("output_excerpt") == "Turn 2." for e in events)  # nothing of the step
        assert [e["type"] for e in events[-2:]] == [
            "checkpoint_created",
            "error_recorded",
        ]  # iteration 2's start
        assert "ended before it was decided" in str(events[-1]["message"])
        claude.text("Turn 3.")
        answer = json.loads(claude.stop(env=warm).stdout)
        assert answer["systemMessage"].startswith("🔄 Ralph iteration 3"), answer
    finally:
        stop_worker(project)


def imported(proc: subprocess.CompletedProcess[str]) -> set[str]:
    """The modules a process run with ``PYTHONPROFILEIMPORTTIME=1`` imported (from its stderr)."""
    lines = proc.stderr.splitlines()
    return {line.rpartition("|")[2].strip() for line in lines if line.startswith("import time:")}


def maps_duckdb(pid: int) -> bool:
    """Whether the process ``pid`` has DuckDB's library loaded."""
    return "duckdb" in Path(f"/proc/{pid}/maps").read_text()


def test_the_worker_serves_drop_in_stops_and_imports_duckdb_only_for_a_ledger_native_one(
    tmp_path: Path,
) -> None:
    """A ralph-loop drop-in, warm: the first stop runs in-process and starts the worker; the next
    ones are served by it, their hook processes importing no msgspec, with the answers and journal
    of stops run in-process. The worker of a home with drop-in loops only has no DuckDB; a
    ledger-native loop's stop in the same home is served too, and brings DuckDB in then."""
    warm, cold = Project(tmp_path / "w"), Project(tmp_path / "c")
    answers: dict[str, list[str]] = {"w": [], "c": []}
    try:
        for project in (warm, cold):
            start(project, "Write the parser", "--completion-promise", "DONE")
            claude = Claude(project)
            for n in range(1, 5):
                claude.text(f"Turn {n}." + (" <promise>DONE</promise>" if n == 4 else ""))
                env = clean_env(
                    PYTHONPROFILEIMPORTTIME="1", **({"RALPH_WARM": "1"} if project is warm else {})
                )
                proc = claude.stop(env=env)
                answers[project.dir.name].append(proc.stdout)
                served = project is warm and n > 1
                assert ("msgspec" in imported(proc)) is not served, (n, project.dir.name)
                if project is warm and n == 1:
                    wait_for(lambda: (warm.home / "stop-worker.sock").exists())
        assert answers["w"] == answers["c"] and '"block"' in answers["w"][0] and "DONE" in answers["w"][3]
        sid = f"cc-{Claude(cold).session}"
        strip = [(e["type"], e["iteration"], e.get("decision", "")) for e in cold.journal(sid)]
        assert [(e["type"], e["iteration"], e.get("decision", "")) for e in warm.journal(sid)] == strip
        pid = worker_pid(warm)
        assert not maps_duckdb(pid)
        warm.write("ralph.toml", "max_iterations = 20\n")
        start(warm, "Write the lexer")
        claude = Claude(warm, session="b7e1c2d3-0000-4000-8000-00000000bbbb")
        claude.text("Lexer half done.")
        proc = claude.stop(env=clean_env(RALPH_WARM="1", PYTHONPROFILEIMPORTTIME="1"))
        assert '"block"' in proc.stdout and "msgspec" not in imported(proc)
        assert worker_pid(warm) == pid and maps_duckdb(pid)
    finally:
        stop_worker(warm)


@pytest.mark.parametrize("setting", [None, "0", "off"])
def test_the_worker_is_the_default_and_ralph_warm_0_turns_it_off(tmp_path: Path, setting: str | None) -> None:
    """Claude Code's hook with no ``RALPH_WARM`` in its environment: the first stop starts the home's
    worker and the next is served by it. ``RALPH_WARM=0`` (or ``off``): every stop in-process, no
    worker started."""
    project = native_project(tmp_path / "d")
    try:
        claude = Claude(project)
        for n in (1, 2):
            claude.text(f"Turn {n}: parser half done.")
            env = {k: v for k, v in clean_env(RALPH_MARK=f"m{n}").items() if k != "RALPH_WARM"}
            if setting is not None:
                env["RALPH_WARM"] = setting
            assert '"block"' in claude.stop(env=env).stdout
            if setting is None and n == 1:
                wait_for(lambda: (project.home / "stop-worker.sock").exists())
        runs = [line.split() for line in (project.dir / "rule.log").read_text().splitlines()]
        assert [mark for _, mark in runs] == ["m1", "m2"]
        if setting is None:
            assert runs[1][0] == str(worker_pid(project)) and runs[0][0] != runs[1][0]
        else:
            time.sleep(1.0)  # a worker started by either stop would hold its lock by now
            assert not (project.home / "stop-worker.lock").exists()
            assert not (project.home / "stop-worker.sock").exists()
    finally:
        stop_worker(project)

"""The warm stop worker's handshake (``ledger.drivers.claude_code.stop.warm``), one request at a time over
a socket pair."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from ledger.core.home import Home
from ledger.drivers.claude_code.stop import hook as stop_hook
from ledger.drivers.claude_code.stop.stop_input import HookOutcome
from ledger.drivers.claude_code.stop.warm import (
    MAX_PATH,
    Reply,
    Request,
    address,
    code_stamp,
    recv,
    recv_exact,
    send,
    socket_path,
)
from ledger.drivers.claude_code.stop.warm_home import Listener
from ledger.drivers.claude_code.stop.warm_worker import _serve_one


def request(home: Home, code: int) -> Request:
    return Request(b"{}", str(home.root.parent), {}, str(home.root), None, code)


def test_a_worker_running_other_code_refuses_and_says_so(tmp_path: Path) -> None:
    """After an upgrade the worker never runs a stop: the hook gets no ready and runs it itself."""
    home = Home.resolve(tmp_path / "home")
    hook, worker = socket.socketpair()
    with hook, worker:
        send(hook, request(home, code_stamp() + 1).encode())
        assert _serve_one(worker, home, code_stamp()) is False
        worker.close()
        assert hook.recv(1) == b""


def test_a_request_for_another_home_is_left_to_the_hook(tmp_path: Path) -> None:
    home = Home.resolve(tmp_path / "home")
    other = Home.resolve(tmp_path / "other")
    hook, worker = socket.socketpair()
    with hook, worker:
        send(hook, request(other, code_stamp()).encode())
        assert _serve_one(worker, home, code_stamp()) is True
        worker.close()
        assert hook.recv(1) == b""


def test_a_hook_that_never_says_go_gets_nothing_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ready, then silence (the hook timed out and runs the stop itself): the worker runs nothing;
    with "go" it runs the stop and replies."""
    runs: list[bytes] = []

    def run(raw: bytes, **kw: object) -> HookOutcome:
        runs.append(raw)
        return HookOutcome(stdout="answer\n")

    monkeypatch.setattr(stop_hook, "run", run)
    home = Home.resolve(tmp_path / "home")
    hook, worker = socket.socketpair()
    with hook, worker:
        send(hook, request(home, code_stamp()).encode())
        hook.close()  # gone before "go"
        assert _serve_one(worker, home, code_stamp()) is True
    assert runs == []
    hook, worker = socket.socketpair()
    with hook, worker:
        send(hook, request(home, code_stamp()).encode())
        hook.sendall(b"G")
        assert _serve_one(worker, home, code_stamp()) is True
        assert recv_exact(hook, 1) == b"R"
        assert Reply.decode(recv(hook)).stdout == "answer\n"
    assert runs == [b"{}"]


def test_a_drop_in_stop_whose_hook_is_gone_decides_nothing(tmp_path: Path) -> None:
    """A drop-in stop run by the worker for a hook process killed meanwhile: the state file keeps
    its iteration and the journal gets an ``error_recorded``, no decision (as a ledger-native one)."""
    from ledger import events as E
    from ledger.drivers.claude_code.stop.plugin import read_state
    from ledger.drivers.claude_code.stop.requester import served_for
    from ledger.storage.journal import Cursor, read_new

    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    state = project / ".claude" / "ralph-loop.local.md"
    state.write_text(
        "---\nactive: true\niteration: 1\nsession_id: \nmax_iterations: 0\n"
        'completion_promise: "ALL DONE"\nstarted_at: "2026-11-22T00:00:00Z"\n---\n\nFix the tests\n'
    )
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        '{"type": "assistant", "message": {"id": "m1", "role": "assistant", '
        '"content": [{"type": "text", "text": "Still failing."}]}}\n'
    )
    raw = json.dumps({"session_id": "s1", "transcript_path": str(transcript), "cwd": str(project)}).encode()
    home = Home.resolve(project / ".ralph")
    before = state.read_text()
    with served_for(lambda: False):
        outcome = stop_hook.run(raw, home=home)
    assert outcome.stdout == "" and "ended before it was decided" in outcome.stderr
    assert state.read_text() == before
    events = read_new(home.journals / "cc-s1.jsonl", Cursor()).events
    assert not any(isinstance(e, E.StopDecided) for e in events)
    assert isinstance(events[-1], E.ErrorRecorded) and "ended before it was decided" in events[-1].message
    answers = iter([True, False])  # gone while the state file was rewritten: it is put back
    with served_for(lambda: next(answers)):
        assert "ended before it was decided" in stop_hook.run(raw, home=home).stderr
    kept = read_state(state)
    assert kept is not None and kept.iteration == 1
    events = read_new(home.journals / "cc-s1.jsonl", Cursor()).events
    assert not any(isinstance(e, E.StopDecided) for e in events)
    with served_for(lambda: True):
        assert '"block"' in stop_hook.run(raw, home=home).stdout  # a hook still waiting gets its answer
    moved = read_state(state)
    assert moved is not None and moved.iteration == 2


@pytest.mark.parametrize(
    "case", ["not wanted", "no loop", "stdin not json", "socket path too long (no /proc, as on macOS)"]
)
def test_the_lean_client_leaves_the_stop_to_the_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """What the client cannot hand over (or must not) it leaves to the in-process stop, without
    starting a worker: ``RALPH_WARM=0``, no loop file, stdin it cannot read when it needs its
    ``cwd``, a socket path over the AF_UNIX limit where no folder descriptor can shorten it."""
    from ledger.drivers.claude_code.stop import warm

    started: list[str] = []
    monkeypatch.setattr(warm, "start", lambda home, **kw: started.append(home))
    project = tmp_path / "p"
    (project / ".claude").mkdir(parents=True)
    if case != "no loop":
        (project / ".claude" / "ralph-loop.local.md").write_text("---\niteration: 1\n---\nx\n")
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # the loop is found from stdin's cwd
    monkeypatch.setenv("RALPH_WARM", "0" if case == "not wanted" else "1")
    home = tmp_path / ("h" * 120 if case.startswith("socket path too long") else "h")
    if case.startswith("socket path too long"):
        home.mkdir()
        monkeypatch.delattr(os, "O_PATH")
    monkeypatch.setenv("RALPH_HOME", str(home))
    raw = b"{not json" if case == "stdin not json" else json.dumps({"cwd": str(project)}).encode()
    assert warm.served(raw, None) is None
    assert started == []
    monkeypatch.setenv("RALPH_WARM", "1")  # the same stop, wanted, with a loop and a short home: started
    monkeypatch.setenv("RALPH_HOME", str(tmp_path / "h"))
    (project / ".claude" / "ralph-loop.local.md").write_text("---\niteration: 1\n---\nx\n")
    assert warm.served(json.dumps({"cwd": str(project)}).encode(), None) is None
    assert started == [str(tmp_path / "h")]


@pytest.mark.parametrize(
    ("value", "on"),
    [
        (None, True),
        ("", True),
        ("1", True),
        ("yes", True),
        ("0", False),
        ("false", False),
        (" Off ", False),
        ("NO", False),
    ],
)
def test_the_worker_is_wanted_unless_ralph_warm_turns_it_off(value: str | None, on: bool) -> None:
    from ledger.drivers.claude_code.stop import warm

    env = {} if value is None else {"RALPH_WARM": value}
    assert warm.wanted(env) is on


def test_the_warm_up_primes_a_ledger_native_session_for_its_next_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker warming up a ledger-native loop's journal reads its ``sessions`` row as the next stop
    asks for it first: that stop finds it (no view query on its path); warming up again at the same
    journal position reads nothing again."""
    from ledger.drivers.claude_code.stop import warm_worker
    from ledger.loop.config.loop_config import LoopConfig
    from ledger.loop.engine import Engine
    from ledger.storage import fold as fold_module
    from ledger.storage.database import Ledger

    home = Home.resolve(tmp_path / "home")
    home.journals.mkdir(parents=True)
    Engine(home).start("native-1", LoopConfig(max_iterations=5), prompt="Fix it")
    fold_module.forget()
    monkeypatch.setattr(warm_worker, "_PRIMED", {})
    queries: list[str] = []
    real = Ledger.rows

    def spy(self: Ledger, sql: str, params: object = None) -> object:
        queries.append(sql)
        return real(self, sql, params)  # type: ignore[arg-type]

    monkeypatch.setattr(Ledger, "rows", spy)
    warm_worker._warm_up(home, native=True)
    assert any("FROM sessions" in q for q in queries)
    queries.clear()
    warm_worker._warm_up(home, native=True)  # the same position: nothing read again
    view = Engine(home).view("native-1")  # the stop's first ask
    assert view.row["iteration"] == 1
    assert not any("FROM sessions" in q for q in queries)
    fold_module.forget()


def test_a_home_in_a_long_path_has_its_worker_socket_through_its_folder(tmp_path: Path) -> None:
    """A socket path over ``MAX_PATH`` (and its longer temporary name) is bound and reached through an
    open descriptor of its folder: the worker listens, the hook connects, the file is in the home."""
    home = tmp_path / ("a-long-project-name-" * 4) / ".ralph"
    home.mkdir(parents=True)
    path = Path(socket_path(home))
    assert len(os.fsencode(path)) > MAX_PATH
    listener = Listener(path, 1.0)
    try:
        assert path.is_socket() and listener.here()
        where, folder = address(str(path))
        assert where.startswith("/proc/self/fd/") and folder is not None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hook:
            hook.connect(where)
            os.close(folder)
            conn, _ = listener.server.accept()
            with conn:
                hook.sendall(b"G")
                assert conn.recv(1) == b"G"
    finally:
        listener.remove()
        listener.close()
    assert address(str(tmp_path / "short.sock")) == (str(tmp_path / "short.sock"), None)
    assert address(str(tmp_path / ("not-made-yet-" * 8) / "s.sock")) == ("", None)  # (the hook starts one)

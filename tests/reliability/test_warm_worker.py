"""The warm stop worker under real faults (docs/design/warm-worker.md): a worker SIGKILLed between
its journal append and its reply, a worker SIGSTOPped while it serves a stop, a package changed
under a running worker, its socket removed, and another local user (uid 65534) planting a listener
on its socket, a symlink as its lock file, or connecting to it. Each test fails on the code before
the fix it checks."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.journeys.conftest import Project, clean_env, spawn
from tests.journeys.test_claude_code import Claude, ledger_project, start
from tests.second_user import NOBODY

SYSTEM_PYTHON = "/usr/bin/python3"
SOCK = "stop-worker.sock"
LOCK = "stop-worker.lock"

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user (uid 65534)")


@pytest.fixture
def short() -> Iterator[Path]:
    """A folder with a short path: an AF_UNIX socket path is at most 108 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="w", dir="/tmp"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def hook_process(event: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One Stop of the installed hook (``ralph-ledger hook claude-code``) in its own process, given
    ``event`` on stdin, in ``cwd`` with ``env``: its exit code, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "ledger.cli", "hook", "claude-code"],
        input=event,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def wait_for(check: Callable[[], object], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if check():
                return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {check}")


def holder(home: Path) -> int:
    """The pid the home's worker lock names (0 when none)."""
    return int((home / LOCK).read_text().strip() or 0)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] != "Z"


def end_worker(home: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        pid = holder(home)
        if pid > 0:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)


def journal(project: Project) -> list[dict[str, Any]]:
    (path,) = (project.home / "journals").glob("cc-*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def warm(**extra: str) -> dict[str, str]:
    return clean_env(RALPH_WARM="1", **extra)


# --- item 2: killed after its append, before its reply ---------------------------------------------

KILLED_AFTER_APPEND = r"""
import os, signal, sys
from ledger import events as E
from ledger.storage import journal
from ledger.drivers.claude_code.stop import warm_worker
real_append = journal.Journal.append
def append(self, *events):
    out = real_append(self, *events)
    decided = any(isinstance(e, E.StopDecided) for e in events)
    if decided and os.environ.get("RALPH_TEST_KILL") == "after-append":
        os.kill(os.getpid(), signal.SIGKILL)  # the decision is in the journal; the reply never leaves
    return out
journal.Journal.append = append
sys.exit(warm_worker.main(sys.argv[1:]))
"""
"""``warm_worker HOME``, which SIGKILLs itself right after the journal append that records a stop's
decision when that stop's hook asks for it (``RALPH_TEST_KILL=after-append``): a test-only hook point."""


def start_killable(home: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", KILLED_AFTER_APPEND, str(home)], env=clean_env())
    wait_for(lambda: (home / SOCK).exists() and holder(home) == proc.pid, 30)
    return proc


@pytest.mark.parametrize("mode", ["plugin", "ledger"])
def test_a_worker_killed_between_its_append_and_its_reply_leaves_one_decision_per_stop(
    short: Path, mode: str, long_form: bool
) -> None:
    """Each stop's worker records the decision and is SIGKILLed before it replies; the hook process
    runs the stop again itself: it must answer with the recorded decision and record nothing more.
    One ``stop_decided`` and one ``agent_turn`` per stop, iterations started once each, every
    turn's tokens counted once. 4 kills (``--long``: 20)."""
    project = Project(short / "p")
    if mode == "ledger":
        ledger_project(project)
    start(project, "Write the parser", "--max-iterations", "60", "--completion-promise", "DONE")
    claude = Claude(project)
    claude.text("turn 0", tokens=(100, 1))
    assert '"block"' in claude.stop(prompt_id="p1").stdout  # the claim, in-process
    worker: subprocess.Popen[bytes] | None = None
    try:
        spent, kills, stops = [100], 0, 1
        worker = start_killable(project.home)
        wanted = 20 if long_form else 4
        while kills < wanted and stops < 4 * wanted:
            stops += 1
            claude.works(f"turn {stops}", tokens=(1000 * stops, 1))
            spent.append(1000 * stops)
            env = warm(RALPH_TEST_KILL="after-append")
            proc = project.cli("hook", "claude-code", input=claude.event(prompt_id="p1"), env=env)
            assert proc.returncode == 0 and json.loads(proc.stdout)["decision"] == "block", proc
            try:
                code = worker.wait(timeout=5)
            except subprocess.TimeoutExpired:
                continue  # the worker was busy warming up: the hook ran this stop itself, no kill
            assert code == -signal.SIGKILL, code  # killed after its append, before its reply
            kills += 1
            worker = start_killable(project.home)
        assert kills == wanted, (kills, stops)
        events = journal(project)
        decided = [e for e in events if e["type"] == "stop_decided"]
        turns = [e for e in events if e["type"] == "agent_turn"]
        started = [e["iteration"] for e in events if e["type"] == "iteration_started"]
        assert len(decided) == stops, [(e["iteration"], e["decision"]) for e in decided]
        assert len({e["stop_id"] for e in decided}) == stops
        assert len(turns) == stops and started == list(range(1, stops + 2))
        assert sum(t["tokens"]["input"] for t in turns) == sum(spent)
        if mode == "ledger":
            (row,) = project.sessions()
            assert row["iteration"] == stops + 1
        print(f"\n{mode}: {stops} stops, {kills} workers killed after their append: {len(decided)} decisions")
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
        end_worker(project.home)


# --- item 6: a stuck worker ------------------------------------------------------------------------

SLOW_RULE = "import os, time; open('rule.log', 'a').write(f'{os.getppid()}\\n'); time.sleep(1.5)"


def slow_project(root: Path) -> Project:
    """A ledger-native loop whose one rule logs the process that ran it, then takes 1.5 s."""
    project = Project(root)
    argv = json.dumps([sys.executable, "-c", SLOW_RULE])
    project.write(
        "ralph.toml", f"max_iterations = 20\n[[rules]]\nname = 'slow'\ntype = 'command'\nargv = {argv}\n"
    )
    start(project, "Write the parser")
    return project


def test_a_worker_stopped_while_it_serves_a_stop_is_ended_and_the_stop_answered(short: Path) -> None:
    """SIGSTOP the worker while it runs a stop's rule (after the handshake): the hook must not wait
    for ever. It takes the silent worker for stuck, ends it, and runs the stop itself: one block,
    one decision recorded."""
    project = slow_project(short / "p")
    claude = Claude(project)
    pid = 0
    try:
        claude.text("Turn 1.")
        assert '"block"' in claude.stop(env=warm()).stdout  # in-process; it starts the worker
        wait_for(lambda: (project.home / SOCK).exists() and holder(project.home) > 0)
        pid = holder(project.home)
        claude.text("Turn 2.")
        began = time.monotonic()
        hook = spawn(
            [sys.executable, "-m", "ledger.cli", "hook", "claude-code"], project.dir, claude.event(), warm()
        )
        wait_for(lambda: (project.dir / "rule.log").read_text().split()[-1] == str(pid))  # the worker runs it
        os.kill(pid, signal.SIGSTOP)
        try:
            out, err = hook.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            hook.kill()
            pytest.fail("the hook waited for a stopped worker for over 60 s")
        took = time.monotonic() - began
        assert hook.returncode == 0 and json.loads(out)["systemMessage"].startswith("🔄 Ralph iteration 3"), (
            err
        )
        assert took < 30, took
        wait_for(lambda: not alive(pid), 10)  # ended: it can never append after the hook's own run
        decided = [e for e in journal(project) if e["type"] == "stop_decided"]
        assert [e["decision"] for e in decided] == ["block", "block"]
    finally:
        if pid and alive(pid):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        end_worker(project.home)


# --- item 7: a change anywhere in the package ------------------------------------------------------

RULE_PPID = "import os; open('rule.log', 'a').write(f'{os.getppid()}\\n')"


def test_a_change_anywhere_in_the_package_retires_the_running_worker(short: Path) -> None:
    """A copy of the package (``PYTHONPATH``) whose ``loop/`` module changes under a running worker:
    the next stop's hook runs other code, so that worker gives up the home, and a new worker, running
    the changed code, serves the stops after."""
    copy = short / "site"
    shutil.copytree(
        Path(__file__).resolve().parents[2] / "ledger",
        copy / "ledger",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    project = Project(short / "p")
    argv = json.dumps([sys.executable, "-c", RULE_PPID])
    project.write(
        "ralph.toml", f"max_iterations = 20\n[[rules]]\nname = 'ok'\ntype = 'command'\nargv = {argv}\n"
    )
    start(project, "Write the parser")
    claude = Claude(project)
    env = warm(PYTHONPATH=str(copy))

    def stop(n: int) -> str:
        claude.text(f"Turn {n}.")
        proc = hook_process(claude.event(), project.dir, env)
        assert proc.returncode == 0 and '"block"' in proc.stdout, proc
        return (project.dir / "rule.log").read_text().split()[-1]

    try:
        stop(1)
        wait_for(lambda: (project.home / SOCK).exists() and holder(project.home) > 0)
        first = holder(project.home)
        assert stop(2) == str(first)  # served warm
        step = copy / "ledger" / "loop" / "step.py"
        step.write_text(step.read_text() + "\n# changed\n")
        assert stop(3) != str(first)  # the hook runs the stop: that worker's code is stale
        wait_for(lambda: not alive(first), 10)
        stop(4)  # a new worker is started
        wait_for(lambda: (project.home / SOCK).exists() and holder(project.home) not in (0, first))
        second = holder(project.home)
        assert stop(5) == str(second)
    finally:
        end_worker(project.home)


# --- item 10: its socket removed -------------------------------------------------------------------


def test_a_worker_whose_socket_was_removed_puts_it_back(short: Path) -> None:
    project = Project(short / "p")
    argv = json.dumps([sys.executable, "-c", RULE_PPID])
    project.write(
        "ralph.toml", f"max_iterations = 20\n[[rules]]\nname = 'ok'\ntype = 'command'\nargv = {argv}\n"
    )
    start(project, "Write the parser")
    claude = Claude(project)
    sock = project.home / SOCK
    try:
        claude.text("Turn 1.")
        assert '"block"' in claude.stop(env=warm()).stdout
        wait_for(lambda: sock.exists() and holder(project.home) > 0)
        pid = holder(project.home)
        sock.unlink()
        wait_for(sock.exists, 10)  # not after its 600 s idle: within a second
        claude.text("Turn 2.")
        assert '"block"' in claude.stop(env=warm()).stdout
        assert (project.dir / "rule.log").read_text().split()[-1] == str(pid)  # served by it
    finally:
        end_worker(project.home)


# --- item 13: another local user -------------------------------------------------------------------

LISTENER = r"""
import socket, sys
path = sys.argv[1]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(1)
print("listening", flush=True)
server.settimeout(30)
conn, _ = server.accept()
conn.settimeout(3)
got = b""
try:
    while len(got) < 100000:
        block = conn.recv(65536)
        if not block:
            break
        got += block
        if len(got) > 8:
            conn.sendall(b"R")
            forged = b'{"decision": "block", "reason": "FORGED"}\n'
            reply = b"".join(len(f).to_bytes(4, "big") + f for f in (b"0", forged, b""))
            conn.sendall(len(reply).to_bytes(4, "big") + reply)
except OSError:
    pass
print(len(got), b"SECRET-KEY-123" in got, flush=True)
"""
"""Another user's listener on the worker's socket: it records what it was sent and forges a block."""

STATE = (
    "---\nactive: true\niteration: 1\nsession_id: \nmax_iterations: 0\ncompletion_promise: null\n"
    'started_at: "2026-11-22T00:00:00Z"\n---\n\nFix the tests\n'
)


def as_nobody(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [SYSTEM_PYTHON, "-I", "-S", *argv],
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )


def open_home(short: Path) -> Path:
    """A home open to everyone (0777) for a while: long enough for uid 65534 to plant something in
    it (the owner then makes it 0700, as the home's own check asks: :func:`closed`)."""
    home = short / "home"
    home.mkdir()
    os.chmod(home, 0o777)
    return home


def closed(home: Path) -> None:
    """The owner tightens the home (0700, theirs), which passes the home's own check: what another
    user planted while it was open is still there."""
    os.chown(home, os.geteuid(), os.getegid())
    os.chmod(home, 0o700)


@as_root
def test_the_hook_sends_nothing_to_another_users_listener(short: Path) -> None:
    """A listener uid 65534 planted at ``stop-worker.sock`` while the home was open, still there
    once the owner closed it: the hook checks the peer's credentials before sending a byte (no
    environment, no API key) and never prints its forged answer."""
    home = open_home(short)
    project = short / "p"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "ralph-loop.local.md").write_text(STATE)
    listener = as_nobody("-c", LISTENER, str(home / SOCK))
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "listening"
        closed(home)
        event = json.dumps(
            {"session_id": "s1", "cwd": str(project), "last_assistant_message": "Still failing."}
        )
        env = warm(RALPH_HOME=str(home), ANTHROPIC_API_KEY="SECRET-KEY-123")
        proc = hook_process(event, project, env)
        assert proc.returncode == 0 and "FORGED" not in proc.stdout, proc
        out, _ = listener.communicate(timeout=60)
        received, secret = out.split()
        assert (received, secret) == ("0", "False"), out
    finally:
        if listener.poll() is None:
            listener.kill()


@as_root
def test_a_worker_never_follows_a_planted_lock_symlink(short: Path) -> None:
    """uid 65534 plants ``stop-worker.lock`` as a symlink to a root-owned file while the home is
    open; the owner closes the home: the worker must not open the lock through the link (the file
    keeps its bytes) and serves nothing from that home."""
    home = open_home(short)
    private = short / "private"
    private.mkdir(mode=0o700)
    target = private / "precious"
    target.write_text("precious\n")
    planter = as_nobody("-c", f"import os; os.symlink({str(target)!r}, {str(home / LOCK)!r})")
    assert planter.wait(timeout=30) == 0, planter.communicate()
    assert (home / LOCK).is_symlink() and os.lstat(home / LOCK).st_uid == NOBODY
    closed(home)
    worker = subprocess.Popen(
        [sys.executable, "-m", "ledger.drivers.claude_code.stop.warm_worker", str(home), "1"], env=clean_env()
    )
    try:
        worker.wait(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert target.read_text() == "precious\n"
    assert not (home / SOCK).exists()


CLIENT = r"""
import socket, sys
request = open(sys.argv[2], "rb").read()
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.settimeout(10)
sock.connect(sys.argv[1])
try:
    sock.sendall(request)
    print(repr(sock.recv(1)), flush=True)
except OSError as exc:
    print(repr(b""), type(exc).__name__, flush=True)
"""


@as_root
def test_a_worker_serves_no_other_users_client(short: Path) -> None:
    """A worker whose socket was opened to everyone (``chmod 666``): uid 65534 connects and asks for
    a well-formed stop; the worker checks the client's credentials and runs nothing."""
    from ledger.drivers.claude_code.stop.warm import Request, code_stamp

    home = short / "home"
    project = short / "p"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "ralph-loop.local.md").write_text(STATE)
    worker = subprocess.Popen(
        [sys.executable, "-m", "ledger.drivers.claude_code.stop.warm_worker", str(home), "30"],
        env=clean_env(),
    )
    try:
        wait_for(lambda: (home / SOCK).exists() and holder(home) == worker.pid, 30)
        os.chmod(home, 0o755)
        os.chmod(home / SOCK, 0o666)
        event = json.dumps({"session_id": "s1", "cwd": str(project), "last_assistant_message": "x"}).encode()
        payload = Request(event, str(project), {}, str(home), None, code_stamp()).encode()
        request = short / "request"
        request.write_bytes(len(payload).to_bytes(4, "big") + payload)
        os.chmod(request, 0o644)
        client = as_nobody("-c", CLIENT, str(home / SOCK), str(request))
        out, err = client.communicate(timeout=60)
        assert out.split()[0] == "b''", (out, err)  # no "R": nothing taken, nothing run
        assert not (home / "journals").exists() or not list((home / "journals").iterdir())
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_a_worker_is_sent_only_the_variables_a_stop_needs(short: Path) -> None:
    """The hook's request carries ``RALPH_*``, ``PATH``, ``HOME``, Claude Code's project and block
    cap, and nothing else of its environment: no API key, no token."""
    import threading

    from ledger.drivers.claude_code.stop.warm import Request, recv

    home = short / "home"
    home.mkdir()
    project = short / "p"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "ralph-loop.local.md").write_text(STATE)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(home / SOCK))
    server.listen(1)
    server.settimeout(30)
    requests: list[Request] = []

    def take() -> None:
        conn, _ = server.accept()
        with conn:
            requests.append(Request.decode(recv(conn)))

    taker = threading.Thread(target=take)
    taker.start()
    event = json.dumps({"session_id": "s1", "cwd": str(project), "last_assistant_message": "x"})
    env = warm(
        RALPH_HOME=str(home),
        ANTHROPIC_API_KEY="SECRET-KEY-123",
        GITHUB_TOKEN="SECRET-TOKEN-456",
        CLAUDE_CODE_OAUTH_TOKEN="SECRET-OAUTH-789",
        CLAUDE_CODE_STOP_HOOK_BLOCK_CAP="5",
    )
    try:
        proc = hook_process(event, project, env)
        taker.join(timeout=30)
    finally:
        server.close()
    assert proc.returncode == 0, proc
    (request,) = requests
    assert request.env["RALPH_HOME"] == str(home) and request.env["CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"] == "5"
    assert "PATH" in request.env
    sent = json.dumps(request.env)
    assert not [s for s in ("SECRET-KEY-123", "SECRET-TOKEN-456", "SECRET-OAUTH-789") if s in sent]

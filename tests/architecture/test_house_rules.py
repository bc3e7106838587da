"""Rules of the codebase that a test can hold."""

from __future__ import annotations

import ast
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Final

import pytest

from ledger import events as E
from ledger.core.home import Home
from ledger.drivers.claude_code.stop.warm import SOCKET, Reply, Request, code_stamp, recv, recv_exact, send
from ledger.storage.database import Ledger
from ledger.storage.journal import Journal

ROOT = Path(__file__).resolve().parents[2]


def test_ledger_never_imports_textual() -> None:
    code = (
        "import sys, ledger, ledger.cli, ledger.storage.database, ledger.storage.export; "
        "import ledger.storage.query, ledger.events, ledger.storage.journal, ledger.storage.schema; "
        "import ledger.loop.validate.score, ledger.storage.sql; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'watchfiles')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_ledger_source_has_no_textual_import() -> None:
    for path in (ROOT / "ledger").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.split(".")[0] == "textual" for n in names), path


def test_appending_to_a_journal_does_not_import_duckdb() -> None:
    code = (
        "import sys; from ledger.storage.journal import Journal; "
        "print('duckdb' in sys.modules, 'pyarrow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


class CountingConnection:
    """Wraps a DuckDB connection and counts the statements sent to it."""

    def __init__(self, con: Any) -> None:
        self._con = con
        self.statements = 0

    def execute(self, *args: Any, **kw: Any) -> Any:
        self.statements += 1
        return self._con.execute(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


@pytest.mark.parametrize("sessions", [1, 20])
def test_ingest_statements_do_not_grow_with_events(tmp_path: Path, sessions: int) -> None:
    """DuckDB gets bulk statements: 10 or 1,000 events per session cost the same."""
    counts = []
    for per_session in (10, 1000):
        home = Home.resolve(tmp_path / f"h{per_session}")
        for s in range(sessions):
            sid = f"s{s}"
            Journal.for_session(home.journals, sid, fsync=False).append(
                *(E.AgentTurn(session_id=sid, tool_count=i) for i in range(per_session))
            )
        ledger = Ledger.memory(home)
        counter = CountingConnection(ledger.con)
        ledger.con = counter  # type: ignore[assignment]
        assert ledger.ingest().events == sessions * per_session
        counts.append(counter.statements)
    assert counts[0] == counts[1] and counts[0] < 20


def test_readme_opens_with_the_two_commands_and_ci_runs_the_second() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    blocks = [i for i, line in enumerate(readme[:40]) if line.startswith("```")]
    first = readme[blocks[0] + 1 : blocks[1]]
    second = readme[blocks[2] + 1 : blocks[3]]
    assert len(first) == 1 and len(second) == 1
    ci = (ROOT / ".ci" / "run").read_text()
    assert second[0] in ci


def test_the_cli_loads_duckdb_only_for_commands_that_need_it() -> None:
    """A stop hook goes through the CLI: importing it must stay cheap."""
    code = "import sys, ledger.cli; print('duckdb' in sys.modules, 'pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


# What the Claude Code Stop hook (a fresh process on every agent stop, bench/bench_hook.py) must not
# import: DuckDB, pyarrow and PyYAML are heavy; json, argparse, hashlib and dataclasses cost it 1.5 to
# 5 ms each (hence msgspec Structs).
HOOK_MUST_NOT_IMPORT: Final = (
    "duckdb",
    "pyarrow",
    "yaml",
    "json",
    "argparse",
    "hashlib",
    "dataclasses",
    "typing_extensions",
    "inspect",
)
_LOADED = f"sorted(m for m in {HOOK_MUST_NOT_IMPORT!r} if m in sys.modules)"


def test_the_stop_hook_modules_import_nothing_slow() -> None:
    code = f"import sys, ledger.cli, ledger.drivers.claude_code.stop.hook; print({_LOADED})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_stop_that_blocks_imports_nothing_slow(tmp_path: Path) -> None:
    """A whole stop of a ralph-loop drop-in, through the CLI's fast path, as Claude Code runs it."""
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "ralph-loop.local.md").write_text(
        "---\nactive: true\niteration: 1\nsession_id: \nmax_iterations: 0\n"
        'completion_promise: "ALL DONE"\nstarted_at: "2026-11-22T00:00:00Z"\n---\n\nFix the tests\n'
    )
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text(
        '{"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "Fix the tests"}}\n'
        '{"type": "assistant", "sessionId": "s1", "message": {"id": "m1", "role": "assistant", '
        '"content": [{"type": "text", "text": "Still failing."}]}}\n'
    )
    event = json.dumps({"session_id": "s1", "transcript_path": str(transcript), "cwd": str(tmp_path)})
    code = (
        "import sys; from ledger.cli import main; code = main(['hook', 'claude-code']); "
        f"print(code, {_LOADED}, file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], input=event, capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert '"decision": "block"' in proc.stdout
    assert proc.stderr.strip() == "0 []"


def test_a_subagent_stop_of_a_ledger_native_loop_imports_nothing_slow(tmp_path: Path) -> None:
    """A SubagentStop is recorded for a ledger-native loop without the engine (DuckDB)."""
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "ralph-ledger.local.json").write_text('{"prompt": "Fix the tests"}')
    agent = tmp_path / "agent-1.jsonl"
    agent.write_text('{"type": "assistant", "message": {"id": "m1", "usage": {"input_tokens": 5}}}\n')
    event = json.dumps(
        {
            "session_id": "s1",
            "cwd": str(tmp_path),
            "hook_event_name": "SubagentStop",
            "agent_id": "1",
            "agent_transcript_path": str(agent),
        }
    )
    code = (
        "import sys; from ledger.cli import main; code = main(['hook', 'claude-code']); "
        f"print(code, {_LOADED}, file=sys.stderr)"
    )
    env = {**os.environ, "RALPH_WARM": "0", "RALPH_HOME": str(tmp_path / ".ralph")}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=event,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=env,
    )
    assert (proc.stdout, proc.stderr.strip()) == ("", "0 []")
    assert '"input":5' in (tmp_path / ".ralph" / "journals" / "cc-s1.jsonl").read_text()


DROP_IN_STATE = (
    "---\nactive: true\niteration: 1\nsession_id: \nmax_iterations: 0\n"
    'completion_promise: "ALL DONE"\nstarted_at: "2026-11-22T00:00:00Z"\n---\n\nFix the tests\n'
)
LEAN_MUST_NOT_IMPORT: Final = (
    *HOOK_MUST_NOT_IMPORT,
    "msgspec",
    "typing",
    "socket",
    "ledger.storage.journal",
    "ledger.drivers.claude_code.stop.hook",
)
"""What a stop handed to the warm worker must not import either: only the standard library's basics."""


def fake_worker(server: socket.socket, reply: Reply, requests: list[Request]) -> None:
    """Serve one stop as the warm worker does (request, ready, go, reply), recording the request."""
    conn, _ = server.accept()
    with conn:
        requests.append(Request.decode(recv(conn)))
        conn.sendall(b"R")
        assert recv_exact(conn, 1) == b"G"
        send(conn, reply.encode())


def test_a_stop_the_warm_worker_serves_imports_no_msgspec(tmp_path: Path) -> None:
    """``ralph-ledger hook claude-code`` with ``RALPH_WARM=1`` and a worker listening: the hook process
    finds the loop and hands the stop over with the standard library only, and prints the reply."""
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "ralph-loop.local.md").write_text(DROP_IN_STATE)
    home = Path(tempfile.mkdtemp(prefix="h", dir="/tmp"))  # an AF_UNIX path is at most 108 bytes
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(home / SOCKET))
        server.listen(1)
        server.settimeout(30)
        requests: list[Request] = []
        reply = Reply(stdout='{"decision": "block"}\n', stderr="a line\n", sync=(str(project / "j.jsonl"),))
        serving = threading.Thread(target=fake_worker, args=(server, reply, requests))
        serving.start()
        event = json.dumps({"session_id": "s1", "transcript_path": "/t.jsonl", "cwd": str(project)})
        loaded = f"sorted(m for m in {LEAN_MUST_NOT_IMPORT!r} if m in sys.modules)"
        code = (
            "import sys; from ledger.cli import main; code = main(['hook', 'claude-code']); "
            f"print(code, {loaded}, file=sys.stderr)"
        )
        env = {**os.environ, "RALPH_WARM": "1", "RALPH_HOME": str(home)}
        env.pop("CLAUDE_PROJECT_DIR", None)
        proc = subprocess.run(
            [sys.executable, "-c", code], input=event, capture_output=True, text=True, cwd=project, env=env
        )
        serving.join(timeout=30)
    finally:
        server.close()
        shutil.rmtree(home)
    assert proc.stdout == '{"decision": "block"}\n'
    assert proc.stderr == "a line\n0 []\n"
    (request,) = requests
    assert request.raw == event.encode() and request.home == str(home) and request.cwd == str(project)
    assert request.code == code_stamp() and request.env["RALPH_WARM"] == "1" and request.home_arg is None


def test_msgspec_imported_lean_still_decodes_and_leaves_typing_extensions_importable() -> None:
    code = (
        "import sys, ledger.cli; from ledger import events as E; "
        "assert 'typing_extensions' not in sys.modules; "
        "e = E.decode(E.encode(E.ValidationRan(session_id='s', iteration=2, score=50.0, passed=False))); "
        "import typing_extensions; print(type(e).__name__, e.iteration, typing_extensions.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["ValidationRan", "2", "typing_extensions"]

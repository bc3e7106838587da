"""One lockdown over every path user SQL takes: ``ralph-ledger sql``, ``Monitor.query`` (a home's
ledger file, an in-memory ledger of journals), ``DatasetMonitor.query`` (``--dataset``) and the TUI's
SQL console (over a home, a dataset, a replay), each a real process of its own with a fresh
``$HOME``, traced (strace) for any network connection. A table of escape queries (an unknown
function DuckDB would fetch an extension for, INSTALL and LOAD, files read and written, ATTACH, SET,
URLs) is refused on every path in one line: no ``~/.duckdb`` appears, nothing is looked up or
connected to, no file is read or written, and a reading query still answers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.journeys.conftest import clean_env, script
from tests.safety import one_line

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_sessions"
JOURNALS = ("tdd-success.jsonl", "thrashing.jsonl")
MARKER = "TOPSECRET-91c4"
CONTROL = "SELECT count(*) FROM events"
ESCAPES = [
    "SELECT excel_text(1, '0')",  # DuckDB would install and load the excel extension for it
    "SELECT excel_text(seq, '0') FROM events",
    "EXPLAIN SELECT excel_text(1, '0')",
    "SELECT st_point(1, 2)",  # spatial
    "SELECT * FROM events WHERE session_id = excel_text(1, '0')",
    "INSTALL excel",
    "LOAD excel",
    "FORCE INSTALL httpfs FROM core",
    "LOAD '{root}/evil.duckdb_extension'",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM read_text('{root}/secret.txt')",
    "SELECT * FROM '{root}/secret.txt'",
    "COPY (SELECT 1) TO '{root}/out.csv'",
    "COPY events TO '{root}/out.parquet' (FORMAT parquet)",
    "ATTACH '{root}/attached.db' AS a",
    "SET autoinstall_known_extensions = true",
    "SET enable_external_access = true",
    "SET allowed_directories = ['/']",
    "SELECT * FROM 'https://extensions.duckdb.org/x.csv'",
    "SELECT * FROM read_parquet('https://example.com/x.parquet')",
    "SELECT * FROM read_csv('s3://bucket/x.csv')",
    "SELECT * FROM 'hf://datasets/x/y.csv'",
]
PATHS = ["sql", "monitor", "memory", "dataset", "console", "console-dataset", "console-replay"]


@dataclass
class Bed:
    """A home with two loops' journals, the same journals in a plain folder, the home's exported
    dataset, a secret file, and how many events they hold."""

    root: Path
    home: Path
    journals: Path
    dataset: Path
    events: int


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    if shutil.which("strace") is None:
        pytest.fail("strace is needed to watch for network connections: install it (apt-get install strace)")
    root = tmp_path_factory.mktemp("lockdown")
    home, journals = root / "home", root / "journals"
    for folder in (home / "journals", journals):
        folder.mkdir(parents=True)
        for name in JOURNALS:
            shutil.copy(SAMPLES / name, folder)
    (root / "secret.txt").write_text(MARKER + "\n")
    events = sum(len((SAMPLES / n).read_text().splitlines()) for n in JOURNALS)
    export = [script("ralph-ledger"), "--home", str(home), "export", "--parquet", str(root / "dataset")]
    done = subprocess.run(export, capture_output=True, text=True, env=clean_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    yield Bed(root, home, journals, root / "dataset", events)


def traced(argv: list[str], user: Path, log: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` with ``$HOME`` the empty folder ``user``, every connection it tries written to ``log``."""
    env = clean_env(HOME=str(user), PYTHONPATH=str(REPO))
    env.pop("XDG_CONFIG_HOME", None)
    trace = ["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(log)]
    return subprocess.run([*trace, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def through(path: str, bed: Bed, queries: list[str], user: Path, log: Path) -> list[tuple[bool, str]]:
    """Run ``queries`` through ``path`` as a user does; (answered, what was said) for each."""
    work = user.parent / "cwd"
    work.mkdir(exist_ok=True)
    if path == "sql":
        out = []
        for i, sql in enumerate(queries):
            argv = [script("ralph-ledger"), "--home", str(bed.home), "sql", "--json", sql]
            proc = traced(argv, user, log.with_suffix(f".{i}"), work)
            assert "Traceback" not in proc.stderr, proc.stderr
            if proc.returncode == 0:
                out.append((True, repr([tuple(r.values()) for r in json.loads(proc.stdout)])))
            else:
                assert proc.returncode == 1 and proc.stdout == "", (sql, proc.stdout, proc.stderr)
                out.append((False, proc.stderr.removeprefix("ralph-ledger: ").rstrip("\n")))
        return out
    sources = {"dataset": bed.dataset, "console-dataset": bed.dataset, "memory": bed.journals}
    source = sources.get(path, bed.journals if path == "console-replay" else bed.home)
    asked, answers = user.parent / "queries.json", user.parent / "answers.json"
    asked.write_text(json.dumps(queries))
    argv = [sys.executable, "-m", "tests.query_paths", path, str(source), str(asked), str(answers)]
    proc = traced(argv, user, log, work)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return [(bool(a["ok"]), str(a["said"])) for a in json.loads(answers.read_text())]


def connections(logs: list[Path]) -> list[str]:
    """The network connections (IPv4, IPv6: a name looked up, a host reached) the traces hold."""
    found = []
    for log in logs:
        found += [line for line in log.read_text().splitlines() if re.search(r"sa_family=AF_INET6?\b", line)]
    return found


@pytest.mark.parametrize("path", PATHS)
def test_every_query_path_is_locked_down(bed: Bed, path: str, tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    queries = [CONTROL, *(q.format(root=bed.root) for q in ESCAPES)]
    log = tmp_path / "connect.log"
    answers = through(path, bed, queries, user, log)
    assert len(answers) == len(queries)
    assert answers[0] == (True, repr([(bed.events,)])), answers[0]  # the ledger still answers
    assert answers[1][1].startswith("refused: excel_text() is in DuckDB's excel extension"), answers[1]
    for sql, (answered, said) in zip(queries[1:], answers[1:], strict=True):
        assert not answered, f"{path}: {sql!r} ran: {said[:300]}"
        assert one_line(said) and MARKER not in said and "root:" not in said, (path, sql, said)
    assert not (user / ".duckdb").exists(), sorted(str(p) for p in (user / ".duckdb").rglob("*"))
    assert not any("duckdb" in p.name for p in user.rglob("*")), sorted(map(str, user.rglob("*")))
    tried = connections(sorted(tmp_path.glob("connect.log*")))
    assert not tried, f"{path}: network connections tried: {tried[:3]}"
    for name in ("out.csv", "out.parquet", "attached.db"):
        assert not (bed.root / name).exists(), f"{path} wrote {name}"
    assert not list((tmp_path / "cwd").iterdir())  # nothing where it ran either

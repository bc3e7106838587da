"""The hash chain with the real Claude Code (2.1.328): a ledger-native loop whose journal the hook (its
warm worker, the default) wrote verifies clean; a line then edited by hand is named by ``verify`` and
marked in ``sessions`` (docs/verify.md). The client runs against the Anthropic mock, as in
tests/clients/test_claude_code_stop.py, whose helpers it uses."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.mocks.base import Reply, Script, Usage
from tests.clients.test_claude_code_stop import RALPH, Run, claude_run, write

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def loop(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("verify")
    main = [
        Reply(
            text="Working on a.",
            tool_calls=(write(root / "project" / "a.txt"),),
            usage=Usage(100, 10, 500, 5),
        ),
        Reply(text="Wrote a.", usage=Usage(101, 11, 510, 6)),  # stop 1: continue
        Reply(text="Checked a.", usage=Usage(102, 12, 520, 7)),  # stop 2: continue
        Reply(text="<promise>COMPLETE</promise>", usage=Usage(103, 13, 530, 8)),  # stop 3: complete
    ]
    yield claude_run(
        client_bin, root, Script(main), mode="ledger", loop=("Do the work",), toml="max_iterations = 5\n"
    )


def cli(run: Run, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RALPH, *args], cwd=run.project, capture_output=True, text=True, timeout=60)


def test_the_hooks_journal_verifies_clean_then_an_edited_line_is_named(loop: Run) -> None:
    (journal,) = (loop.project / ".ralph" / "journals").glob("*.jsonl")
    session = journal.stem
    lines = journal.read_bytes().split(b"\n")[:-1]
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events if e["type"] == "stop_decided"] == ["stop_decided"] * 3
    assert all(e["prev"] for e in events)  # the hook and its warm worker linked every event
    clean = cli(loop, "verify")
    assert (clean.returncode, clean.stdout) == (
        0,
        f"verify: 1 session, {len(lines)} lines checked; every chain holds\n",
    ), clean.stderr
    (row,) = loop.sql("select status, chain_broken, chain_break from sessions")
    assert row == {"status": "complete", "chain_broken": False, "chain_break": ""}

    # the first block the hook recorded, turned into an allow by hand
    edited = next(i for i, e in enumerate(events, 1) if e["type"] == "stop_decided")
    lines[edited - 1] = lines[edited - 1].replace(b'"decision":"block"', b'"decision":"allow"')
    journal.write_bytes(b"\n".join(lines) + b"\n")
    broken = cli(loop, "verify", session)
    where = f"line {edited}: edited (line {edited + 1} links to other text)"
    assert (broken.returncode, broken.stdout) == (1, f"{session}: {where}\n"), broken.stderr
    (row,) = loop.sql("select chain_broken, chain_break from sessions")
    assert row == {"chain_broken": True, "chain_break": where}

"""Git snapshots with the real Claude Code (2.1.328) in a ledger-native loop: the turns write files
through the client's own Write and Edit tools, the Stop hook takes a snapshot at each iteration's end,
then ``ralph-ledger diff`` of iteration 2 and ``rollback --to 1`` as a user types them
(docs/snapshots.md; the run as in tests/clients/test_claude_code_stop.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.mocks.base import Reply, Script, ToolCall, Usage
from tests.clients.test_claude_code_stop import RALPH, Run, claude_run, write

pytestmark = pytest.mark.clients

TOML = "max_iterations = 5\nsnapshot_max_bytes = 2048\n"


@pytest.fixture(scope="module")
def snapped(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("snapshots")
    project = root / "project"
    edit = {"file_path": str(project / "app.py"), "old_string": "v1", "new_string": "v2"}
    main = [
        Reply(
            text="Writing app and notes.",
            tool_calls=(write(project / "app.py", "print('v1')\n"), write(project / "notes.md", "notes\n")),
            usage=Usage(100, 10, 500, 5),
        ),
        Reply(text="Iteration one done.", usage=Usage(101, 11, 510, 6)),  # stop 1: continue
        Reply(
            text="Editing app, a big file.",
            tool_calls=(ToolCall("Edit", edit), write(project / "big.txt", "x" * 4096)),
            usage=Usage(102, 12, 520, 7),
        ),
        Reply(text="Iteration two done.", usage=Usage(103, 13, 530, 8)),  # stop 2: continue
        Reply(text="<promise>COMPLETE</promise>", usage=Usage(104, 14, 540, 9)),  # stop 3: complete
    ]
    yield claude_run(client_bin, root, Script(main), mode="ledger", loop=("Do the work",), toml=TOML)


def ralph(run: Run, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RALPH, *args], cwd=run.project, capture_output=True, text=True, timeout=60)


def test_each_stop_of_the_real_client_takes_a_snapshot(snapped: Run) -> None:
    (row,) = snapped.sql("select status, iteration from sessions")
    assert (row["status"], row["iteration"]) == ("complete", 3)
    taken = [e for e in snapped.journal() if e["type"] == "snapshot_taken"]
    assert [e["iteration"] for e in taken] == [1, 2, 3]
    assert taken[0]["parent"] == ""  # the project has no commit yet: the base is the empty tree
    assert taken[1]["left_out"] == ["big.txt"] and taken[1]["parent"] == taken[0]["commit"]
    rows = snapped.sql("select iteration, path, added, removed from changes order by 1, 2")
    paths = [(r["iteration"], r["path"]) for r in rows]
    assert (1, "app.py") in paths and (1, "notes.md") in paths and (2, "app.py") in paths
    assert not [p for _, p in paths if p.startswith(".ralph") or p.endswith(".local.json")]
    assert {"iteration": 2, "path": "app.py", "added": 1, "removed": 1} in rows


def test_diff_of_iteration_2_a_refused_rollback_and_rollback_to_1(snapped: Run) -> None:
    diff = ralph(snapped, "diff", _session(snapped), "2")
    assert diff.returncode == 0, diff.stderr
    assert "-print('v1')" in diff.stdout and "+print('v2')" in diff.stdout
    assert "notes.md" not in diff.stdout and "big.txt" not in diff.stdout
    assert "left out of the snapshots (over the size limit): big.txt" in diff.stderr
    app = snapped.project / "app.py"
    kept = app.read_bytes()
    app.write_bytes(b"print('my own edit')\n")  # an edit in no snapshot: refused, nothing touched
    refused = ralph(snapped, "rollback", _session(snapped), "--to", "1")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "in no snapshot of session" in refused.stderr and "--force" in refused.stderr
    assert app.read_bytes() == b"print('my own edit')\n"
    app.write_bytes(kept)
    back = ralph(snapped, "rollback", _session(snapped), "--to", "1")
    assert back.returncode == 0, back.stderr
    assert (snapped.project / "app.py").read_bytes() == b"print('v1')\n"
    assert (snapped.project / "notes.md").read_bytes() == b"notes\n"
    assert (snapped.project / "big.txt").read_text() == "x" * 4096  # left out: left alone
    (override,) = [e for e in snapped.journal() if e["type"] == "override"]
    assert override["kind"] == "rollback"


def _session(run: Run) -> str:
    (row,) = run.sql("select session_id from sessions")
    return str(row["session_id"])

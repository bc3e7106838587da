"""Journey of ``ralph-ledger verify``: a loop run by ``ralph-ledger run`` in a fresh git project, its
journal edited by hand afterwards, ``verify`` naming the line, ``sessions`` marking the session; a line
removed before the ledger ever read the journal is found by the ingest itself (docs/verify.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.helpers import AGENT_PREAMBLE
from tests.journeys.conftest import Project

AGENT = AGENT_PREAMBLE + 'print(f"worked on run {n}" if n < 3 else "done <promise>COMPLETE</promise>")\n'
"""A scripted agent that works twice, then says it is complete."""


def run_loop(project: Project, tmp: Path, session: str) -> list[bytes]:
    """``ralph-ledger run`` to the end; the session's journal lines."""
    state = tmp / f"state-{session}"
    state.mkdir()
    agent = tmp / "agent.py"
    agent.write_text(AGENT)
    project.write("PROMPT.md", "Make the tests pass.\n")
    proc = project.cli(
        "run", "--session", session, "--prompt", "PROMPT.md", "--", sys.executable, str(agent), str(state)
    )
    assert proc.returncode == 0, proc.stderr
    return (project.home / "journals" / f"{session}.jsonl").read_bytes().split(b"\n")[:-1]


def row(project: Project, session: str) -> dict[str, object]:
    rows = project.cli(
        "sql", f"SELECT chain_broken, chain_break FROM sessions WHERE session_id = '{session}'", "--json"
    )
    assert rows.returncode == 0, rows.stderr
    found: list[dict[str, object]] = json.loads(rows.stdout)
    return found[0]


def test_a_journal_edited_by_hand_is_named_by_verify_and_marked_in_sessions(
    project: Project, tmp_path: Path
) -> None:
    lines = run_loop(project, tmp_path, "s1")
    assert all(json.loads(line)["prev"] for line in lines)  # every event written linked
    clean = project.cli("verify")
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout == f"verify: 1 session, {len(lines)} lines checked; every chain holds\n"
    assert row(project, "s1") == {"chain_broken": False, "chain_break": ""}
    listed = project.cli("sessions")
    assert listed.returncode == 0 and "chain_break" in listed.stdout

    # the second agent turn's output, changed by hand in place: the same length, so only the links show it
    turns = [i for i, line in enumerate(lines, 1) if json.loads(line)["type"] == "agent_turn"]
    edited = turns[1]
    lines[edited - 1] = lines[edited - 1].replace(b"worked on run 2", b"worked on run 9")
    (project.home / "journals" / "s1.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    broken = project.cli("verify")
    assert broken.returncode == 1
    assert broken.stdout == f"s1: line {edited}: edited (line {edited + 1} links to other text)\n"
    assert broken.stderr.strip() == "ralph-ledger: verify: 1 session of 1 with a broken hash chain"
    assert project.cli("verify", "s1").stdout == broken.stdout
    assert row(project, "s1") == {
        "chain_broken": True,
        "chain_break": f"line {edited}: edited (line {edited + 1} links to other text)",
    }
    shown = project.sessions()
    assert [r["chain_break"] for r in shown] == [
        f"line {edited}: edited (line {edited + 1} links to other text)"
    ]


def test_a_line_removed_before_the_ledger_read_it_is_found_by_the_ingest(
    project: Project, tmp_path: Path
) -> None:
    journal = project.home / "journals" / "s2.jsonl"
    lines = run_loop(project, tmp_path, "s2")
    del lines[3]  # seq 4, before any command read the journal
    journal.write_bytes(b"\n".join(lines) + b"\n")
    shown = project.cli("sessions", "--json")
    assert shown.returncode == 0
    assert (
        "ralph-ledger: journal s2.jsonl: hash chain broken at line 4: removed before it (1 line, seq 4)"
        in (shown.stderr)
    )
    assert row(project, "s2") == {
        "chain_broken": True,
        "chain_break": "line 4: removed before it (1 line, seq 4)",
    }
    verified = project.cli("verify", "s2")
    assert (verified.returncode, verified.stdout) == (1, "s2: line 4: removed before it (1 line, seq 4)\n")

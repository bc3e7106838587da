"""``ralph-ledger checkpoint list|show|resume|prune`` on a loop the runner recorded, as a user types it."""

from __future__ import annotations

import json

from tests.journeys.conftest import Project

AGENT = (
    "import os, sys\nsys.stdin.read()\n"
    "n = int(open('n').read()) if os.path.exists('n') else 0\nopen('n', 'w').write(str(n + 1))\n"
    "print('<promise>COMPLETE</promise>' if n >= 2 else 'working on it')\n"
)


def loop(project: Project) -> None:
    project.write("agent.py", AGENT)
    run = project.cli("run", "--session", "s1", "--", "python3", "agent.py", input="Write the parser\n")
    assert run.returncode == 0, run.stderr


def test_a_sessions_checkpoints_are_listed_shown_resumed_and_pruned(project: Project) -> None:
    loop(project)
    listed = json.loads(project.cli("checkpoint", "list", "s1", "--json").stdout)
    assert [(c["checkpoint_id"], c["iteration"]) for c in listed] == [
        ("s1-cp1", 1),
        ("s1-cp2", 2),
        ("s1-cp3", 3),
    ]
    table = project.cli("checkpoint", "list", "s1")
    assert table.returncode == 0 and "s1-cp2" in table.stdout and "(3 rows)" in table.stdout, table
    shown = json.loads(project.cli("checkpoint", "show", "s1", "s1-cp2", "--json").stdout)
    assert shown[0]["checkpoint_id"] == "s1-cp2" and shown[0]["agent_context"] == {}
    resumed = project.cli("checkpoint", "resume", "s1")
    assert resumed.returncode == 0, resumed
    assert resumed.stdout == (
        "s1-cp3 (iteration 3): Resume iteration 3 of 15 of Write the parser: last score 100, all rules "
        "passing. The session is complete: it takes no more iterations.\n"
    )
    older = json.loads(project.cli("checkpoint", "resume", "s1", "s1-cp1", "--json").stdout)[0]
    assert (older["checkpoint_id"], older["iteration"], older["status"]) == ("s1-cp1", 1, "complete")
    pruned = project.cli("checkpoint", "prune", "s1", "--keep", "0", "--json")
    assert pruned.returncode == 0 and json.loads(pruned.stdout) == [], pruned  # none past retention yet


def test_checkpoint_slips_are_one_line(project: Project) -> None:
    loop(project)
    for args, code, says in [
        (["checkpoint", "list", "nope"], 1, "no session 'nope' in"),
        (["checkpoint", "show", "s1", "s1-cp9"], 1, "no checkpoint 's1-cp9' in session 's1'"),
        (["checkpoint", "resume", "s1", "s1-cp9"], 1, "no checkpoint 's1-cp9'"),
        (["checkpoint", "prune", "s1", "--keep", "-1"], 2, "expected a number >= 0"),
        (["checkpoint", "lst", "s1"], 2, "invalid choice: 'lst'"),
        (["checkpoint"], 2, "required: ACTION"),
    ]:
        proc = project.cli(*args)
        assert proc.returncode == code and proc.stdout == "", (args, proc)
        assert len(proc.stderr.splitlines()) == 1 and says in proc.stderr, (args, proc.stderr)


def test_checkpoint_takes_the_home_before_or_after_its_action(project: Project) -> None:
    """``--home`` is taken wherever the other commands take it: before the command, after it, after the
    action."""
    loop(project)
    elsewhere = project.dir / "src"
    elsewhere.mkdir()
    home = str(project.home)
    for args in (
        ["--home", home, "checkpoint", "list", "s1", "--json"],
        ["checkpoint", "--home", home, "list", "s1", "--json"],
        ["checkpoint", "list", "s1", "--json", "--home", home],
    ):
        proc = project.cli(*args, cwd=elsewhere.parent.parent)
        assert proc.returncode == 0, (args, proc.stderr)
        assert [c["checkpoint_id"] for c in json.loads(proc.stdout)] == ["s1-cp1", "s1-cp2", "s1-cp3"]

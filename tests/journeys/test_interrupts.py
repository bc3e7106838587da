"""Ctrl-C at any moment of a command's life, from its first import on: one line, exit 130, never a
traceback, and the ledger released."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.journeys.conftest import Project, clean_env, script

SLOW = "SELECT count(*) FROM range(100000) a, range(100000) b WHERE a.range * b.range % 7 = 3"


def test_ctrl_c_at_any_moment_of_a_query_is_one_line(project: Project) -> None:
    project.write("agent.py", "import sys\nsys.stdin.read()\nprint('<promise>COMPLETE</promise>')\n")
    done = project.cli("run", "--session", "one", "--", sys.executable, "agent.py", input="go")
    assert done.returncode == 0, done.stderr  # a home with a session, and a ledger to open and ingest
    seen: list[str] = []
    for delay in [0.1 + 0.03 * i for i in range(12)]:  # while it loads, opens, ingests and queries
        proc = subprocess.Popen(
            [script("ralph-ledger"), "sql", SLOW], cwd=project.dir, env=clean_env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert "Traceback" not in err and "Exception" not in err, f"at {delay:.2f} s:\n{err}"
        assert proc.returncode in (130, 0), f"at {delay:.2f} s: exit {proc.returncode}\n{err}"
        if proc.returncode == 130:
            assert err == "ralph-ledger: interrupted\n", err
        seen.append(err)
    assert seen.count("ralph-ledger: interrupted\n") == len(seen)
    assert project.cli("ingest", "--wait", "0").returncode == 0  # the ledger was released

"""``ralph-ledger run`` end to end: the command run as a user runs it (a process, in a git work tree
with a ``ralph.toml``), a scripted agent program, real rule commands; to completion and into every
guard that applies to the loop runner (``max_stop_retries`` is about stop hooks and never applies)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import events as E
from ledger.storage.journal import Cursor, read_new
from tests.helpers import AGENT_PREAMBLE

NO_BREAKER = "[guards.circuit_breaker]\nenabled = false\n"
NO_STALL = "[guards.validation_stall]\nenabled = false\n"
PREAMBLE = (
    AGENT_PREAMBLE
    + """\
def flag(name, on=True):
    path = pathlib.Path(name + ".ok")
    path.touch() if on else path.unlink(missing_ok=True)
"""
)


def flag(name: str) -> str:
    """A ``ralph.toml`` command rule passing while ``<name>.ok`` exists in the work tree."""
    code = f"import os, sys; sys.exit(0 if os.path.exists('{name}.ok') else 1)"
    return f"[[rules]]\nname = {name!r}\ntype = 'command'\nargv = [{sys.executable!r}, '-c', {code!r}]\n"


class Project:
    """A git work tree with a ``ralph.toml`` and a scripted agent kept outside it."""

    def __init__(self, root: Path, config: str, agent: str) -> None:
        self.dir = root / "project"
        self.dir.mkdir()
        (self.dir / "ralph.toml").write_text(config)
        (self.dir / "PROMPT.md").write_text("Make the tests pass.\n")
        (self.dir / ".gitignore").write_text("*.ok\n")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run(["git", "init", "-q"], cwd=self.dir, check=True)
        subprocess.run([*git, "add", "-A"], cwd=self.dir, check=True)
        subprocess.run([*git, "commit", "-qm", "init"], cwd=self.dir, check=True)
        self.state = root / "state"
        self.state.mkdir()
        self.agent = root / "agent.py"
        self.agent.write_text(PREAMBLE + agent)
        self.home = root / "home"

    def run(self, *options: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "ledger.cli", "--home", str(self.home), "run", "--session", "s1"]
        argv += ["--prompt", "PROMPT.md", "--timeout", "60", *options, "--"]
        argv += [sys.executable, str(self.agent), str(self.state)]
        env = {k: v for k, v in os.environ.items() if k != "RALPH_HOME"}
        return subprocess.run(argv, cwd=self.dir, capture_output=True, text=True, timeout=120, env=env)

    def events(self) -> list[E.AnyEvent]:
        return read_new(self.home / "journals" / "s1.jsonl", Cursor()).events


def outcome(project: Project, code: int, signal: str, guard: str = "", *options: str) -> list[E.AnyEvent]:
    """Run the loop; it exits ``code`` with the last signal ``signal`` after tripping ``guard``."""
    proc = project.run(*options)
    assert proc.returncode == code, proc.stdout + proc.stderr
    evs = project.events()
    assert [e.signal for e in evs if isinstance(e, E.SignalResolved)][-1] == signal
    if guard:
        assert guard in [e.guard for e in evs if isinstance(e, E.GuardTripped | E.SessionEscalated)]
    end = {0: E.SessionCompleted, 3: E.SessionBlocked, 4: E.SessionEscalated}[code]
    assert isinstance(evs[-1], end)
    return evs


def test_completes_on_the_promise(tmp_path: Path) -> None:
    agent = 'print("iteration", n)\nif n >= 2: flag("tests")\n'
    agent += 'if n == 3: print("<promise>COMPLETE</promise>")\n'
    evs = outcome(Project(tmp_path, flag("tests"), agent), 0, "COMPLETE")
    assert [e.passed for e in evs if isinstance(e, E.ValidationRan)] == [False, True, True]
    assert isinstance(evs[-1], E.SessionCompleted) and evs[-1].total_iterations == 3


def test_blocked_promise(tmp_path: Path) -> None:
    agent = 'print("<promise>BLOCKED</promise>")\nprint("Reason: no database credentials")\n'
    evs = outcome(Project(tmp_path, flag("tests"), agent), 3, "BLOCKED")
    assert evs[-1].reason == "agent promised BLOCKED: no database credentials"  # type: ignore[union-attr]


def test_max_iterations(tmp_path: Path) -> None:
    project = Project(tmp_path, flag("tests") + NO_BREAKER + NO_STALL, 'print("still failing")\n')
    outcome(project, 4, "ESCALATE", "max_iterations", "--max-iterations", "3")


def test_circuit_breaker(tmp_path: Path) -> None:
    config = flag("tests") + "[guards.circuit_breaker]\nthreshold = 2\n"
    outcome(Project(tmp_path, config, 'print("trying")\n'), 4, "ESCALATE", "circuit_breaker")


def test_quality_regression(tmp_path: Path) -> None:
    config = flag("a") + flag("b") + flag("c") + NO_BREAKER + "[guards.quality_regression]\nmin_drop = 50\n"
    agent = 'for i, name in enumerate("abc"): flag(name, on=i >= n - 1)\n'
    evs = outcome(Project(tmp_path, config, agent), 4, "ESCALATE", "quality_regression")
    assert [e.score for e in evs if isinstance(e, E.ValidationRan)] == pytest.approx([100, 200 / 3, 100 / 3])


def test_thrashing(tmp_path: Path) -> None:
    config = flag("tests") + NO_BREAKER + NO_STALL + "[guards.thrashing]\nmin_iterations = 3\n"
    agent = 'pathlib.Path("app.py").write_text(f"x = {n}\\n")\n'
    evs = outcome(Project(tmp_path, config, agent), 3, "BLOCKED", "thrashing")
    assert [e.files_modified for e in evs if isinstance(e, E.AgentTurn)] == [["app.py"]] * 3


def test_validation_stall(tmp_path: Path) -> None:
    config = flag("a") + flag("b") + NO_BREAKER + "[guards.validation_stall]\nspan = 2\n"
    outcome(Project(tmp_path, config, 'flag("a")\n'), 4, "ESCALATE", "validation_stall")


def test_time_limit(tmp_path: Path) -> None:
    # the first iteration is quick (well inside the limit even on a loaded machine), the second not
    config = flag("tests") + NO_BREAKER + NO_STALL + "[guards.time_limit]\nseconds = 2.0\n"
    evs = outcome(Project(tmp_path, config, "if n >= 2: time.sleep(2.5)\n"), 3, "BLOCKED", "time_limit")
    assert len([e for e in evs if isinstance(e, E.ValidationRan)]) == 2


def test_token_budget_from_stream_json_output(tmp_path: Path) -> None:
    config = flag("tests") + NO_BREAKER + NO_STALL + "[guards.token_budget]\nenabled = true\ntokens = 1500\n"
    line = {
        "type": "assistant",
        "message": {"id": "m", "role": "assistant", "content": [], "usage": {"input_tokens": 900}},
    }
    agent = f"line = {json.dumps(line)!r}\nprint(line.replace('\"m\"', f'\"m{{n}}\"'))\n"
    evs = outcome(Project(tmp_path, config, agent), 4, "ESCALATE", "token_budget", "--agent-format", "claude")
    assert [e.tokens.input for e in evs if isinstance(e, E.AgentTurn)] == [900, 900]


def test_error_threshold(tmp_path: Path) -> None:
    broken = "[[rules]]\nname = 'lint'\ntype = 'command'\nargv = ['/nonexistent/linter']\n"
    config = broken + NO_BREAKER + NO_STALL + "[guards.error_threshold]\nlimit = 2\n"
    outcome(Project(tmp_path, config, 'print("hi")\n'), 4, "ESCALATE", "error_threshold")

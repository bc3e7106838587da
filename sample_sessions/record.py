"""Record the sample sessions: one journal per scenario, written by the real loop.

    .venv/bin/python sample_sessions/record.py           # (re)write sample_sessions/*.jsonl
    .venv/bin/python sample_sessions/record.py --check   # exit 1 if they differ from a fresh recording

Nothing in a sample is typed by hand. Each scenario runs the real runner
(``ledger.drivers.runner.run.run_loop`` with a real ``Engine``, in this process) or the real
Claude Code Stop hook (``ledger.drivers.claude_code.stop.hook.run``) against a scripted agent: a
Python program, run as a subprocess, that replays a plan of turns (files to
write, then what it prints). The agent works in a throwaway git repository
holding a tiny Python project (``calc.py``, ``tests/``, ``tools/``), and the
validation rules run real pytest there (``python tools/run_tests.py``, which
runs ``python -m pytest`` and prints its report without the timing).

Determinism: a fixed clock per scenario (a fixed start, +10 s per reading),
fake monotonic timers for the recorded durations (375 ms per rule, 8 s per agent
run), fixed session ids (the file names), a fixed git identity and date, git
and pytest isolated from the user's configuration, and no absolute path in
anything recorded (rules name ``python`` and relative paths; a shim on
``PATH`` points ``python`` at this interpreter). Recording twice gives
byte-identical files; ``tests/unit/test_samples.py`` checks the committed files
against a fresh recording.

Every scenario checks how its session ended (signal, iterations, the guard
that tripped and no other) and raises ``ScenarioError`` if it did not end as
intended. The Claude Code scenario replays a real transcript from ``tests/fixtures/claude-code``
(docs/development.md#real-claude-code-transcripts); without it, that scenario is skipped.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import difflib
import io
import json
import multiprocessing
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from ledger import events as ev
from ledger.core.home import Home, journals_in
from ledger.core.words import plural
from ledger.drivers.claude_code.stop import hook as stop_hook
from ledger.drivers.claude_code.stop.plugin import new_state, parse_loop_args, write_state
from ledger.drivers.claude_code.transcript.last_text import find_last_text
from ledger.drivers.runner.formats import named
from ledger.drivers.runner.run import RunResult, run_loop
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decide.guards import CircuitBreaker, GuardConfig, TimeLimit
from ledger.loop.decide.stop_policies import AgentContext, HookFn, HookResult
from ledger.loop.engine import Engine
from ledger.loop.steering import commands as steering
from ledger.storage.journal import Cursor, read_new

HERE: Final = Path(__file__).resolve().parent
SHARED_CLAUDE_CODE: Final = HERE.parent / "tests" / "fixtures" / "claude-code"
CLOCK_STEP: Final = timedelta(seconds=10)
RULE_SECONDS: Final = 0.375  # exact in binary, so durations are round numbers
AGENT_SECONDS: Final = 8.0
ITERATION_TIMEOUT_S: Final = 120.0

GIT_ENV: Final = {
    "GIT_AUTHOR_NAME": "Sample Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_AUTHOR_DATE": "2026-04-01T08:00:00Z",
    "GIT_COMMITTER_NAME": "Sample Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_COMMITTER_DATE": "2026-04-01T08:00:00Z",
}
# Applied to this process while recording (and so to git, the agents and the rules).
ISOLATED_ENV: Final = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class ScenarioError(Exception):
    """A scenario did not end the way it is meant to (or recorded something it must not)."""


# =============================================================================== the project
# The throwaway repository every scenario starts from (its initial commit).

CALC = '''\
"""A tiny calculator library: arithmetic, money amounts and statistics."""

from __future__ import annotations


def add(a: float, b: float) -> float:
    """Return a + b."""
    return a + b


def sub(a: float, b: float) -> float:
    """Return a - b."""
    return a - b


def mul(a: float, b: float) -> float:
    """Return a * b."""
    return a * b


def parse_amount(text: str) -> float:
    """Parse an amount such as "1,234.50" or "-3.25"."""
    return float(text.replace(",", "").strip())


def format_amount(value: float) -> str:
    """Format an amount with thousands separators and two decimals."""
    return f"{value:,.2f}"


def mean(values: list[float]) -> float:
    """Return the arithmetic mean of a non-empty list."""
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)
'''

TEST_ARITH = '''\
"""Arithmetic."""

import calc


def test_add() -> None:
    assert calc.add(2, 3) == 5


def test_sub() -> None:
    assert calc.sub(2, 3) == -1


def test_mul() -> None:
    assert calc.mul(4, 2.5) == 10
'''

TEST_PARSE = '''\
"""Parsing amounts."""

import calc


def test_parse_plain() -> None:
    assert calc.parse_amount("42") == 42


def test_parse_thousands() -> None:
    assert calc.parse_amount("1,234.50") == 1234.5


def test_parse_negative() -> None:
    assert calc.parse_amount("-3.25") == -3.25
'''

TEST_FORMAT = '''\
"""Formatting amounts."""

import calc


def test_format_thousands() -> None:
    assert calc.format_amount(1234.5) == "1,234.50"


def test_format_negative() -> None:
    assert calc.format_amount(-0.5) == "-0.50"
'''

TEST_STATS = '''\
"""Statistics."""

import pytest

import calc


def test_mean() -> None:
    assert calc.mean([1, 2, 3, 4]) == 2.5


def test_mean_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        calc.mean([])
'''

RUN_TESTS = '''\
"""Run the test suite with pytest and print a stable report: no timings, no memory addresses,
no absolute paths, so that two runs of the same code print the same thing."""

import os
import re
import subprocess
import sys

env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0", PY_COLORS="0", COLUMNS="80")
env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
env.pop("PYTEST_ADDOPTS", None)
args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", *sys.argv[1:]]
proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
report = (proc.stdout + proc.stderr).replace(os.getcwd() + os.sep, "").rstrip()
report = re.sub(r" at 0x[0-9a-f]+>", ">", report)
print(re.sub(r" in [0-9.]+s( \\([0-9:]+\\))?$", "", report, flags=re.MULTILINE))
sys.exit(proc.returncode)
'''

LINT = '''\
"""House rules: every function has type annotations and a docstring."""

import ast
import sys
from pathlib import Path

problems = []
for name in sys.argv[1:]:
    for node in ast.walk(ast.parse(Path(name).read_text(encoding="utf-8"), name)):
        if isinstance(node, ast.FunctionDef):
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if node.returns is None or any(a.annotation is None for a in args):
                problems.append(f"{name}:{node.lineno}: {node.name}() is missing type annotations")
            if ast.get_docstring(node) is None:
                problems.append(f"{name}:{node.lineno}: {node.name}() has no docstring")
print("\\n".join(problems) if problems else f"{len(sys.argv) - 1} file(s) clean")
sys.exit(1 if problems else 0)
'''

PROJECT: Final[Mapping[str, str]] = {
    ".gitignore": "__pycache__/\n",
    "pyproject.toml": (
        '[project]\nname = "calc"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    ),
    "calc.py": CALC,
    "tests/test_arith.py": TEST_ARITH,
    "tests/test_parse.py": TEST_PARSE,
    "tests/test_format.py": TEST_FORMAT,
    "tests/test_stats.py": TEST_STATS,
    "tools/run_tests.py": RUN_TESTS,
    "tools/lint.py": LINT,
}

# Validation rules. They name `python` (found on PATH) and relative paths only, so the recorded
# configuration carries no absolute path.
TESTS_PASS: Final = {
    "name": "tests_pass",
    "type": "command",
    "argv": ["python", "tools/run_tests.py"],
    "timeout_s": 120,
}
LINT_CLEAN: Final = {
    "name": "lint_clean",
    "type": "command",
    "argv": ["python", "tools/lint.py", "calc.py"],
    "timeout_s": 60,
}


def suite(name: str) -> dict[str, Any]:
    """A rule running one test module, ``tests/test_<name>.py``."""
    return {
        "name": f"tests_{name}",
        "type": "command",
        "argv": ["python", "tools/run_tests.py", f"tests/test_{name}.py"],
        "timeout_s": 120,
    }


def edit(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` (which must occur exactly once) replaced by ``new``."""
    if text.count(old) != 1:
        raise ScenarioError(f"edit: {old!r} occurs {text.count(old)} times, expected once")
    return text.replace(old, new)


# =============================================================================== the agent
AGENT_PROGRAM = '''\
"""A scripted agent: run N plays turn N of its plan (the files it writes, then its output)."""

import json
import pathlib
import sys

plan = json.loads(pathlib.Path(sys.argv[1]).read_text(encoding="utf-8"))
counter = pathlib.Path(sys.argv[2])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
sys.stdin.read()  # the prompt: this agent follows its plan whatever it is told
turn = plan[min(n, len(plan)) - 1]
for name, text in turn["write"].items():
    path = pathlib.Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
sys.stdout.write(turn["output"])
'''


@dataclass(frozen=True)
class Turn:
    """One turn of a scripted agent: what it prints, and the files it writes first (path -> text)."""

    output: str
    write: Mapping[str, str] = field(default_factory=dict)


# =============================================================================== determinism
def ticking(start: datetime, step: timedelta = CLOCK_STEP) -> Callable[[], datetime]:
    """A clock that reads ``start``, then ``step`` later on every further call."""
    ticks = iter(range(1_000_000))
    return lambda: start + step * next(ticks)


def stepping(step: float) -> Callable[[], float]:
    """A fake monotonic timer (seconds) that advances ``step`` on every call: each measured
    duration (two calls) is exactly ``step``."""
    ticks = iter(range(1_000_000))
    return lambda: 100.0 + step * next(ticks)


@contextlib.contextmanager
def isolated_env(bin_dir: Path) -> Iterator[None]:
    """Put ``bin_dir`` first on PATH and isolate git and Python from the user; restore after."""
    saved = dict(os.environ)
    try:
        os.environ.update(ISOLATED_ENV)
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        # pytest reports more (untruncated assertion diffs) when it sees CI or BUILD_NUMBER.
        for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "PYTEST_ADDOPTS", "CI", "BUILD_NUMBER"):
            os.environ.pop(name, None)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@dataclass
class Sandbox:
    """A scenario's scratch space: the ledger home, the project repository, the agent's state."""

    root: Path

    @property
    def home(self) -> Home:
        """The ledger home the scenario records into."""
        return Home.resolve(self.root / "home")

    @property
    def repo(self) -> Path:
        """The project the agent works in (a git repository)."""
        return self.root / "repo"

    @property
    def agent_dir(self) -> Path:
        """The agent's program, plan and run counter (outside the repository)."""
        return self.root / "agent"

    def journal(self, session_id: str) -> Path:
        """The journal file of ``session_id``."""
        return self.home.journals / f"{session_id}.jsonl"


def git(repo: Path, *args: str) -> None:
    """Run git in ``repo`` with the fixed identity and date."""
    subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True, capture_output=True)


def make_repo(sb: Sandbox, changes: Mapping[str, str]) -> None:
    """The project (``PROJECT`` with ``changes``) as the initial commit of a new repository."""
    sb.repo.mkdir(parents=True)
    for name, text in {**PROJECT, **changes}.items():
        path = sb.repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    git(sb.repo, "init", "-q", "-b", "main")
    git(sb.repo, "add", "-A")
    git(sb.repo, "commit", "-q", "-m", "Initial commit")


def agent_command(sb: Sandbox, turns: Sequence[Turn]) -> list[str]:
    """The command running a scripted agent that plays ``turns``."""
    sb.agent_dir.mkdir(parents=True)
    program = sb.agent_dir / "agent.py"
    program.write_text(AGENT_PROGRAM, encoding="utf-8")
    plan = [{"output": t.output, "write": dict(t.write)} for t in turns]
    (sb.agent_dir / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    # relative to the repository (the agent's work dir) and through the python shim: the recorded
    # command names no path of the sandbox
    rel = Path(os.path.relpath(sb.agent_dir, sb.repo))
    return ["python", str(rel / program.name), str(rel / "plan.json"), str(rel / "count")]


class Terminal(io.StringIO):
    """The loop's terminal. ``watch`` maps a text to an action run once, as soon as the output
    shows it (a human watching the loop)."""

    def __init__(self, watch: Mapping[str, Callable[[], None]] | None = None, echo: bool = False) -> None:
        super().__init__()
        self.watch = dict(watch or {})
        self.echo = echo

    def write(self, s: str) -> int:
        """Keep ``s``, echo it if asked, then run the actions whose text has now appeared."""
        n = super().write(s)
        if self.echo:
            sys.stderr.write(s)
        for text in [t for t in self.watch if t in self.getvalue()]:
            self.watch.pop(text)()
        return n


@dataclass
class Run:
    """One recorded loop: the engine it ran with and how it ended."""

    engine: Engine
    result: RunResult


def run(
    sb: Sandbox,
    session_id: str,
    *,
    start: datetime,
    config: LoopConfig,
    prompt: str,
    turns: Sequence[Turn],
    repo: Mapping[str, str] | None = None,
    custom_hooks: Callable[[Sandbox], dict[str, HookFn]] | None = None,
    watch: Callable[[Engine], Mapping[str, Callable[[], None]]] | None = None,
    echo: bool = False,
    agent_format: str | None = None,
) -> Run:
    """Run the real loop: a repository, an engine with a fixed clock and timer, the scripted agent."""
    make_repo(sb, repo or {})
    sb.home.ensure()
    engine = Engine(
        sb.home,
        work_dir=sb.repo,
        clock=ticking(start),
        fsync=False,
        custom_hooks=custom_hooks(sb) if custom_hooks else None,
        timer=stepping(RULE_SECONDS),
    )
    out = Terminal(watch(engine) if watch else None, echo=echo)
    result = run_loop(
        engine,
        session_id,
        config,
        agent_command(sb, turns),
        prompt,
        iteration_timeout_s=ITERATION_TIMEOUT_S,
        out=out,
        timer=stepping(AGENT_SECONDS),
        agent_format=named(agent_format) if agent_format else None,
    )
    return Run(engine, result)


# =============================================================================== expectations
def events_of(path: Path) -> list[ev.AnyEvent]:
    """The events of a journal."""
    return read_new(path, Cursor()).events


def tag(e: ev.Event) -> str:
    """An event's type tag."""
    return str(e.__struct_config__.tag)


def expect(
    sb: Sandbox,
    session_id: str,
    *,
    ends_with: str,
    iterations: int,
    guard: str | None = None,
    reason: str = "",
    result: RunResult | None = None,
    exit_code: int | None = None,
) -> bytes:
    """Check how the session ended (its last event, iterations, the one guard that tripped, the
    resolution's reason) and return its journal; raise ``ScenarioError`` otherwise."""
    path = sb.journal(session_id)
    events = events_of(path)
    problems: list[str] = []
    last = tag(events[-1]) if events else "(nothing)"
    if last != ends_with:
        problems.append(f"ends with {last}, expected {ends_with}")
    seen = max((e.iteration for e in events), default=0)
    if seen != iterations:
        problems.append(f"ran {plural(seen, 'iteration')}, expected {iterations}")
    trips = [e.guard for e in events if isinstance(e, ev.GuardTripped)]
    if trips != ([guard] if guard else []):
        problems.append(f"guards tripped: {trips}, expected {[guard] if guard else []}")
    if result is not None:
        if reason and reason not in result.reason:
            problems.append(f"ended with {result.reason!r}, expected it to mention {reason!r}")
        if exit_code is not None and result.exit_code != exit_code:
            problems.append(f"exit code {result.exit_code}, expected {exit_code}")
    if problems:
        raise ScenarioError(f"{session_id}: " + "; ".join(problems))
    return path.read_bytes()


# =============================================================================== scenarios
T0: Final = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)


def at(hour: int, minute: int = 0) -> datetime:
    """A start time on the samples' day."""
    return T0.replace(hour=hour, minute=minute)


def tdd_success(sb: Sandbox, echo: bool) -> bytes:
    """Seed 000 §12.1: a failing test, then the implementation, then lint fixed and COMPLETE."""
    test = '''\
"""Division."""

import pytest

import calc


def test_divide() -> None:
    assert calc.divide(7, 2) == 3.5


def test_divide_by_zero_is_an_error() -> None:
    with pytest.raises(ZeroDivisionError, match="cannot divide 7 by zero"):
        calc.divide(7, 0)
'''
    untyped = (
        CALC
        + '''

def divide(a, b):
    """Return a / b; dividing by zero raises ZeroDivisionError with a clear message."""
    if b == 0:
        raise ZeroDivisionError(f"cannot divide {a} by zero")
    return a / b
'''
    )
    typed = edit(untyped, "def divide(a, b):", "def divide(a: float, b: float) -> float:")
    turns = [
        Turn(
            "Wrote tests/test_divide.py first (red phase):\n"
            "- test_divide: calc.divide(7, 2) == 3.5\n"
            "- test_divide_by_zero_is_an_error: a ZeroDivisionError that names the dividend\n"
            "Both fail until calc.divide exists.\n",
            write={"tests/test_divide.py": test},
        ),
        Turn(
            "Implemented calc.divide(a, b) with a clear error for b == 0.\n"
            "The two new tests pass; the rest of the suite still passes.\n",
            write={"calc.py": untyped},
        ),
        Turn(
            "Added the missing type annotations to calc.divide (lint_clean).\n"
            "Implementation complete. All tests passing, lint clean.\n\n"
            "<promise>COMPLETE</promise>\n",
            write={"calc.py": typed},
        ),
    ]
    config = LoopConfig(
        task="Add calc.divide(a, b) with TDD; dividing by zero raises a clear ZeroDivisionError",
        agent="me",
        hooks=["default"],
        rules=[TESTS_PASS, LINT_CLEAN],
    )
    prompt = "Add calc.divide(a, b) test-first. Emit <promise>COMPLETE</promise> when done.\n"
    r = run(sb, "tdd-success", start=at(9), config=config, prompt=prompt, turns=turns, echo=echo)
    return expect(
        sb, "tdd-success", ends_with="session_completed", iterations=3, result=r.result, exit_code=0
    )


HALF_UP_TEST = (
    TEST_FORMAT
    + """

def test_format_rounds_half_up() -> None:
    assert calc.format_amount(2.675) == "2.68"
"""
)
FORMAT_LINE = '    return f"{value:,.2f}"\n'


def circuit_breaker(sb: Sandbox, echo: bool) -> bytes:
    """Three failed validations in a row: the circuit breaker escalates."""
    turns = [
        Turn(
            "format_amount now rounds with round(value, 2) before formatting,\n"
            "which should take care of the half-up case.\n",
            write={"calc.py": edit(CALC, FORMAT_LINE, '    return f"{round(value, 2):,.2f}"\n')},
        ),
        Turn(
            "round() uses banker's rounding; nudging the value by half a cent instead.\n",
            write={"calc.py": edit(CALC, FORMAT_LINE, '    return f"{value + 0.005:,.2f}"\n')},
        ),
        Turn(
            "Switched to Decimal(value).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP).\n",
            write={
                "calc.py": edit(
                    edit(
                        CALC,
                        FORMAT_LINE,
                        '    amount = Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)\n'
                        '    return f"{amount:,.2f}"\n',
                    ),
                    "from __future__ import annotations\n",
                    "from __future__ import annotations\n\nfrom decimal import ROUND_HALF_UP, Decimal\n",
                )
            },
        ),
    ]
    config = LoopConfig(
        task="format_amount must round half up: 2.675 -> 2.68",
        agent="me",
        hooks=["default"],
        rules=[TESTS_PASS],
    )
    prompt = "Make tests/test_format.py::test_format_rounds_half_up pass.\n"
    r = run(
        sb,
        "circuit-breaker",
        start=at(9, 30),
        config=config,
        prompt=prompt,
        turns=turns,
        repo={"tests/test_format.py": HALF_UP_TEST},
        echo=echo,
    )
    return expect(
        sb,
        "circuit-breaker",
        ends_with="session_escalated",
        iterations=3,
        guard="circuit_breaker",
        reason="Circuit breaker tripped after 3 consecutive failures",
        result=r.result,
        exit_code=4,
    )


PARSE_LINE = '    return float(text.replace(",", "").strip())\n'


def quality_regression(sb: Sandbox, echo: bool) -> bytes:
    """A refactoring that breaks a little more each iteration: scores 100, 75, 50."""
    helper = edit(
        CALC,
        PARSE_LINE,
        "    return float(_clean(text))\n\n\n"
        "def _clean(text: str) -> str:\n"
        '    """The amount without thousands separators or surrounding spaces."""\n'
        '    return text.replace(",", "").strip()\n',
    )
    regex = edit(
        edit(
            helper, '    return text.replace(",", "").strip()\n', '    return re.sub(r"[^0-9.]", "", text)\n'
        ),
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nimport re\n",
    )
    cents = edit(
        regex,
        FORMAT_LINE,
        '    whole, cents = divmod(round(abs(value) * 100), 100)\n    return f"{whole:,}.{cents:02d}"\n',
    )
    turns = [
        Turn(
            "Extracted a _clean() helper out of parse_amount. No behaviour change;\nall four suites pass.\n",
            write={"calc.py": helper},
        ),
        Turn(
            "Simplified _clean() to a single regex that keeps only digits and the\ndecimal point.\n",
            write={"calc.py": regex},
        ),
        Turn(
            "Rewrote format_amount with integer cents instead of the format\n"
            "mini-language: easier to follow.\n",
            write={"calc.py": cents},
        ),
    ]
    config = LoopConfig(
        task="Refactor calc.py for readability without changing its behaviour",
        agent="me",
        rules=[suite("arith"), suite("parse"), suite("format"), suite("stats")],
    )
    prompt = "Refactor calc.py for readability. Emit <promise>COMPLETE</promise> when you are done.\n"
    r = run(sb, "quality-regression", start=at(10), config=config, prompt=prompt, turns=turns, echo=echo)
    return expect(
        sb,
        "quality-regression",
        ends_with="session_escalated",
        iterations=3,
        guard="quality_regression",
        reason="validation score fell 100 -> 50",
        result=r.result,
        exit_code=4,
    )


def thrashing(sb: Sandbox, echo: bool) -> bytes:
    """The agent rewrites calc.py every iteration, back and forth, and never declares it done."""
    str_format = edit(CALC, FORMAT_LINE, '    return "{:,.2f}".format(value)\n')
    builtin = edit(CALC, FORMAT_LINE, '    return format(value, ",.2f")\n')
    turns = [
        Turn(
            "Switched format_amount to str.format, like the rest of our code base.\n",
            write={"calc.py": str_format},
        ),
        Turn(
            "On reflection the format() builtin reads better; using it instead.\n", write={"calc.py": builtin}
        ),
        Turn(
            "str.format is more explicit about the template after all; back to it.\n",
            write={"calc.py": str_format},
        ),
        Turn("format() is shorter; using it again. Tests pass.\n", write={"calc.py": builtin}),
        Turn("Going back to str.format for consistency.\n", write={"calc.py": str_format}),
    ]
    config = LoopConfig(task="Make format_amount idiomatic", agent="me", rules=[TESTS_PASS])
    prompt = "Make calc.format_amount idiomatic. Emit <promise>COMPLETE</promise> when you are satisfied.\n"
    r = run(sb, "thrashing", start=at(10, 30), config=config, prompt=prompt, turns=turns, echo=echo)
    return expect(
        sb,
        "thrashing",
        ends_with="session_blocked",
        iterations=5,
        guard="thrashing",
        reason="calc.py (5 iterations)",
        result=r.result,
        exit_code=3,
    )


def blocked(sb: Sandbox, echo: bool) -> bytes:
    """The agent meets a decision it must not take alone and emits BLOCKED with a reason."""
    european = (
        TEST_PARSE
        + """

def test_parse_european() -> None:
    assert calc.parse_amount("1.234,50") == 1234.5
"""
    )
    turns = [
        Turn(
            "Added test_parse_european and made parse_amount read ',' as the decimal\n"
            "separator. Now test_parse_thousands and test_parse_negative fail.\n",
            write={
                "tests/test_parse.py": european,
                "calc.py": edit(
                    CALC, PARSE_LINE, '    return float(text.replace(".", "").replace(",", ".").strip())\n'
                ),
            },
        ),
        Turn(
            'The formats are ambiguous: "1,234" is 1234 in the US and 1.234 in Germany,\n'
            "and the existing tests require the US reading. I reverted calc.py; the new\n"
            "European test stays and fails.\n\n"
            "<promise>BLOCKED</promise>\n"
            "Reason: Needs a product decision: which locale does parse_amount assume,\n"
            "or should it take a locale argument?\n\n"
            "Summary: US amounts work; European amounts need an API change.\n",
            write={"calc.py": CALC},
        ),
    ]
    config = LoopConfig(
        task="Make parse_amount accept European amounts such as 1.234,50",
        agent="me",
        hooks=["default"],
        rules=[TESTS_PASS],
    )
    prompt = "parse_amount must also accept European amounts such as '1.234,50'.\n"
    r = run(sb, "blocked", start=at(11), config=config, prompt=prompt, turns=turns, echo=echo)
    return expect(
        sb,
        "blocked",
        ends_with="session_blocked",
        iterations=2,
        reason="agent promised BLOCKED",
        result=r.result,
        exit_code=3,
    )


def max_iterations(sb: Sandbox, echo: bool) -> bytes:
    """A documentation loop that keeps polishing and never promises: the iteration limit escalates."""
    intro = "# calc API\n\nEvery public function of `calc.py`, with an example.\n"
    sections = {
        "add": "## add(a, b)\n\nReturns a + b.\n",
        "sub": "## sub(a, b)\n\nReturns a - b.\n",
        "mul": "## mul(a, b)\n\nReturns a * b.\n",
        "parse_amount": '## parse_amount(text)\n\nParses "1,234.50" or "-3.25".\n',
        "format_amount": "## format_amount(value)\n\nTwo decimals, thousands separators.\n",
        "mean": "## mean(values)\n\nThe arithmetic mean; an empty list is an error.\n",
    }

    def doc(*names: str, examples: bool = False) -> str:
        parts = [intro, *(sections[n] for n in names)]
        text = "\n".join(parts)
        return text + ("\n## Examples\n\n    >>> calc.add(2, 3)\n    5\n" if examples else "")

    turns = [
        Turn("Started docs/api.md: add and sub.\n", write={"docs/api.md": doc("add", "sub")}),
        Turn(
            "Documented mul and parse_amount.\n",
            write={"docs/api.md": doc("add", "sub", "mul", "parse_amount")},
        ),
        Turn(
            "Documented format_amount and mean: every function has a section.\nExamples are still missing.\n",
            write={"docs/api.md": doc(*sections)},
        ),
        Turn(
            "Added an examples section; I still want to double-check the rounding\n"
            "notes for format_amount before calling it done.\n",
            write={"docs/api.md": doc(*sections, examples=True)},
        ),
    ]
    config = LoopConfig(
        task="Document every public function of calc.py in docs/api.md",
        agent="doc",
        max_iterations=4,
        rules=[TESTS_PASS, {"name": "api_docs", "type": "file_exists", "path": "docs/api.md"}],
    )
    prompt = "Document calc.py in docs/api.md. Emit <promise>COMPLETE</promise> when it is complete.\n"
    r = run(sb, "max-iterations", start=at(11, 30), config=config, prompt=prompt, turns=turns, echo=echo)
    return expect(
        sb,
        "max-iterations",
        ends_with="session_escalated",
        iterations=4,
        guard="max_iterations",
        reason="Max iterations (4) reached without completion",
        result=r.result,
        exit_code=4,
    )


def validation_stall(sb: Sandbox, echo: bool) -> bytes:
    """Four attempts at one failing test, the score stuck at 50: the stall guard escalates."""
    accounting = (
        TEST_PARSE
        + """

def test_parse_accounting_negative() -> None:
    assert calc.parse_amount("(1,234.50)") == -1234.5
"""
    )

    def parse(body: str, imports_re: bool = False) -> str:
        text = edit(CALC, PARSE_LINE, body)
        if imports_re:
            text = edit(
                text,
                "from __future__ import annotations\n",
                "from __future__ import annotations\n\nimport re\n",
            )
        return text

    turns = [
        Turn(
            "Strip the parentheses before parsing.\n",
            write={"calc.py": parse('    return float(text.replace(",", "").strip().strip("()"))\n')},
        ),
        Turn(
            "Negate amounts written in parentheses.\n",
            write={
                "calc.py": parse(
                    '    if text.startswith("("):\n'
                    "        return -float(text[1:-1])\n"
                    '    return float(text.replace(",", "").strip())\n'
                )
            },
        ),
        Turn(
            "Match accounting negatives with a regular expression.\n",
            write={
                "calc.py": parse(
                    '    match = re.fullmatch(r"\\(([0-9.]+)\\)", text.strip())\n'
                    "    if match:\n"
                    "        return -float(match.group(1))\n"
                    '    return float(text.replace(",", "").strip())\n',
                    imports_re=True,
                )
            },
        ),
        Turn(
            "The pattern now allows thousands separators.\n",
            write={
                "calc.py": parse(
                    '    match = re.fullmatch(r"\\(([0-9,.]+)\\)", text.strip())\n'
                    "    if match:\n"
                    "        return -float(match.group(1))\n"
                    '    return float(text.replace(",", "").strip())\n',
                    imports_re=True,
                )
            },
        ),
    ]
    config = LoopConfig(
        task="parse_amount must read accounting negatives: (1,234.50) is -1234.50",
        agent="me",
        hooks=["default"],
        rules=[suite("parse"), suite("format")],
        guards=GuardConfig(circuit_breaker=CircuitBreaker(threshold=5)),
    )
    prompt = "Make parse_amount read accounting negatives such as '(1,234.50)'.\n"
    r = run(
        sb,
        "validation-stall",
        start=at(12),
        config=config,
        prompt=prompt,
        turns=turns,
        repo={"tests/test_parse.py": accounting},
        echo=echo,
    )
    return expect(
        sb,
        "validation-stall",
        ends_with="session_escalated",
        iterations=4,
        guard="validation_stall",
        reason="no progress for 3 iterations (score 50, best 50)",
        result=r.result,
        exit_code=4,
    )


def time_limit(sb: Sandbox, echo: bool) -> bytes:
    """A loop with a 4-minute budget: the clock runs past it in the fourth iteration."""
    median_test = '''\
"""Median and mode."""

import calc


def test_median_odd() -> None:
    assert calc.median([3, 1, 2]) == 2


def test_median_even() -> None:
    assert calc.median([4, 1, 3, 2]) == 2.5
'''
    mode_test = (
        median_test
        + """

def test_mode() -> None:
    assert calc.mode([1, 2, 2, 3]) == 2


def test_mode_ties_take_the_smallest() -> None:
    assert calc.mode([3, 3, 1, 1]) == 1
"""
    )
    median = (
        CALC
        + '''

def median(values: list[float]) -> float:
    """Return the median of a non-empty list."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
'''
    )
    mode = (
        median
        + '''

def mode(values: list[float]) -> float:
    """Return the most common value."""
    return max(values, key=values.count)
'''
    )
    turns = [
        Turn("Wrote tests for median (failing).\n", write={"tests/test_median.py": median_test}),
        Turn("Implemented median; its tests pass.\n", write={"calc.py": median}),
        Turn("Wrote tests for mode (failing).\n", write={"tests/test_median.py": mode_test}),
        Turn(
            "Implemented mode with max(values, key=values.count); the tie-breaking\ntest still fails.\n",
            write={"calc.py": mode},
        ),
    ]
    config = LoopConfig(
        task="Add calc.median and calc.mode with tests",
        agent="me",
        hooks=["promise"],
        rules=[TESTS_PASS, LINT_CLEAN],
        guards=GuardConfig(time_limit=TimeLimit(seconds=240)),
    )
    prompt = "Add calc.median and calc.mode, test-first. Emit <promise>COMPLETE</promise> when both work.\n"
    r = run(sb, "time-limit", start=at(12, 30), config=config, prompt=prompt, turns=turns, echo=echo)
    return expect(
        sb,
        "time-limit",
        ends_with="session_blocked",
        iterations=4,
        guard="time_limit",
        reason="over the 240 s limit",
        result=r.result,
        exit_code=3,
    )


STATUS_FILE: Final = ".agent/status.json"


def status_file_hook(sb: Sandbox) -> dict[str, HookFn]:
    """A custom stop hook that reads the status file the agent keeps (``.agent/status.json``):
    phase ``done`` completes, any other phase continues with the file's ``next`` as the prompt."""
    path = sb.repo / STATUS_FILE

    def hook(ctx: AgentContext) -> HookResult:
        try:
            status = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{STATUS_FILE}: {exc}") from None
        if status["phase"] == "done":
            return HookResult("complete", f"{STATUS_FILE} says the task is done")
        return HookResult("continue", f"{STATUS_FILE}: phase {status['phase']}", next_prompt=status["next"])

    return {"status-file": hook}


def hook_failure(sb: Sandbox, echo: bool) -> bytes:
    """Seed 001: a registered hook raises (the agent wrote its status file half-way), so the
    loop escalates with "Hook evaluation failed"."""
    median_test = '''\
"""Median."""

import calc


def test_median() -> None:
    assert calc.median([3, 1, 2]) == 2
'''
    median = (
        CALC
        + '''

def median(values: list[float]) -> float:
    """Return the median of a non-empty list (the lower middle value for an even count)."""
    return sorted(values)[(len(values) - 1) // 2]
'''
    )
    red = {"phase": "red", "next": "Implement calc.median so that tests/test_median.py passes."}
    turns = [
        Turn(
            "Wrote tests/test_median.py (failing) and recorded the next step in\n.agent/status.json.\n",
            write={"tests/test_median.py": median_test, STATUS_FILE: json.dumps(red) + "\n"},
        ),
        Turn(
            "Implemented calc.median; tests pass. Updating .agent/status.json...\n",
            write={"calc.py": median, STATUS_FILE: '{"phase": "green", "next": "Document calc.med'},
        ),
    ]
    config = LoopConfig(
        task="Add calc.median; keep .agent/status.json up to date for the loop",
        agent="me",
        hooks=["promise"],
        rules=[TESTS_PASS],
    )
    prompt = (
        "Add calc.median with a test. After each step write .agent/status.json as\n"
        '{"phase": "red" | "green" | "done", "next": "<the next step>"}.\n'
    )
    r = run(
        sb,
        "hook-failure",
        start=at(13),
        config=config,
        prompt=prompt,
        turns=turns,
        custom_hooks=status_file_hook,
        echo=echo,
    )
    return expect(
        sb,
        "hook-failure",
        ends_with="session_escalated",
        iterations=2,
        reason="Hook evaluation failed: .agent/status.json: Unterminated string",
        result=r.result,
        exit_code=4,
    )


NEW_TEST = "\n\ndef test_{}() -> None:\n    assert {}\n"


def loop_done(sb: Sandbox, echo: bool) -> bytes:
    """Seed 004's vocabulary: LOOP_CONTINUE while issues remain, LOOP_DONE when none do."""
    issues = [
        'parse_amount accepts a leading dollar sign: "$1,234.50"',
        "format_amount takes an optional currency prefix",
        "mean accepts any iterable, not only lists",
    ]

    def issue_list(done: int) -> str:
        lines = [f"- [{'x' if i < done else ' '}] {i + 1}. {text}" for i, text in enumerate(issues)]
        return "# Issues\n\n" + "\n".join(lines) + "\n"

    dollar = edit(CALC, PARSE_LINE, '    return float(text.replace(",", "").strip().removeprefix("$"))\n')
    prefix = edit(
        edit(
            dollar,
            "def format_amount(value: float) -> str:",
            'def format_amount(value: float, currency: str = "") -> str:',
        ),
        FORMAT_LINE,
        '    return f"{currency}{value:,.2f}"\n',
    )
    iterable = edit(
        edit(
            prefix,
            "def mean(values: list[float]) -> float:",
            "def mean(values: Iterable[float]) -> float:",
        ),
        "    if not values:\n",
        "    values = list(values)\n    if not values:\n",
    )
    iterable = edit(
        iterable,
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nfrom collections.abc import Iterable\n",
    )
    tests = {
        1: TEST_PARSE + NEW_TEST.format("parse_dollars", 'calc.parse_amount("$1,234.50") == 1234.5'),
        2: TEST_FORMAT + NEW_TEST.format("format_currency", 'calc.format_amount(3, currency="$") == "$3.00"'),
        3: TEST_STATS + NEW_TEST.format("mean_of_a_generator", "calc.mean(x for x in (1, 2, 3)) == 2"),
    }

    def context(done: int, reason: str) -> str:
        return (
            f"<context>\n  iterations: {done}\n  issues_completed: {done}\n"
            f'  remaining: {len(issues) - done}\n  reason: "{reason}"\n</context>\n'
        )

    turns = [
        Turn(
            "Issue 1 done: parse_amount strips a leading '$'.\n\n<promise>LOOP_CONTINUE</promise>\n"
            + context(1, "Issue 1 completed; 2 issues remain."),
            write={"calc.py": dollar, "tests/test_parse.py": tests[1], "ISSUES.md": issue_list(1)},
        ),
        Turn(
            'Issue 2 done: format_amount(value, currency="$").\n\n<promise>LOOP_CONTINUE</promise>\n'
            + context(2, "Issue 2 completed; 1 issue remains."),
            write={"calc.py": prefix, "tests/test_format.py": tests[2], "ISSUES.md": issue_list(2)},
        ),
        Turn(
            "Issue 3 done: mean takes any iterable.\n\n<promise>LOOP_DONE</promise>\n"
            + context(3, "All proposed issues completed."),
            write={"calc.py": iterable, "tests/test_stats.py": tests[3], "ISSUES.md": issue_list(3)},
        ),
    ]
    config = LoopConfig(
        task="Work through ISSUES.md, one issue per iteration", agent="me", rules=[TESTS_PASS]
    )
    prompt = (
        "Take the next open issue in ISSUES.md, fix it with a test and tick it off. End with\n"
        "<promise>LOOP_CONTINUE</promise> while issues remain, <promise>LOOP_DONE</promise>\n"
        "when none do, followed by a <context> block.\n"
    )
    r = run(
        sb,
        "loop-done",
        start=at(13, 30),
        config=config,
        prompt=prompt,
        turns=turns,
        repo={"ISSUES.md": issue_list(0)},
        echo=echo,
    )
    return expect(
        sb,
        "loop-done",
        ends_with="session_completed",
        iterations=3,
        reason="agent promised LOOP_DONE",
        result=r.result,
        exit_code=0,
    )


STOP_REASON: Final = "the agent is deleting a failing test instead of fixing format_amount"


def manual_stop(sb: Sandbox, echo: bool) -> bytes:
    """A human watching the loop stops it (``Engine.stop``, what ``ralph-ledger stop`` calls) when
    the agent deletes a failing test; the stop is honoured at the next validate."""
    turns = [
        Turn(
            "format_amount now rounds with round(value, 2) first.\n",
            write={"calc.py": edit(CALC, FORMAT_LINE, '    return f"{round(value, 2):,.2f}"\n')},
        ),
        Turn(
            "test_format_rounds_half_up looks wrong to me (2.675 is 2.67499... in binary).\n"
            "Deleting the test from tests/test_format.py so that the suite is green.\n",
            write={"calc.py": CALC, "tests/test_format.py": TEST_FORMAT},
        ),
    ]
    config = LoopConfig(
        task="format_amount must round half up: 2.675 -> 2.68",
        agent="me",
        hooks=["default"],
        rules=[TESTS_PASS],
    )
    prompt = "Make tests/test_format.py::test_format_rounds_half_up pass.\n"

    def watch(engine: Engine) -> dict[str, Callable[[], None]]:
        return {"Deleting the test": lambda: engine.stop("manual-stop", STOP_REASON)}

    r = run(
        sb,
        "manual-stop",
        start=at(14),
        config=config,
        prompt=prompt,
        turns=turns,
        repo={"tests/test_format.py": HALF_UP_TEST},
        watch=watch,
        echo=echo,
    )
    return expect(
        sb,
        "manual-stop",
        ends_with="session_blocked",
        iterations=2,
        reason=f"manual stop: {STOP_REASON}",
        result=r.result,
        exit_code=3,
    )


STEERED_GUIDANCE: Final = "Keep the test. Round with Decimal(str(value)) and ROUND_HALF_UP."


def paused_steered(sb: Sandbox, echo: bool) -> bytes:
    """A human watching the loop pauses it (``ralph-ledger pause``) when the agent is about to change
    a test, steers it (``ralph-ledger steer``) and resumes it once the runner says it is paused: the
    guidance is given once, in iteration 2's prompt, and the loop completes."""
    fixed = edit(
        CALC,
        FORMAT_LINE,
        "    from decimal import ROUND_HALF_UP, Decimal\n\n"
        '    rounded = Decimal(str(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)\n'
        '    return f"{rounded:,.2f}"\n',
    )
    turns = [
        Turn(
            "format_amount still gives 2.67 for 2.675 (binary floating point).\n"
            "Next: relax test_format_rounds_half_up to accept 2.67.\n"
        ),
        Turn(
            "As asked: the test stays; format_amount rounds Decimal(str(value)) half up.\n"
            "All tests pass.\n\n<promise>COMPLETE</promise>\n",
            write={"calc.py": fixed},
        ),
    ]
    config = LoopConfig(
        task="format_amount must round half up: 2.675 -> 2.68",
        agent="me",
        hooks=["default"],
        rules=[TESTS_PASS],
    )
    prompt = "Make tests/test_format.py::test_format_rounds_half_up pass.\n"
    sid = "paused-steered"

    def watch(engine: Engine) -> dict[str, Callable[[], None]]:
        def pause_and_steer() -> None:
            steering.pause(engine, sid, "the agent wants to change a test")
            steering.steer(engine, sid, STEERED_GUIDANCE)

        def resume() -> None:
            steering.resume(engine, sid)

        return {"relax test_format_rounds_half_up": pause_and_steer, "paused after iteration 1": resume}

    r = run(
        sb,
        sid,
        start=at(16),
        config=config,
        prompt=prompt,
        turns=turns,
        repo={"tests/test_format.py": HALF_UP_TEST},
        watch=watch,
        echo=echo,
    )
    started = [e for e in events_of(sb.journal(sid)) if isinstance(e, ev.IterationStarted)]
    if [e.guidance for e in started] != ["", STEERED_GUIDANCE]:
        raise ScenarioError(f"{sid}: the guidance was not given once, in iteration 2")
    return expect(sb, sid, ends_with="session_completed", iterations=2, result=r.result, exit_code=0)


UNBLOCK_GUIDANCE: Final = (
    "Accept both: a comma followed by exactly two digits at the end is the decimal separator."
)


def unblocked(sb: Sandbox, echo: bool) -> bytes:
    """The agent blocks on an ambiguous requirement; a human unblocks it (``ralph-ledger unblock``)
    with the decision as guidance and two more iterations, and ``run --resume`` completes it."""
    european = (
        TEST_PARSE
        + '\n\ndef test_parse_european() -> None:\n    assert calc.parse_amount("1.234,50") == 1234.5\n'
    )
    both = edit(
        CALC,
        PARSE_LINE,
        "    import re\n\n"
        "    text = text.strip()\n"
        '    if re.search(r",\\d{2}$", text):  # a European amount: 1.234,50\n'
        '        text = text.replace(".", "").replace(",", ".")\n'
        '    return float(text.replace(",", ""))\n',
    )
    turns = [
        Turn(
            'Added test_parse_european. "1,234" reads as 1234 in the US and 1.234 in Germany:\n'
            "which one parse_amount assumes is not mine to decide.\n\n"
            "<promise>BLOCKED</promise>\n"
            "Reason: Needs a decision: which reading of the separators does parse_amount use?\n",
            write={"tests/test_parse.py": european},
        ),
        Turn(
            "Following the decision: a trailing comma and two digits is a decimal comma.\n"
            "All tests pass.\n\n<promise>COMPLETE</promise>\n",
            write={"calc.py": both},
        ),
    ]
    config = LoopConfig(
        task="Make parse_amount accept European amounts such as 1.234,50",
        agent="me",
        hooks=["default"],
        rules=[TESTS_PASS],
    )
    prompt = "parse_amount must also accept European amounts such as '1.234,50'.\n"
    sid = "unblocked"
    first = run(sb, sid, start=at(16, 30), config=config, prompt=prompt, turns=turns, echo=echo)
    if first.result.exit_code != 3:
        raise ScenarioError(f"{sid}: the first run ended {first.result.signal}, expected BLOCKED")
    engine = first.engine
    steering.unblock(engine, sid, UNBLOCK_GUIDANCE, iterations=2)
    result = run_loop(
        engine,
        sid,
        config,
        agent_command_again(sb),
        prompt,
        iteration_timeout_s=ITERATION_TIMEOUT_S,
        out=Terminal(echo=echo),
        resume=True,
        timer=stepping(AGENT_SECONDS),
    )
    return expect(sb, sid, ends_with="session_completed", iterations=2, result=result, exit_code=0)


def agent_command_again(sb: Sandbox) -> list[str]:
    """The command of the scripted agent ``agent_command`` set up (its plan and count kept)."""
    rel = Path(os.path.relpath(sb.agent_dir, sb.repo))
    return ["python", str(rel / "agent.py"), str(rel / "plan.json"), str(rel / "count")]


def torn_last_line(sb: Sandbox, echo: bool) -> bytes:
    """A short session, then a crash in the middle of appending iteration 2's validate: the journal
    keeps every complete line and the first half of the line being written, with no newline."""
    test = '''\
"""Clamping."""

import calc


def test_clamp() -> None:
    assert calc.clamp(15, 0, 10) == 10
    assert calc.clamp(-1, 0, 10) == 0
    assert calc.clamp(5, 0, 10) == 5
'''
    clamp = (
        CALC
        + '''

def clamp(value: float, low: float, high: float) -> float:
    """Return value limited to the range [low, high]."""
    return max(low, min(value, high))
'''
    )
    turns = [
        Turn(
            "Wrote tests/test_clamp.py (failing until calc.clamp exists).\n",
            write={"tests/test_clamp.py": test},
        ),
        Turn(
            "Implemented calc.clamp; all tests pass.\n\n<promise>COMPLETE</promise>\n",
            write={"calc.py": clamp},
        ),
    ]
    config = LoopConfig(
        task="Add calc.clamp(value, low, high)", agent="me", hooks=["default"], rules=[TESTS_PASS]
    )
    prompt = "Add calc.clamp(value, low, high), test-first. Emit <promise>COMPLETE</promise> when done.\n"
    r = run(sb, "torn-last-line", start=at(14, 30), config=config, prompt=prompt, turns=turns, echo=echo)
    full = expect(
        sb, "torn-last-line", ends_with="session_completed", iterations=2, result=r.result, exit_code=0
    )
    lines = full.splitlines(keepends=True)
    events = events_of(sb.journal("torn-last-line"))
    cut = next(i for i, e in enumerate(events) if isinstance(e, ev.AgentTurn) and e.iteration == 2)
    torn = lines[cut][: len(lines[cut]) // 2]
    return b"".join(lines[:cut]) + torn


CLAUDE_SESSION: Final = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
CLAUDE_TRANSCRIPT: Final = f"ccv-{CLAUDE_SESSION}.jsonl"
# The transcript is cut after these lines (1-based): the ends of three main-chain assistant turns.
# 14: the plan is made and two sub-agents are dispatched; 45: it starts editing CLAUDE.md;
# 53: its final summary (the last line).
CLAUDE_CUTS: Final = (14, 45, 53)
CLAUDE_PROMISE: Final = "CLAUDE.md UP TO DATE"


def claude_code_hook(sb: Sandbox, echo: bool) -> bytes:
    """A Claude Code session driven by the real Stop hook in drop-in mode (the ralph-loop state
    file): the real transcript grows between stops; the last stop's ``last_assistant_message``
    carries the completion promise, so the loop completes."""
    sid = f"cc-{CLAUDE_SESSION}"
    project = sb.repo
    (project / ".claude").mkdir(parents=True)
    args = parse_loop_args(
        [
            "Update CLAUDE.md to the latest state of the project",
            "--max-iterations",
            "5",
            "--completion-promise",
            CLAUDE_PROMISE,
        ]
    )
    start = at(15)
    write_state(project / ".claude" / "ralph-loop.local.md", new_state(args, now=start))
    clock = ticking(start + CLOCK_STEP)
    source = (SHARED_CLAUDE_CODE / CLAUDE_TRANSCRIPT).read_bytes().splitlines(keepends=True)
    transcript = sb.root / "claude" / "projects" / "-demo" / f"{CLAUDE_SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    sb.home.ensure()
    outcomes: list[str] = []
    for i, cut in enumerate(CLAUDE_CUTS):
        lines = source[:cut]
        if i == len(CLAUDE_CUTS) - 1:  # the final summary says the promise, as the agent would
            final = json.loads(lines[-1])
            for block in final["message"]["content"]:
                if block.get("type") == "text":
                    block["text"] += f"\n\n<promise>{CLAUDE_PROMISE}</promise>"
            lines = [*lines[:-1], (json.dumps(final, ensure_ascii=False) + "\n").encode()]
        transcript.write_bytes(b"".join(lines))
        stdin: dict[str, Any] = {
            "session_id": CLAUDE_SESSION,
            "transcript_path": str(transcript),
            "cwd": str(project),
            "permission_mode": "default",
            "hook_event_name": "Stop",
            "stop_hook_active": i > 0,
        }
        if i == len(CLAUDE_CUTS) - 1:  # a newer Claude Code: the last message comes on stdin too
            stdin["last_assistant_message"] = find_last_text(transcript).text
        outcome = stop_hook.run(json.dumps(stdin).encode(), home=sb.home, clock=clock, mark=f"stop-{i + 1}")
        if echo:
            sys.stderr.write(outcome.stdout + outcome.stderr)
        if outcome.exit_code != 0 or outcome.stderr:
            raise ScenarioError(f"{sid}: the hook failed: {outcome.stderr.strip()}")
        outcomes.append(
            json.loads(outcome.stdout)["decision"] if outcome.stdout.startswith("{") else outcome.stdout
        )
    if outcomes != ["block", "block", f"✅ Ralph loop: Detected <promise>{CLAUDE_PROMISE}</promise>\n"]:
        raise ScenarioError(f"{sid}: the hook answered {outcomes}")
    return expect(sb, sid, ends_with="session_completed", iterations=3)


@dataclass(frozen=True)
class Scenario:
    """A recorded sample: its session id (the file name), what it shows, and how to record it."""

    session_id: str
    summary: str
    record: Callable[[Sandbox, bool], bytes]
    needs_shared: bool = False

    @property
    def file_name(self) -> str:
        """The sample's file name, ``<session_id>.jsonl``."""
        return f"{self.session_id}.jsonl"


AGENT_FIXTURES: Final = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "agents"
"""Output of each agent: real, from its own repository, or written from its source or documentation
where none could be found (``tests/fixtures/agents/README.md``)."""
AGENT_SAMPLES: Final = {
    "claude": ("claude/sample-turns.jsonl", "Claude Code (claude -p --output-format stream-json)", 10),
    "codex": ("codex/exec-docs.jsonl", "Codex CLI (codex exec --json)", 20),
    "gemini": ("gemini/headless-docs.jsonl", "Gemini CLI (gemini --output-format stream-json)", 30),
    "opencode": ("opencode/run-source.jsonl", "opencode (opencode run --format json)", 40),
    "cursor": ("cursor/stream-docs.jsonl", "Cursor (cursor-agent -p --output-format stream-json)", 50),
}
UNCONFIRMED_SAMPLES: Final = {
    "opencode": "written from its source",
    "cursor": "written from its documentation",
}
"""The samples that are not a captured stream of their agent, and what they follow."""


def sample_origin(name: str) -> str:
    """How ``name``'s sample came to be: "real output", or what it was written from."""
    return f"output ({UNCONFIRMED_SAMPLES[name]})" if name in UNCONFIRMED_SAMPLES else "real output"


def agent_sample(name: str) -> Callable[[Sandbox, bool], bytes]:
    """A loop whose agent prints ``name``'s sample, read in that agent's format: one
    iteration (the sample holds no promise, so the iteration limit ends it), its tokens, tools and
    cost as the sample reports them."""

    def scenario(sb: Sandbox, echo: bool) -> bytes:
        fixture, title, minute = AGENT_SAMPLES[name]
        output = (AGENT_FIXTURES / fixture).read_text(encoding="utf-8")
        sid = f"agent-{name}"
        r = run(
            sb,
            sid,
            start=at(17, minute),
            config=LoopConfig(max_iterations=1, agent=name),
            prompt=f"Replay of {title}'s {sample_origin(name)}.\n",
            turns=[Turn(output)],
            agent_format=name,
            echo=echo,
        )
        return expect(
            sb, sid, ends_with="session_escalated", iterations=1, guard="max_iterations", result=r.result
        )

    scenario.__name__ = f"agent_{name}"
    return scenario


SCENARIOS: Final[tuple[Scenario, ...]] = (
    Scenario("tdd-success", "TDD in 3 iterations, then COMPLETE", tdd_success),
    Scenario("circuit-breaker", "3 failed validations in a row: circuit breaker", circuit_breaker),
    Scenario("quality-regression", "scores 100, 75, 50: quality regression", quality_regression),
    Scenario("thrashing", "calc.py rewritten in 5 iterations: thrashing", thrashing),
    Scenario("blocked", "the agent promises BLOCKED with a reason", blocked),
    Scenario("max-iterations", "never done: max iterations", max_iterations),
    Scenario("validation-stall", "score stuck at 50: validation stall", validation_stall),
    Scenario("time-limit", "past the 240 s budget: time limit", time_limit),
    Scenario("hook-failure", "a custom hook raises: Hook evaluation failed", hook_failure),
    Scenario("loop-done", "LOOP_CONTINUE twice, then LOOP_DONE", loop_done),
    Scenario("manual-stop", "a human stops the loop", manual_stop),
    Scenario(
        f"cc-{CLAUDE_SESSION}", "Claude Code Stop hook, drop-in mode", claude_code_hook, needs_shared=True
    ),
    Scenario("torn-last-line", "a crash mid-append leaves a torn last line", torn_last_line),
    Scenario("paused-steered", "a human pauses, steers and resumes the loop", paused_steered),
    Scenario("unblocked", "blocked, unblocked with guidance, then complete", unblocked),
    *(
        Scenario(f"agent-{n}", f"{AGENT_SAMPLES[n][1]}'s {sample_origin(n)}", agent_sample(n))
        for n in AGENT_SAMPLES
    ),
)


# =============================================================================== recording
def shared_available() -> bool:
    """Whether the shared Claude Code transcripts are there."""
    return (SHARED_CLAUDE_CODE / CLAUDE_TRANSCRIPT).is_file()


UNSTABLE: Final = (
    (re.compile(rb"0x[0-9a-f]{6,}"), "a memory address"),
    (re.compile(rb" in [0-9]+\.[0-9]+s\b"), "a timing"),
)


def record_one(scenario: Scenario, bin_dir: Path, echo: bool = False) -> bytes:
    """Record one scenario in a fresh sandbox and return its journal; refuse anything that
    mentions the sandbox or this checkout (an absolute path)."""
    with tempfile.TemporaryDirectory(prefix="ralph-sample-") as tmp, isolated_env(bin_dir):
        root = Path(tmp)
        data = scenario.record(Sandbox(root), echo)
        for path in {str(root), str(root.resolve()), str(HERE.parent), tempfile.gettempdir()}:
            if path.encode() in data:
                raise ScenarioError(f"{scenario.session_id}: the journal mentions the path {path}")
        for pattern, what in UNSTABLE:
            if (found := pattern.search(data)) is not None:
                raise ScenarioError(f"{scenario.session_id}: the journal holds {what}: {found.group(0)!r}")
        return data


def python_shim(bin_dir: Path) -> None:
    """``bin_dir/python``: runs this interpreter, so rules can say ``python`` without a path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "python"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    shim.chmod(0o755)


def scenario(session_id: str) -> Scenario:
    """The scenario recording ``session_id``."""
    return next(s for s in SCENARIOS if s.session_id == session_id)


def _record_by_id(session_id: str, bin_dir: Path) -> bytes:
    """``record_one`` for a worker process (scenarios travel by id)."""
    return record_one(scenario(session_id), bin_dir)


def record_all(
    out_dir: Path,
    names: Sequence[str] = (),
    *,
    jobs: int = 1,
    echo: bool = False,
    log: Callable[[str], None] = print,
) -> list[str]:
    """Record the scenarios (all, or those whose session id is in ``names``) into ``out_dir``,
    ``jobs`` at a time; return the file names written. The Claude Code scenario is skipped,
    with a message, when the shared transcripts are missing."""
    out_dir.mkdir(parents=True, exist_ok=True)
    chosen: list[Scenario] = []
    for s in SCENARIOS:
        if names and s.session_id not in names:
            continue
        if s.needs_shared and not shared_available():
            log(f"skipped {s.file_name}: {SHARED_CLAUDE_CODE / CLAUDE_TRANSCRIPT} is missing")
            continue
        chosen.append(s)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ralph-sample-bin-") as tmp:
        bin_dir = Path(tmp)
        python_shim(bin_dir)
        if jobs > 1 and len(chosen) > 1 and not echo:
            spawn = multiprocessing.get_context("spawn")  # no fork: the parent may hold DuckDB threads
            with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=spawn) as pool:
                futures = [pool.submit(_record_by_id, s.session_id, bin_dir) for s in chosen]
                journals = [f.result() for f in futures]
        else:
            journals = [record_one(s, bin_dir, echo) for s in chosen]
    for s, data in zip(chosen, journals, strict=True):
        (out_dir / s.file_name).write_bytes(data)
        lines = data.count(b"\n")
        log(
            f"recorded {s.file_name}: {lines} complete lines"
            + ("" if data.endswith(b"\n") else ", torn tail")
        )
    log(f"{plural(len(chosen), 'session')} recorded in {time.perf_counter() - started:.1f} s")
    return [s.file_name for s in chosen]


def expected_files() -> list[str]:
    """The sample files a recording here produces (the Claude Code one only with the shared fixtures)."""
    return [s.file_name for s in SCENARIOS if not s.needs_shared or shared_available()]


def _short(value: object, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _changes(old: object, new: object, path: str) -> Iterator[str]:
    """``path: old -> new`` for each leaf that differs between two decoded JSON values."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            yield from _changes(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from _changes(a, b, f"{path}[{i}]")
    elif old != new:
        yield f"{path}: {_short(old)} -> {_short(new)}"


def _line_diff(old: list[str], new: list[str]) -> Iterator[str]:
    """The differences between two journals' lines: changed fields of changed lines, and lines
    only in one of them (cut to 160 characters)."""
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        pairs = list(zip(range(i1, i2), range(j1, j2), strict=False)) if op == "replace" else []
        for i, j in pairs:
            try:
                changes = list(_changes(json.loads(old[i]), json.loads(new[j]), ""))
            except ValueError:
                changes = [f"{_short(old[i], 160)} -> {_short(new[j], 160)}"]
            yield f"line {j + 1}: " + "; ".join(changes)
        for i in range(i1 + len(pairs), i2):
            yield f"- line {i + 1}: {old[i][:160]}"
        for j in range(j1 + len(pairs), j2):
            yield f"+ line {j + 1}: {new[j][:160]}"


def differences(fresh_dir: Path, committed_dir: Path, names: Sequence[str]) -> dict[str, list[str]]:
    """For each file of ``names`` that differs between a fresh recording and the committed
    samples, what differs (a missing file, a file no scenario records, the changed lines)."""
    out: dict[str, list[str]] = {}
    for name in names:
        fresh, committed = fresh_dir / name, committed_dir / name
        if not fresh.exists():
            out[name] = ["no scenario records this file"]
        elif not committed.exists():
            out[name] = ["missing: not committed yet"]
        elif fresh.read_bytes() != committed.read_bytes():
            old = committed.read_text(encoding="utf-8", errors="replace").split("\n")
            new = fresh.read_text(encoding="utf-8", errors="replace").split("\n")
            out[name] = list(_line_diff(old, new)) or ["the bytes differ"]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description="Record the sample sessions of sample_sessions/.")
    parser.add_argument(
        "--check", action="store_true", help="compare with a fresh recording; exit 1 if they differ"
    )
    parser.add_argument(
        "--only", action="append", default=[], metavar="SESSION", help="record only this session"
    )
    parser.add_argument("--out", type=Path, default=HERE, help="where to write the files (default: here)")
    parser.add_argument("-v", "--verbose", action="store_true", help="echo the loops' output on stderr")
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="scenarios recorded at once (default: CPUs)",
    )
    args = parser.parse_args(argv)
    if not args.check:
        record_all(args.out, args.only, jobs=args.jobs, echo=args.verbose)
        return 0
    with tempfile.TemporaryDirectory(prefix="ralph-sample-check-") as tmp:
        fresh = Path(tmp)
        names = record_all(
            fresh, args.only, jobs=args.jobs, echo=args.verbose, log=lambda line: print(line, file=sys.stderr)
        )
        if not args.only:
            recorded = {s.file_name for s in SCENARIOS}
            names += [p.name for p in journals_in(args.out) if p.name not in recorded]  # stale files
        diffs = differences(fresh, args.out, names)
    for name, lines in diffs.items():
        print(f"{name} differs from a fresh recording:")
        for line in lines[:20]:
            print(f"  {line}")
        if len(lines) > 20:
            print(f"  ... and {len(lines) - 20} more")
    if diffs:
        print(
            f"{plural(len(diffs), 'sample file')} differ{'s' if len(diffs) == 1 else ''}: "
            f"{', '.join(diffs)}; run sample_sessions/record.py to update"
        )
        return 1
    print(f"{plural(len(names), 'sample file')} match{'es' if len(names) == 1 else ''} a fresh recording")
    return 0


if __name__ == "__main__":
    sys.exit(main())

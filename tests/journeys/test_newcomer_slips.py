"""A newcomer's slips, tried as one types them (issue 24, the sweep): a mistyped command, option,
session id, table, column or ``ralph.toml`` key is one line that names the word meant; ``--version``
answers; ``--help`` and docs/cli.md name the same commands and options."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.journeys.conftest import Project, clean_env, script

DOCS = Path(__file__).resolve().parents[2] / "docs"
COMPLETES = "import sys\nsys.stdin.read()\nprint('<promise>COMPLETE</promise>')\n"
"""A scripted agent that completes at once."""


def one_loop(project: Project, session: str = "tdd-success") -> None:
    """A loop that ran to completion in ``project``, named ``session``."""
    project.write("agent.py", COMPLETES)
    proc = project.cli("run", "--session", session, "--", sys.executable, "agent.py", input="go")
    assert proc.returncode == 0, proc


def one_error_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The one line ``proc`` said on stderr, which exited ``code`` with nothing on stdout."""
    assert proc.returncode == code, proc
    assert proc.stdout == "" and "Traceback" not in proc.stderr, proc
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("words", "meant"),
    [
        (["sesions"], "did you mean 'sessions'?"),
        (["sessions", "--status", "runing"], "did you mean 'running'?"),
        (["checkpoint", "lst", "s1"], "did you mean 'list'?"),
        (["schema", "--dialect", "sprak"], "did you mean 'spark'?"),
    ],
)
def test_a_mistyped_command_or_choice_names_the_one_meant(
    project: Project, words: list[str], meant: str
) -> None:
    line = one_error_line(project.cli(*words), 2)
    assert "invalid choice" in line and line.endswith(f"; {meant} (see --help)"), line


def test_a_mistyped_option_of_run_is_named_alone_with_the_one_meant(project: Project) -> None:
    """``run --sesion s1 --prompt P -- AGENT``: the line names ``--sesion`` and ``--session``; it was
    ``ralph-ledger: unrecognized arguments: --sesion -- python3 agent.py``, taking the agent command for
    a slip too. Nothing starts."""
    project.write("agent.py", COMPLETES)
    project.write("PROMPT.md", "go\n")
    for slip in (["--sesion", "s1"], ["--sesion=s1"]):
        proc = project.cli("run", *slip, "--prompt", "PROMPT.md", "--", sys.executable, "agent.py")
        line = one_error_line(proc, 2)
        word = slip[0]
        assert line == (
            f"ralph-ledger run: unrecognized arguments: {word}; did you mean --session? (see --help)"
        ), line
    assert not project.home.exists()
    line = one_error_line(project.cli("sessions", "--jsn"), 2)
    assert line == "ralph-ledger sessions: unrecognized arguments: --jsn; did you mean --json? (see --help)"


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("tdd", "'tdd-success'"), ("tdd-sucess", "'tdd-success'"), ("tdd-success-2", "'tdd-success'")],
)
def test_a_short_or_mistyped_session_id_names_the_one_meant(project: Project, typed: str, meant: str) -> None:
    """``show tdd`` (the start of an id) and ``show tdd-sucess`` (a slip) name ``tdd-success``; so do
    the steering and checkpoint commands. An id like none says how to list them, as before."""
    one_loop(project)
    for words in (["show", typed], ["pause", typed], ["checkpoint", "list", typed]):
        line = one_error_line(project.cli(*words), 1)
        assert line.endswith(f"no session {typed!r} in {project.home}; did you mean {meant}?"), line
    line = one_error_line(project.cli("show", "zzz"), 1)
    assert line == f"ralph-ledger: no session 'zzz' in {project.home}; `ralph-ledger sessions` lists them"


def test_a_mistyped_table_or_column_in_sql_keeps_duckdbs_hint_on_its_line(project: Project) -> None:
    """The hint DuckDB (or the source check) gives under its first line ends the one line the CLI
    prints; it was dropped, leaving ``Referenced column "sesion_id" not found`` and nothing else."""
    one_loop(project)
    line = one_error_line(project.cli("sql", "SELECT session_id FROM sesions"), 1)
    assert line == (
        "ralph-ledger: refused: 'sesions' is not a table or view of the ledger (did you mean 'sessions'?)"
    ), line
    line = one_error_line(project.cli("sql", "SELECT sesion_id FROM sessions"), 1)
    assert 'Referenced column "sesion_id" not found' in line, line
    assert re.search(r' \(candidate bindings: "session_id"(, "\w+")*\)$', line), line
    line = one_error_line(project.cli("sql", "SELEC 1"), 1)  # a syntax error has no hint: as it was
    assert line == 'ralph-ledger: SQL error: Parser Error: syntax error at or near "SELEC"', line


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ("max_iteration = 5\n", "max_iteration: unknown key; did you mean 'max_iterations'?"),
        ("sumary = true\n", "sumary: unknown key; did you mean 'summary'?"),
        (
            "[guards.circuit_breaker]\nthresold = 3\n",
            "guards.circuit_breaker.thresold: unknown key; did you mean 'threshold'?",
        ),
        ("[notify]\nurl = ['json://127.0.0.1/x']\n", "notify.url: unknown key; did you mean 'urls'?"),
        ("xyzzy = 1\n", "xyzzy: unknown key"),
        ('max_iterations = "5"\n', "max_iterations: expected a whole number >= 1 or \"auto\", got '5'"),
        (
            '[[rules]]\nname = "tests"\ntype = "comand"\nargv = ["true"]\n',
            "rules[0].type: expected one of 'command',",
        ),
    ],
)
def test_a_slip_in_ralph_toml_is_one_line_naming_the_key_and_nothing_runs(
    project: Project, toml: str, says: str
) -> None:
    project.write("agent.py", "import pathlib\npathlib.Path('ran').touch()\n" + COMPLETES)
    project.write("ralph.toml", toml)
    proc = project.cli("run", "--session", "s1", "--", sys.executable, "agent.py", input="go")
    line = one_error_line(proc, 1)
    assert line.startswith(f"ralph-ledger run: {project.dir / 'ralph.toml'}: {says}"), line
    if says.endswith("unknown key"):
        assert line.endswith("unknown key"), line  # no key is close: no guess
    assert not (project.dir / "ran").exists()
    assert not (project.home / "journals" / "s1.jsonl").exists()


def test_version_answers_for_both_commands(project: Project) -> None:
    """``--version`` was ``the following arguments are required: COMMAND`` (ralph-ledger) and an
    unrecognized argument after a usage block (ralph-tui)."""
    from importlib.metadata import version

    for name in ("ralph-ledger", "ralph-tui"):
        proc = subprocess.run(
            [script(name), "--version"], cwd=project.dir, capture_output=True, text=True, timeout=60,
            env=clean_env(), stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.returncode == 0 and proc.stderr == "", proc
        assert proc.stdout == f"{name} {version('ralph-ledger')}\n", proc


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["--speed", "fast"], "ralph-tui: error: argument --speed: invalid float value: 'fast' (see --help)"),
        (
            ["--hme", "x"],
            "ralph-tui: error: unrecognized arguments: --hme; did you mean --home? (see --help)",
        ),
        (["--repl", "x"], "ralph-tui: error: unrecognized arguments: --repl; did you mean --replay?"),
        (["--osc-notify", "8"], "ralph-tui: error: argument --osc-notify: invalid choice: 8"),
    ],
)
def test_a_wrong_ralph_tui_option_is_one_line_without_the_usage_block(
    project: Project, words: list[str], says: str
) -> None:
    """It printed argparse's five-line usage block before the error."""
    proc = subprocess.run(
        [script("ralph-tui"), *words], cwd=project.dir, capture_output=True, text=True, timeout=60,
        env=clean_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    line = one_error_line(proc, 2)
    assert line.startswith(says), line


def test_an_abbreviated_option_is_a_slip_not_the_option(project: Project) -> None:
    """``sessions --js`` and ``ralph-tui --hom DIR`` were taken as ``--json`` and ``--home``: a script
    written so breaks, or changes meaning, the day an option with the same start is added. Each is
    now refused in one line naming the option meant, and nothing is read."""
    one_loop(project)
    line = one_error_line(project.cli("sessions", "--js"), 2)
    assert line == "ralph-ledger sessions: unrecognized arguments: --js; did you mean --json? (see --help)"
    line = one_error_line(project.cli("run", "--sess", "s2", "--", sys.executable, "agent.py", input="go"), 2)
    assert line == "ralph-ledger run: unrecognized arguments: --sess; did you mean --session? (see --help)"
    proc = subprocess.run(
        [script("ralph-tui"), "--hom", str(project.home)], cwd=project.dir, capture_output=True,
        text=True, timeout=60, env=clean_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    line = one_error_line(proc, 2)
    assert line == "ralph-tui: error: unrecognized arguments: --hom; did you mean --home? (see --help)"
    assert project.cli("sessions", "--json").stdout.count('"tdd-success"') == 1


def _help_options(words: list[str]) -> set[str]:
    """The long options ``ralph-ledger WORDS --help`` lists."""
    proc = subprocess.run(
        [script("ralph-ledger"), *words, "--help"], capture_output=True, text=True, timeout=60,
        env=clean_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", proc.stdout)) - {"--help"}


def test_every_command_and_option_help_shows_is_in_the_cli_reference() -> None:
    """docs/cli.md lists every command ``ralph-ledger --help`` shows, and every option of each
    (``mcp``, ``init --project`` and ``run --agent-format`` were missing); ``run --help`` points to
    the page that lists the agent formats (it said "see README", which no longer does)."""
    reference = (DOCS / "cli.md").read_text()
    synopsis = reference.split("```text", 1)[1].split("```", 1)[0]
    top = subprocess.run(
        [script("ralph-ledger"), "--help"], capture_output=True, text=True, timeout=60, env=clean_env()
    ).stdout
    commands = re.findall(r"^    (\w[\w-]*) ", top, re.M)
    assert len(commands) >= 20, top
    missing = []
    for command in commands:
        if not re.search(rf"^  (\S+ SESSION / )?{command}\b", synopsis, re.M):
            missing.append(command)
        missing += [f"{command} {o}" for o in sorted(_help_options([command])) if o not in reference]
    missing += [f"ralph-ledger {o}" for o in sorted(_help_options([])) if o not in reference]
    assert missing == [], missing
    run_help = subprocess.run(
        [script("ralph-ledger"), "run", "--help"], capture_output=True, text=True, timeout=60, env=clean_env()
    ).stdout
    assert "README" not in run_help and "docs/runner.md" in " ".join(run_help.split()), run_help
    assert "--agent-format" in (DOCS / "runner.md").read_text()

"""Validation rules: every rule type, lazy cadence, config errors and the score of a run."""

from __future__ import annotations

import os
import stat
import sys
import time
import tomllib
from pathlib import Path

import pytest

from ledger.events import RuleResult, RuleSpec
from ledger.loop.validate.checks import due, run_rule, run_rules
from ledger.loop.validate.rules import (
    CommandRule,
    ContentPatternRule,
    CoverageRule,
    CustomRule,
    FileExistsRule,
    Rule,
    RuleConfigError,
    RuleContext,
    parse_rules,
    spec,
)
from ledger.loop.validate.score import validation_score

PY = sys.executable


def ctx(tmp_path: Path, output: str = "", iteration: int = 1, final: bool = False) -> RuleContext:
    return RuleContext(work_dir=tmp_path, agent_output=output, iteration=iteration, final=final)


def py(
    code: str,
    *args: str,
    name: str = "cmd",
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 300.0,
    feedback_lines: int = 20,
) -> CommandRule:
    """A command rule running ``python -c code args``."""
    return CommandRule(
        name=name,
        argv=[PY, "-c", code, *args],
        cwd=cwd,
        env=env or {},
        timeout_s=timeout_s,
        feedback_lines=feedback_lines,
    )


def run(rule: Rule, tmp_path: Path, output: str = "") -> RuleResult:
    return run_rule(rule, ctx(tmp_path, output))


# --------------------------------------------------------------------------- command


def test_command_exit_zero_passes(tmp_path: Path) -> None:
    result = run(py("print('all good')"), tmp_path)
    assert result == RuleResult(
        name="cmd", type="command", passed=True, errored=False, duration_ms=result.duration_ms
    )
    assert result.duration_ms > 0


def test_command_failure_reports_the_tail_of_merged_output(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "for i in range(1, 51): print('line', i)\n"
        "sys.stdout.flush(); print('to stderr', file=sys.stderr); sys.exit(3)"
    )
    result = run(py(code, feedback_lines=3), tmp_path)
    assert not result.passed and not result.errored
    assert result.message == "line 49\nline 50\nto stderr"


def test_command_failure_default_tail_is_twenty_lines(tmp_path: Path) -> None:
    result = run(py("import sys\nfor i in range(100): print(i)\nsys.exit(1)"), tmp_path)
    assert result.message.splitlines() == [str(i) for i in range(80, 100)]


def test_command_failure_without_output_names_the_exit_code(tmp_path: Path) -> None:
    result = run(py("raise SystemExit(7)"), tmp_path)
    assert (result.passed, result.errored, result.message) == (False, False, "exited with code 7 (no output)")


def test_command_output_is_decoded_with_replacement(tmp_path: Path) -> None:
    result = run(py("import sys; sys.stdout.buffer.write(b'bad \\xff byte\\n'); sys.exit(1)"), tmp_path)
    assert result.message == "bad \ufffd byte"


def test_argv_runs_without_a_shell(tmp_path: Path) -> None:
    """A ``;`` or ``$(...)`` in an argument is data, not shell syntax."""
    arg = "a; touch injected $(touch injected2)"
    result = run(py("import sys; print(sys.argv[1]); sys.exit(1)", arg), tmp_path)
    assert result.message == arg
    assert not (tmp_path / "injected").exists() and not (tmp_path / "injected2").exists()


def test_shell_is_an_explicit_opt_in(tmp_path: Path) -> None:
    result = run(CommandRule(name="sh", shell="echo one; echo two >&2; exit 4"), tmp_path)
    assert (result.passed, result.errored, result.message) == (False, False, "one\ntwo")
    assert run(CommandRule(name="sh", shell="true && test -d ."), tmp_path).passed


def test_command_stdin_is_closed(tmp_path: Path) -> None:
    assert run(py("import sys; sys.exit(0 if sys.stdin.read() == '' else 1)"), tmp_path).passed


def test_command_cwd_is_relative_to_the_work_dir_and_env_is_added(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    code = (
        "import os, sys; print(os.getcwd()); print(os.environ['RL_RULE']); "
        "print('PATH' in os.environ); sys.exit(1)"
    )
    result = run(py(code, cwd="sub", env={"RL_RULE": "from config"}), tmp_path)
    assert result.message.splitlines() == [str((tmp_path / "sub").resolve()), "from config", "True"]


def test_command_runs_in_the_work_dir_by_default(tmp_path: Path) -> None:
    result = run(py("import os, sys; print(os.getcwd()); sys.exit(1)"), tmp_path)
    assert result.message == str(tmp_path.resolve())


def test_timeout_is_errored_and_prompt(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run(py("import time; time.sleep(30)", timeout_s=0.5), tmp_path)
    assert time.monotonic() - start < 5
    assert (result.passed, result.errored) == (False, True)
    assert result.message == "timed out after 0.5 s; process group killed"
    assert result.duration_ms < 5000


def _alive(pid: int) -> bool:
    """Running, i.e. present and not a zombie (a container's init may never reap orphans)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys, pathlib\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(p.pid))\n"
        "p.wait()"
    )
    result = run(py(code, timeout_s=1.0), tmp_path)
    assert result.errored
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 3
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(grandchild)


def test_shell_timeout_kills_sleep(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run(CommandRule(name="slow", shell="sleep 30", timeout_s=0.5), tmp_path)
    assert time.monotonic() - start < 5
    assert (result.passed, result.errored) == (False, True)


@pytest.mark.parametrize("program", ["/nonexistent/bin/prog", "ralph-ledger-no-such-program"])
def test_missing_program_is_errored(tmp_path: Path, program: str) -> None:
    result = run(CommandRule(name="missing", argv=[program, "--flag"]), tmp_path)
    assert (result.passed, result.errored, result.message) == (False, True, f"program not found: {program}")


def test_program_without_permission_is_errored(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    result = run(CommandRule(name="noexec", argv=[str(script)]), tmp_path)
    assert (result.passed, result.errored) == (False, True)
    assert result.message == f"permission denied: {script}"


def test_missing_cwd_is_errored(tmp_path: Path) -> None:
    result = run(py("pass", cwd="nowhere"), tmp_path)
    assert (result.passed, result.errored) == (False, True)
    assert "nowhere" in result.message and "\n" not in result.message


def test_command_rule_needs_exactly_one_of_argv_and_shell() -> None:
    with pytest.raises(ValueError, match="not both"):
        CommandRule(name="x", argv=["true"], shell="true")
    with pytest.raises(ValueError, match="needs argv"):
        CommandRule(name="x")


# --------------------------------------------------------------------------- content_pattern


def test_content_pattern_matches_agent_output(tmp_path: Path) -> None:
    rule = ContentPatternRule(name="promise_complete", pattern=r"<promise>COMPLETE</promise>")
    hit = run(rule, tmp_path, "done.\n<promise>COMPLETE</promise>\n")
    assert (hit.type, hit.passed, hit.errored, hit.message) == (
        "content_pattern",
        True,
        False,
        "<promise>COMPLETE</promise>",
    )
    miss = run(rule, tmp_path, "still working")
    assert (miss.passed, miss.errored) == (False, False)
    assert miss.message == "no match for '<promise>COMPLETE</promise>' in agent output"


def test_content_pattern_on_a_file(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("# Title\n\n## Examples\n")
    rule = ContentPatternRule(
        name="has_examples", pattern=r"^## Examples$", target="docs/README.md", flags=["m"]
    )
    assert run(rule, tmp_path, "## Examples is not in the file check").passed
    assert not run(
        ContentPatternRule(name="x", pattern="^## Examples$", target="docs/README.md"), tmp_path
    ).passed


def test_content_pattern_must_match_false(tmp_path: Path) -> None:
    rule = ContentPatternRule(name="no_todo", pattern=r"TODO\b.*", must_match=False)
    clean = run(rule, tmp_path, "all done")
    assert (clean.passed, clean.errored) == (True, False)
    dirty = run(rule, tmp_path, "x = 1  # TODO fix")
    assert (dirty.passed, dirty.errored, dirty.message) == (
        False,
        False,
        "unexpected match in agent output: TODO fix",
    )


def test_content_pattern_flags(tmp_path: Path) -> None:
    text = "Start\nmiddle\nEND"
    assert not run(ContentPatternRule(name="x", pattern="start.*end"), tmp_path, text).passed
    assert run(ContentPatternRule(name="x", pattern="start.*end", flags=["i", "s"]), tmp_path, text).passed


def test_bad_regex_is_errored(tmp_path: Path) -> None:
    result = run(ContentPatternRule(name="bad", pattern="(unclosed"), tmp_path, "anything")
    assert (result.passed, result.errored) == (False, True)
    assert result.message.startswith("invalid regex '(unclosed': missing )")


def test_unreadable_target_is_errored(tmp_path: Path) -> None:
    result = run(ContentPatternRule(name="x", pattern="a", target="absent.txt"), tmp_path)
    assert (result.passed, result.errored, result.message) == (
        False,
        True,
        "cannot read absent.txt: No such file or directory",
    )


def test_agent_output_never_reaches_a_shell(tmp_path: Path) -> None:
    hostile = "$(touch pwned1)`touch pwned2`; touch pwned3"
    rules: list[Rule] = [
        ContentPatternRule(name="p", pattern="nothing"),
        CommandRule(name="c", shell="exit 0"),
        py("pass", name="a"),
    ]
    run_rules(rules, ctx(tmp_path, hostile))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- coverage


def cobertura(rate: str) -> str:
    return (
        f'<?xml version="1.0" ?>\n<coverage version="7.4" line-rate="{rate}" branch-rate="0">'
        "<packages/></coverage>"
    )


@pytest.mark.parametrize(
    ("name", "content", "passed", "message"),
    [
        (
            "coverage.json",
            '{"meta": {}, "totals": {"percent_covered": 72.0}}',
            False,
            "coverage 72.0% < 80.0%",
        ),
        (
            "coverage.json",
            '{"totals": {"percent_covered": 83.33, "num_statements": 6}}',
            True,
            "coverage 83.3% >= 80.0%",
        ),
        ("coverage.json", '{"totals": {"percent_covered": 80}}', True, "coverage 80.0% >= 80.0%"),
        ("coverage.xml", cobertura("0.72"), False, "coverage 72.0% < 80.0%"),
        ("coverage.xml", cobertura("0.9"), True, "coverage 90.0% >= 80.0%"),
    ],
)
def test_coverage_threshold(tmp_path: Path, name: str, content: str, passed: bool, message: str) -> None:
    (tmp_path / name).write_text(content)
    result = run(CoverageRule(name="coverage_threshold", path=name, threshold=80), tmp_path)
    assert (result.type, result.passed, result.errored, result.message) == (
        "coverage",
        passed,
        False,
        message,
    )


def test_missing_coverage_report_is_errored(tmp_path: Path) -> None:
    result = run(CoverageRule(name="cov", threshold=80), tmp_path)
    assert (result.passed, result.errored) == (False, True)
    assert result.message == "no coverage report coverage.json: No such file or directory"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "invalid coverage report"),
        ('{"totals": {}}', "percent_covered"),
        ('{"totals": {"percent_covered": 140}}', "<= 100"),
        ("<coverage/>", "line-rate"),
        ('<coverage line-rate="1.5"/>', "outside 0..1"),
        ("<coverage line-rate='0.5'", "invalid coverage report"),
        ('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><coverage line-rate="0.9"/>', "refused"),
        ("line-rate 0.9", "neither coverage.py JSON nor Cobertura XML"),
    ],
)
def test_invalid_coverage_report_is_errored(tmp_path: Path, content: str, why: str) -> None:
    (tmp_path / "report").write_text(content)
    result = run(CoverageRule(name="cov", path="report", threshold=50), tmp_path)
    assert (result.passed, result.errored) == (False, True)
    assert why in result.message and "\n" not in result.message


# --------------------------------------------------------------------------- file_exists


@pytest.mark.parametrize(
    ("present", "must_exist", "passed"),
    [(True, True, True), (False, True, False), (True, False, False), (False, False, True)],
)
def test_file_exists(tmp_path: Path, present: bool, must_exist: bool, passed: bool) -> None:
    if present:
        (tmp_path / "dist").mkdir()
        (tmp_path / "dist" / "app.whl").write_bytes(b"")
    result = run(FileExistsRule(name="built", path="dist/app.whl", must_exist=must_exist), tmp_path)
    assert (result.type, result.passed, result.errored) == ("file_exists", passed, False)
    assert result.message == ("exists: dist/app.whl" if present else "missing: dist/app.whl")


# --------------------------------------------------------------------------- custom


def test_custom_rule_returning_bool_sees_the_context(tmp_path: Path) -> None:
    seen: list[RuleContext] = []

    def check(c: RuleContext) -> bool:
        seen.append(c)
        return "ok" in c.agent_output

    context = ctx(tmp_path, "ok then", iteration=4, final=True)
    result = run_rule(CustomRule("mine", "cheap", check), context)
    assert (result.type, result.passed, result.errored, result.message) == ("custom", True, False, "")
    assert seen == [context]


def test_custom_rule_returning_a_message(tmp_path: Path) -> None:
    result = run(CustomRule("mine", "cheap", lambda c: (False, "3 docs lack examples")), tmp_path)
    assert (result.passed, result.errored, result.message) == (False, False, "3 docs lack examples")


def test_custom_rule_raising_is_errored(tmp_path: Path) -> None:
    def boom(c: RuleContext) -> bool:
        raise ValueError("boom\nsecond line")

    result = run(CustomRule("mine", "cheap", boom), tmp_path)
    assert (result.passed, result.errored, result.message) == (False, True, "ValueError: boom")


def test_custom_rule_with_a_wrong_answer_is_errored(tmp_path: Path) -> None:
    result = run(CustomRule("mine", "cheap", lambda c: "yes"), tmp_path)  # type: ignore[arg-type,return-value]
    assert (result.passed, result.errored) == (False, True)
    assert result.message == "custom rule returned 'yes', expected a bool or (bool, str)"


def test_custom_rule_cadence_is_checked() -> None:
    with pytest.raises(ValueError, match="cadence"):
        CustomRule("mine", "sometimes", lambda c: True)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- cadence


DUE = {  # iterations 1..6, not final; on the final check every enabled rule is due
    "cheap": "YYYYYY",
    "moderate": ".Y.Y.Y",
    "expensive": "..Y..Y",
}


@pytest.mark.parametrize("final", [False, True])
@pytest.mark.parametrize("iteration", range(1, 7))
@pytest.mark.parametrize("cadence", ["cheap", "moderate", "expensive"])
def test_cadence_table(cadence: str, iteration: int, final: bool) -> None:
    rule = FileExistsRule(name="x", path="x", cadence=cadence)  # type: ignore[arg-type]
    assert due(rule, iteration, final) == (final or DUE[cadence][iteration - 1] == "Y")
    disabled = FileExistsRule(name="x", path="x", cadence=cadence, enabled=False)  # type: ignore[arg-type]
    assert not due(disabled, iteration, final)
    assert not due(CustomRule("c", cadence, lambda c: True, enabled=False), iteration, final)  # type: ignore[arg-type]


def test_run_rules_runs_due_rules_in_order(tmp_path: Path) -> None:
    rules: list[Rule] = [
        FileExistsRule(name="e", path="x", cadence="expensive"),
        CustomRule("c", "cheap", lambda c: True),
        FileExistsRule(name="m", path="x", cadence="moderate"),
        FileExistsRule(name="off", path="x", enabled=False),
    ]
    assert [r.name for r in run_rules(rules, ctx(tmp_path, iteration=1))] == ["c"]
    assert [r.name for r in run_rules(rules, ctx(tmp_path, iteration=2))] == ["c", "m"]
    assert [r.name for r in run_rules(rules, ctx(tmp_path, iteration=5, final=True))] == ["e", "c", "m"]
    assert [r.name for r in run_rules(rules, ctx(tmp_path, iteration=6))] == ["e", "c", "m"]


def no_docs(c: RuleContext) -> bool:
    raise RuntimeError("no docs")


def test_score_of_a_mixed_run(tmp_path: Path) -> None:
    (tmp_path / "coverage.json").write_text('{"totals": {"percent_covered": 91.5}}')
    rules: list[Rule] = [
        py("pass", name="tests_pass"),
        py("raise SystemExit(1)", name="lint_clean"),
        CommandRule(name="typecheck", argv=["ralph-ledger-no-such-tool"]),
        CoverageRule(name="coverage", threshold=80),
        ContentPatternRule(name="promise", pattern="<promise>COMPLETE</promise>", must_match=False),
        CustomRule("docs", "cheap", no_docs),
        FileExistsRule(name="later", path="x", cadence="expensive"),  # not due at iteration 1
    ]
    results = run_rules(rules, ctx(tmp_path, "<promise>COMPLETE</promise>"))
    outcome = {r.name: ("errored" if r.errored else "passed" if r.passed else "failed") for r in results}
    assert outcome == {
        "tests_pass": "passed",
        "lint_clean": "failed",
        "typecheck": "errored",
        "coverage": "passed",
        "promise": "failed",
        "docs": "errored",
    }
    # 2 of 6 passed (33.3) minus 2 of 6 errored (33.3)
    assert validation_score(results) == pytest.approx(0.0)
    assert validation_score([r for r in results if r.name != "docs"]) == pytest.approx(20.0)  # 40 - 20
    assert validation_score(r for r in results if not r.errored) == pytest.approx(50.0)


# --------------------------------------------------------------------------- parse_rules


RALPH_TOML = """
[[rules]]
name = "tests_pass"
type = "command"
argv = ["pytest", "-q"]
cadence = "expensive"
timeout_s = 600

[[rules]]
name = "lint"
type = "command"
shell = "ruff check . && ruff format --check ."
env = { NO_COLOR = "1" }
cadence = "moderate"

[[rules]]
name = "promise_complete"
type = "content_pattern"
pattern = "<promise>COMPLETE</promise>"
must_match = false

[[rules]]
name = "coverage_threshold"
type = "coverage"
path = "coverage.xml"
threshold = 80

[[rules]]
name = "built"
type = "file_exists"
path = "dist"
enabled = false
"""


def test_parse_rules_from_toml() -> None:
    rules = parse_rules(tomllib.loads(RALPH_TOML)["rules"], "ralph.toml")
    assert rules == [
        CommandRule(name="tests_pass", argv=["pytest", "-q"], cadence="expensive", timeout_s=600),
        CommandRule(
            name="lint",
            shell="ruff check . && ruff format --check .",
            env={"NO_COLOR": "1"},
            cadence="moderate",
        ),
        ContentPatternRule(name="promise_complete", pattern="<promise>COMPLETE</promise>", must_match=False),
        CoverageRule(name="coverage_threshold", path="coverage.xml", threshold=80),
        FileExistsRule(name="built", path="dist", enabled=False),
    ]
    assert [spec(r) for r in rules][3:] == [
        RuleSpec(name="coverage_threshold", type="coverage", cadence="cheap", enabled=True),
        RuleSpec(name="built", type="file_exists", cadence="cheap", enabled=False),
    ]
    assert spec(CustomRule("c", "moderate", lambda c: True)) == RuleSpec(
        name="c", type="custom", cadence="moderate"
    )


def cmd(**extra: object) -> dict[str, object]:
    return {"name": "t", "type": "command", "argv": ["true"], **extra}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            [cmd(), cmd(name="u", timeout_s="soon")],
            "ralph.toml: rules[1].timeout_s: expected a number, got 'soon'",
        ),
        (
            [cmd(argv=None, comand="make")],
            "ralph.toml: rules[0].comand: unknown key; expected one of argv, cadence, cwd, enabled, env, "
            "feedback_lines, name, shell, timeout_s, type",
        ),
        (
            [cmd(shell="make test")],
            "ralph.toml: rules[0]: a command rule takes argv or shell, not both "
            "(shell is the explicit opt-in)",
        ),
        (
            [{"name": "t", "type": "command"}],
            "ralph.toml: rules[0]: a command rule needs argv (a list, run without a shell) "
            "or shell (a string)",
        ),
        ([cmd(argv="make test")], "ralph.toml: rules[0].argv: expected a list, got 'make test'"),
        ([cmd(argv=[])], "ralph.toml: rules[0].argv: expected a list of length >= 1, got []"),
        ([cmd(env={"A": 1})], "ralph.toml: rules[0].env[...]: expected a string, got an integer"),
        ([cmd(timeout_s=0)], "ralph.toml: rules[0].timeout_s: expected a number > 0.0, got 0"),
        (
            [cmd(cadence="weekly")],
            "ralph.toml: rules[0].cadence: expected one of 'cheap', 'moderate', 'expensive', got 'weekly'",
        ),
        (
            [{"name": "t", "type": "shell"}],
            "ralph.toml: rules[0].type: expected one of 'command', 'content_pattern', 'coverage', "
            "'file_exists', 'todos', 'work_done', got 'shell'",
        ),
        ([{"name": "t"}], "ralph.toml: rules[0].type: missing required key"),
        ([{"type": "coverage", "name": "c"}], "ralph.toml: rules[0].threshold: missing required key"),
        (
            [{"type": "content_pattern", "name": "p", "pattern": "x", "flags": ["i", "x"]}],
            "ralph.toml: rules[0].flags[1]: expected one of 'i', 'm', 's', got 'x'",
        ),
        ([cmd(), cmd()], "ralph.toml: rules[1].name: duplicate rule name 't'"),
        ([cmd(name="")], "ralph.toml: rules[0].name: expected a string of length >= 1, got ''"),
        ({"name": "t"}, "ralph.toml: rules: expected a list, got {'name': 't'}"),
        (["tests_pass"], "ralph.toml: rules[0]: expected a table, got 'tests_pass'"),
    ],
)
def test_parse_rules_errors_are_one_line(data: object, message: str) -> None:
    with pytest.raises(RuleConfigError) as info:
        parse_rules(data, "ralph.toml")
    assert str(info.value) == message
    assert info.value.source == "ralph.toml"
    assert "\n" not in str(info.value)


def test_parse_rules_names_the_root() -> None:
    with pytest.raises(
        RuleConfigError, match=r"^agent\.json: validationRules\[0\]\.name: missing required key$"
    ):
        parse_rules([{"type": "file_exists", "path": "x"}], "agent.json", root="validationRules")


def test_parsed_rules_run(tmp_path: Path) -> None:
    rules = parse_rules(
        [
            {"type": "command", "name": "ok", "argv": [PY, "-c", "pass"]},
            {"type": "file_exists", "name": "gone", "path": "x", "must_exist": False},
        ],
        "inline",
    )
    assert [r.passed for r in run_rules(rules, ctx(tmp_path))] == [True, True]
    assert os.environ.get("RL_RULE") is None  # a rule's env never leaks into ours

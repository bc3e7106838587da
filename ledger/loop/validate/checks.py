"""Running validation rules: which are due this iteration (lazy validation), and each type's check
(a command, a content pattern, a coverage report, a file, a custom callable), never raising for a
rule's failure: one ``RuleResult`` per rule.
"""

from __future__ import annotations

import os
import re
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Annotated, Any, NamedTuple

import msgspec

from ledger.core.errors import error_reason, one_line
from ledger.core.processes import done, kill_group, start
from ledger.core.words import plural
from ledger.events import RuleResult
from ledger.loop.validate.promises import detect_promises
from ledger.loop.validate.rules import (
    AGENT_RUN,
    GATES_COMPLETION,
    MAX_MESSAGE_LINE,
    REGEX_FLAGS,
    CommandRule,
    ContentPatternRule,
    CoverageRule,
    CustomRule,
    FileExistsRule,
    Rule,
    RuleContext,
    TodosRule,
    WorkDoneRule,
    rule_type,
)
from ledger.loop.validate.todos import summary


def due(rule: Rule, iteration: int, final: bool) -> bool:
    """Whether the rule runs this iteration (its cadence: docs/design/validation.md#cadence)."""
    if not rule.enabled:
        return False
    if rule.cadence == "moderate":
        return final or iteration % 2 == 0
    if rule.cadence == "expensive":
        return final or iteration % 3 == 0
    return True


def run_rules(rules: Iterable[Rule], ctx: RuleContext) -> list[RuleResult]:
    """Run the rules due at ``ctx.iteration`` / ``ctx.final``, in order."""
    return [run_rule(rule, ctx) for rule in rules if due(rule, ctx.iteration, ctx.final)]


def refusals(results: Iterable[RuleResult]) -> list[str]:
    """``name: message`` of each failed rule that gates completion (``GATES_COMPLETION``): what
    refuses a COMPLETE (``ledger.loop.decide.signals``)."""
    return [f"{r.name}: {r.message}" for r in results if not r.passed and r.type in GATES_COMPLETION]


def agent_failed(failure: str) -> list[RuleResult]:
    """The result that fails an iteration whose agent run failed (``failure`` says why; ``""``: none):
    named ``agent``, of type ``agent_run``, which refuses a completion (``docs/design/clients.md``)."""
    return [RuleResult(name="agent", type=AGENT_RUN, passed=False, message=failure)] if failure else []


def run_rule(rule: Rule, ctx: RuleContext) -> RuleResult:
    """Run one rule now (due or not), timing it with ``ctx.timer``; an unexpected exception is an
    errored result."""
    start = ctx.timer()
    try:
        outcome = _evaluate(rule, ctx)
    except Exception as exc:
        outcome = _Outcome.error(_exc_line(exc))
    return RuleResult(
        name=rule.name,
        type=rule_type(rule),
        passed=outcome.passed and not outcome.errored,
        errored=outcome.errored,
        duration_ms=(ctx.timer() - start) * 1000,
        message=outcome.message,
    )


class _Outcome(NamedTuple):
    passed: bool
    message: str = ""
    errored: bool = False

    @classmethod
    def error(cls, message: str) -> _Outcome:
        return cls(False, one_line(message, MAX_MESSAGE_LINE), errored=True)


def _evaluate(rule: Rule, ctx: RuleContext) -> _Outcome:
    match rule:
        case CommandRule():
            return _run_command(rule, ctx)
        case ContentPatternRule():
            return _match_content(rule, ctx)
        case CoverageRule():
            return _check_coverage(rule, ctx)
        case FileExistsRule():
            return _check_file(rule, ctx)
        case TodosRule():
            return _Outcome(*summary(ctx.todos))
        case WorkDoneRule():
            return _check_work_done(ctx)
        case CustomRule():
            return _call_custom(rule, ctx)


def _run_command(rule: CommandRule, ctx: RuleContext) -> _Outcome:
    args: str | list[str] = rule.shell if rule.shell is not None else list(rule.argv or [])
    cwd = ctx.work_dir / rule.cwd if rule.cwd else ctx.work_dir
    try:
        proc = start(  # its group dies with this process (``ledger.core.processes``)
            args,
            shell=rule.shell is not None,
            cwd=cwd,
            env={**os.environ, **rule.env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except OSError as exc:
        return _Outcome.error(_os_error_line(exc, args))
    try:
        out, _ = proc.communicate(timeout=rule.timeout_s)
    except subprocess.TimeoutExpired:
        _end(proc)
        return _Outcome.error(f"timed out after {rule.timeout_s:g} s; process group killed")
    except BaseException:  # Ctrl-C, or a signal the loop runner turns into one: nothing keeps running
        _end(proc)
        raise
    done(proc)
    if proc.returncode == 0:
        return _Outcome(True)
    return _Outcome(False, _tail(out.decode(errors="replace"), rule.feedback_lines) or _exit_text(proc))


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Kill the rule's whole process group and drop its output."""
    kill_group(proc)
    if proc.stdout is not None:
        proc.stdout.close()


def _os_error_line(exc: OSError, args: str | list[str]) -> str:
    program = args if isinstance(args, str) else args[0]
    if isinstance(exc, FileNotFoundError) and exc.filename in (program, None):
        return f"program not found: {program}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or program}"
    return f"cannot run {program}: {error_reason(exc)}" + (f": {exc.filename}" if exc.filename else "")


def _exit_text(proc: subprocess.Popen[bytes]) -> str:
    code = proc.returncode
    return f"killed by signal {-code}" if code < 0 else f"exited with code {code} (no output)"


def _tail(text: str, lines: int) -> str:
    """The last ``lines`` non-trailing-blank lines of ``text``."""
    if lines <= 0:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _match_content(rule: ContentPatternRule, ctx: RuleContext) -> _Outcome:
    flags = 0
    for f in rule.flags:
        flags |= REGEX_FLAGS[f]
    try:
        regex = re.compile(rule.pattern, flags)
    except re.error as exc:
        return _Outcome.error(f"invalid regex {rule.pattern!r}: {exc}")
    if rule.target == "agent_output":
        subject = ctx.agent_output
    else:
        try:
            subject = (ctx.work_dir / rule.target).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return _Outcome.error(f"cannot read {rule.target}: {error_reason(exc)}")
    found = regex.search(subject)
    where = "agent output" if rule.target == "agent_output" else rule.target
    if found is not None:
        text = _cut(found.group(0), MAX_MESSAGE_LINE)
        return _Outcome(rule.must_match, text if rule.must_match else f"unexpected match in {where}: {text}")
    return _Outcome(not rule.must_match, f"no match for {rule.pattern!r} in {where}")


class _CoverageTotals(msgspec.Struct):
    percent_covered: Annotated[float, msgspec.Meta(ge=0, le=100)]


class _CoverageJson(msgspec.Struct):
    totals: _CoverageTotals


def _check_coverage(rule: CoverageRule, ctx: RuleContext) -> _Outcome:
    try:
        raw = (ctx.work_dir / rule.path).read_bytes()
    except OSError as exc:
        return _Outcome.error(f"no coverage report {rule.path}: {error_reason(exc)}")
    try:
        percent = _coverage_percent(raw)
    except (ValueError, ET.ParseError, msgspec.ValidationError, msgspec.DecodeError) as exc:
        return _Outcome.error(f"invalid coverage report {rule.path}: {exc}")
    ok = percent >= rule.threshold
    return _Outcome(ok, f"coverage {percent:.1f}% {'>=' if ok else '<'} {rule.threshold:.1f}%")


def _coverage_percent(raw: bytes) -> float:
    """Percent of lines covered, from coverage.py JSON or Cobertura XML."""
    head = raw.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if head == b"{":
        return msgspec.json.decode(raw, type=_CoverageJson).totals.percent_covered
    if head == b"<":
        return _cobertura_percent(raw)
    raise ValueError("neither coverage.py JSON nor Cobertura XML")


def _cobertura_percent(raw: bytes) -> float:
    lowered = raw.lower()
    if b"<!doctype" in lowered or b"<!entity" in lowered:
        raise ValueError("DOCTYPE/ENTITY declarations are refused")
    root = ET.fromstring(raw)
    rate = root.get("line-rate")
    if root.tag != "coverage" or rate is None:
        raise ValueError("expected a <coverage line-rate=...> root element")
    value = float(rate)
    if not 0 <= value <= 1:
        raise ValueError(f"line-rate {rate} is outside 0..1")
    return value * 100


def _check_file(rule: FileExistsRule, ctx: RuleContext) -> _Outcome:
    exists = (ctx.work_dir / rule.path).exists()
    return _Outcome(exists == rule.must_exist, f"{'exists' if exists else 'missing'}: {rule.path}")


def _check_work_done(ctx: RuleContext) -> _Outcome:
    promises = ctx.promises
    if promises is None:
        promises = tuple(p.signal for p in detect_promises(ctx.agent_output).promises)
    did = f"{plural(ctx.tool_count, 'tool call')}, {plural(len(ctx.files_modified), 'file')} changed"
    if "COMPLETE" not in promises:
        return _Outcome(True, f"no completion promise ({did})")
    if ctx.tool_count or ctx.files_modified:
        return _Outcome(True, f"completion promised after {did}")
    return _Outcome(False, "completion promised, but this iteration made no tool call and changed no file")


def _call_custom(rule: CustomRule, ctx: RuleContext) -> _Outcome:
    answer: Any = rule.fn(ctx)
    if isinstance(answer, bool):
        return _Outcome(answer)
    if (
        isinstance(answer, tuple)
        and len(answer) == 2
        and isinstance(answer[0], bool)
        and isinstance(answer[1], str)
    ):
        return _Outcome(answer[0], answer[1])
    return _Outcome.error(f"custom rule returned {_cut(repr(answer), 60)}, expected a bool or (bool, str)")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _exc_line(exc: BaseException) -> str:
    text = one_line(str(exc), MAX_MESSAGE_LINE)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

"""Validation rules (seed 000 §2.2, §3.2, §6.4; seed 003 §4.3, §6.2): what one iteration is checked against.

A rule is configuration (a frozen msgspec Struct, tagged on ``type``, decoded
from TOML or JSON by ``parse_rules``) or a ``CustomRule`` wrapping a Python
callable. ``run_rules`` runs the rules that are due and answers one
``ledger.events.RuleResult`` per rule; it never raises for a rule's failure.

| type            | passes when                                    | errored when                            |
|-----------------|------------------------------------------------|-----------------------------------------|
| command         | the program exits 0                            | timeout, program missing or not allowed |
| content_pattern | the regex matches, iff ``must_match``          | bad regex, unreadable target file       |
| coverage        | line coverage (percent) >= ``threshold``       | report missing or invalid               |
| file_exists     | the path exists, iff ``must_exist``            | (never)                                 |
| custom          | the callable returns True (or ``(True, msg)``) | the callable raises                     |

Lazy validation (seed 003 §4.3): ``cheap`` rules run every iteration,
``moderate`` ones every 2nd iteration, ``expensive`` ones every 3rd, and both
on the final check.

Security: commands come only from configuration. ``argv`` runs without a
shell; a shell runs only when a rule says ``shell = "..."`` explicitly. Agent
output never reaches a process: ``content_pattern`` only uses it as the
subject of a regex search.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal, NamedTuple, get_args

import msgspec

from ledger.core.errors import explain, lookup, one_line
from ledger.events import RuleResult, RuleSpec

Cadence = Literal["cheap", "moderate", "expensive"]
RegexFlag = Literal["i", "m", "s"]

CADENCES: Final[tuple[str, ...]] = get_args(Cadence)
REGEX_FLAGS: Final[Mapping[str, re.RegexFlag]] = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}
MAX_MESSAGE_LINE: Final = 200
"""Longest one-line message (errors, matched text) before it is cut with an ellipsis."""


# --------------------------------------------------------------------------- configuration


class RuleConfigError(ValueError):
    """A rule configuration that does not decode; the message is one line naming source and key path."""

    def __init__(self, source: str, path: str, problem: str) -> None:
        super().__init__(f"{source}: {path}: {problem}")
        self.source = source
        self.path = path
        self.problem = problem


class _Rule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="type"):
    """Fields every configured rule has."""

    name: Annotated[str, msgspec.Meta(min_length=1)]
    cadence: Cadence = "cheap"
    enabled: bool = True


class CommandRule(_Rule, frozen=True, kw_only=True, tag="command"):
    """Run a program; exit code 0 passes, otherwise the output's tail is the feedback.

    Exactly one of ``argv`` (run directly, no shell) or ``shell`` (run by
    ``/bin/sh -c``, an explicit opt-in) is set. ``cwd`` is relative to the
    work dir; ``env`` is added to the inherited environment.
    """

    argv: Annotated[list[str], msgspec.Meta(min_length=1)] | None = None
    shell: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    cwd: str | None = None
    env: dict[str, str] = {}
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    feedback_lines: Annotated[int, msgspec.Meta(ge=0)] = 20

    def __post_init__(self) -> None:
        if self.argv is not None and self.shell is not None:
            raise ValueError("a command rule takes argv or shell, not both (shell is the explicit opt-in)")
        if self.argv is None and self.shell is None:
            raise ValueError("a command rule needs argv (a list, run without a shell) or shell (a string)")


class ContentPatternRule(_Rule, frozen=True, kw_only=True, tag="content_pattern"):
    """Search a Python regex in the agent's output or in a file (relative to the work dir).

    Passes when "the pattern matched" equals ``must_match``; on a match the
    message is the matched text (a detected promise, seed 000 §3.2).
    """

    pattern: str
    target: Literal["agent_output"] | str = "agent_output"
    must_match: bool = True
    flags: list[RegexFlag] = []


class CoverageRule(_Rule, frozen=True, kw_only=True, tag="coverage"):
    """Line coverage from a report (relative to the work dir) must reach ``threshold`` percent.

    The report is coverage.py's JSON (``totals.percent_covered``) or Cobertura
    XML (root attribute ``line-rate``, 0..1), told apart by its first character.
    """

    path: str = "coverage.json"
    threshold: Annotated[float, msgspec.Meta(ge=0, le=100)]


class FileExistsRule(_Rule, frozen=True, kw_only=True, tag="file_exists"):
    """A path (relative to the work dir) exists, or with ``must_exist = false`` does not."""

    path: str
    must_exist: bool = True


RuleConfig = CommandRule | ContentPatternRule | CoverageRule | FileExistsRule
RULE_TYPES: Final[tuple[type[_Rule], ...]] = get_args(RuleConfig)
TAGS: Final[dict[str, type[_Rule]]] = {str(t.__struct_config__.tag): t for t in RULE_TYPES}


@dataclass(frozen=True, slots=True)
class RuleContext:
    """What a rule may look at: the work dir, the agent's output, and where the loop is.

    ``timer`` is the monotonic clock (seconds) that times each rule for its recorded
    ``duration_ms``; inject a fake one for reproducible journals.
    """

    work_dir: Path
    agent_output: str = ""
    iteration: int = 1
    final: bool = False
    timer: Callable[[], float] = time.perf_counter


CustomResult = bool | tuple[bool, str]


@dataclass(frozen=True, slots=True)
class CustomRule:
    """A rule written in Python: ``fn`` answers ``passed`` or ``(passed, message)``."""

    name: str
    cadence: Cadence
    fn: Callable[[RuleContext], CustomResult]
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.cadence not in CADENCES:
            raise ValueError(f"cadence must be one of {', '.join(CADENCES)}, not {self.cadence!r}")


Rule = RuleConfig | CustomRule


def rule_type(rule: Rule) -> str:
    """The ``type`` recorded in a ``RuleResult``: the config tag, or ``custom``."""
    if isinstance(rule, CustomRule):
        return "custom"
    return str(rule.__struct_config__.tag)


def spec(rule: Rule) -> RuleSpec:
    """The rule as the journal records it (``SessionStarted.rules``)."""
    return RuleSpec(name=rule.name, type=rule_type(rule), cadence=rule.cadence, enabled=rule.enabled)


# --------------------------------------------------------------------------- parsing


def parse_rules(data: object, source: str, *, root: str = "rules") -> list[RuleConfig]:
    """Decode a list of rule tables (builtins, e.g. ``tomllib.load(f)["rules"]``).

    Raises ``RuleConfigError`` with one line such as
    ``ralph.toml: rules[1].timeout_s: expected a number, got 'soon'``;
    ``root`` names the list in that key path. Unknown keys and duplicate
    rule names are errors.
    """
    try:
        rules = msgspec.convert(data, list[RuleConfig])
    except msgspec.ValidationError as exc:
        path, problem = explain(str(exc), data, choices=_CHOICES, allowed_keys=_allowed_keys)
        raise RuleConfigError(source, root + path, problem) from None
    seen: set[str] = set()
    for i, rule in enumerate(rules):
        if rule.name in seen:
            raise RuleConfigError(source, f"{root}[{i}].name", f"duplicate rule name {rule.name!r}")
        seen.add(rule.name)
    return rules


_CHOICES: Final[Mapping[str, tuple[str, ...]]] = {
    "type": tuple(TAGS),
    "cadence": CADENCES,
    "flags": tuple(REGEX_FLAGS),
}


def _allowed_keys(data: object, path: str) -> list[str]:
    """The keys of the rule type at ``path`` (by its ``type``), for an unknown-key error."""
    table = lookup(data, path)
    cls = TAGS.get(str(table.get("type"))) if isinstance(table, Mapping) else None
    if cls is None:
        return []
    return sorted(["type", *cls.__struct_fields__])


# --------------------------------------------------------------------------- scheduling


def due(rule: Rule, iteration: int, final: bool) -> bool:
    """Whether the rule runs this iteration (seed 003 §4.3 lazy validation)."""
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
        case CustomRule():
            return _call_custom(rule, ctx)


# --------------------------------------------------------------------------- command


def _run_command(rule: CommandRule, ctx: RuleContext) -> _Outcome:
    args: str | list[str] = rule.shell if rule.shell is not None else list(rule.argv or [])
    cwd = ctx.work_dir / rule.cwd if rule.cwd else ctx.work_dir
    try:
        proc = subprocess.Popen(
            args,
            shell=rule.shell is not None,
            cwd=cwd,
            env={**os.environ, **rule.env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return _Outcome.error(_os_error_line(exc, args))
    try:
        out, _ = proc.communicate(timeout=rule.timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return _Outcome.error(f"timed out after {rule.timeout_s:g} s; process group killed")
    except BaseException:  # Ctrl-C, or a signal the loop runner turns into one: nothing keeps running
        _kill_group(proc)
        raise
    if proc.returncode == 0:
        return _Outcome(True)
    return _Outcome(False, _tail(out.decode(errors="replace"), rule.feedback_lines) or _exit_text(proc))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the rule's whole process group (it leads its own session) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # a descendant escaped the group and holds the pipe
        if proc.stdout is not None:
            proc.stdout.close()
        proc.wait()


def _os_error_line(exc: OSError, args: str | list[str]) -> str:
    program = args if isinstance(args, str) else args[0]
    if isinstance(exc, FileNotFoundError) and exc.filename in (program, None):
        return f"program not found: {program}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or program}"
    return f"cannot run {program}: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")


def _exit_text(proc: subprocess.Popen[bytes]) -> str:
    code = proc.returncode
    return f"killed by signal {-code}" if code < 0 else f"exited with code {code} (no output)"


def _tail(text: str, lines: int) -> str:
    """The last ``lines`` non-trailing-blank lines of ``text``."""
    if lines <= 0:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


# --------------------------------------------------------------------------- content_pattern


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
            return _Outcome.error(f"cannot read {rule.target}: {exc.strerror or exc}")
    found = regex.search(subject)
    where = "agent output" if rule.target == "agent_output" else rule.target
    if found is not None:
        text = _cut(found.group(0), MAX_MESSAGE_LINE)
        return _Outcome(rule.must_match, text if rule.must_match else f"unexpected match in {where}: {text}")
    return _Outcome(not rule.must_match, f"no match for {rule.pattern!r} in {where}")


# --------------------------------------------------------------------------- coverage


class _CoverageTotals(msgspec.Struct):
    percent_covered: Annotated[float, msgspec.Meta(ge=0, le=100)]


class _CoverageJson(msgspec.Struct):
    totals: _CoverageTotals


def _check_coverage(rule: CoverageRule, ctx: RuleContext) -> _Outcome:
    try:
        raw = (ctx.work_dir / rule.path).read_bytes()
    except OSError as exc:
        return _Outcome.error(f"no coverage report {rule.path}: {exc.strerror or exc}")
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


# --------------------------------------------------------------------------- file_exists, custom


def _check_file(rule: FileExistsRule, ctx: RuleContext) -> _Outcome:
    exists = (ctx.work_dir / rule.path).exists()
    return _Outcome(exists == rule.must_exist, f"{'exists' if exists else 'missing'}: {rule.path}")


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


# --------------------------------------------------------------------------- text helpers


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _exc_line(exc: BaseException) -> str:
    text = one_line(str(exc), MAX_MESSAGE_LINE)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = [
    "CADENCES",
    "RULE_TYPES",
    "Cadence",
    "CommandRule",
    "ContentPatternRule",
    "CoverageRule",
    "CustomRule",
    "FileExistsRule",
    "Rule",
    "RuleConfig",
    "RuleConfigError",
    "RuleContext",
    "due",
    "parse_rules",
    "rule_type",
    "run_rule",
    "run_rules",
    "spec",
]

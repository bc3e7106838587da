"""Validation rules: what one iteration is checked against.

A rule is configuration (a frozen msgspec Struct, tagged on ``type``, decoded from TOML or JSON by
``parse_rules``) or a ``CustomRule`` wrapping a Python callable; ``ledger.loop.validate.checks``
runs the rules that are due, one ``ledger.events.RuleResult`` per rule. Each type, when it passes
or errors, cadence, the rules that gate completion (``GATES_COMPLETION``), and why commands come
only from configuration: docs/design/validation.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final, Literal, get_args

import msgspec

from ledger.core.errors import explain, lookup
from ledger.events import RuleSpec, Signal
from ledger.loop.validate.todos import Todo

Cadence = Literal["cheap", "moderate", "expensive"]

RegexFlag = Literal["i", "m", "s"]

CADENCES: Final[tuple[str, ...]] = get_args(Cadence)

REGEX_FLAGS: Final[Mapping[str, re.RegexFlag]] = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}

MAX_MESSAGE_LINE: Final = 200
"""Longest one-line message (errors, matched text) before it is cut with an ellipsis."""


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
    message is the matched text (a detected promise, say).
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


class _GatingRule(_Rule, frozen=True, kw_only=True):
    """A rule whose failure refuses a completion (``GATES_COMPLETION``): due at every iteration."""

    def __post_init__(self) -> None:
        if self.cadence != "cheap":
            raise ValueError(
                f"a {self.__struct_config__.tag} rule can refuse any completion, so it runs every "
                f"iteration: cadence must be 'cheap', not {self.cadence!r}"
            )


class TodosRule(_GatingRule, frozen=True, kw_only=True, tag="todos"):
    """The todo validator: fails while the agent's own todo list (Claude Code's last ``TodoWrite``)
    has items not completed; passes when it has none, or when no list is known."""


class WorkDoneRule(_GatingRule, frozen=True, kw_only=True, tag="work_done"):
    """Fails when the agent promises completion (a COMPLETE-signal promise) from an iteration that
    made no tool call and changed no file: a task marked done with no work behind it."""


RuleConfig = CommandRule | ContentPatternRule | CoverageRule | FileExistsRule | TodosRule | WorkDoneRule

RULE_TYPES: Final[tuple[type[_Rule], ...]] = get_args(RuleConfig)

TAGS: Final[dict[str, type[_Rule]]] = {str(t.__struct_config__.tag): t for t in RULE_TYPES}

AGENT_RUN: Final = "agent_run"
"""The type of the result ``Engine.validate`` records first when the agent's run failed (named
``agent``): the iteration fails and a completion is refused."""


GATES_COMPLETION: Final[frozenset[str]] = frozenset({"todos", "work_done", AGENT_RUN})
"""The rule types whose failure refuses a completion (docs/design/signals.md#the-completion-gate);
``agent_run`` is the engine's own result for an agent run that failed (``docs/design/clients.md``)."""


@dataclass(frozen=True, slots=True)
class RuleContext:
    """What a rule may look at: the work dir, the agent's output, and where the loop is.

    ``timer`` is the monotonic clock (seconds) that times each rule for its recorded
    ``duration_ms``; inject a fake one for reproducible journals. What the iteration did:
    ``tool_count`` tool calls, ``files_modified``, the agent's todo list ``todos`` (``None``: not
    known), and the signals of the ``promises`` found in the output with the loop's vocabulary
    (``None``: not detected by the caller; a rule then reads them with the standard one).
    """

    work_dir: Path
    agent_output: str = ""
    iteration: int = 1
    final: bool = False
    timer: Callable[[], float] = time.perf_counter
    tool_count: int = 0
    files_modified: tuple[str, ...] = ()
    todos: tuple[Todo, ...] | None = None
    promises: tuple[Signal, ...] | None = None


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


__all__ = [
    "CADENCES",
    "GATES_COMPLETION",
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
    "TodosRule",
    "WorkDoneRule",
    "parse_rules",
    "rule_type",
    "spec",
]

"""Loop configuration: ``ralph.toml`` (or ``[tool.ralph]`` in ``pyproject.toml``)
and the ``iteration:`` block of agent markdown frontmatter (docs/design/agent-definitions.md).

Everything is validated with msgspec; an unknown key or a wrong type is a
``ConfigError`` whose message is one line naming the file, the key and what
was expected, e.g. ``ralph.toml: guards.thrashing.min_iterations: expected
int, got str``.

Per-agent default iteration limits: docs/design/iteration-limits.md#per-agent-defaults.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from ledger.core.errors import one_line
from ledger.core.snapshots import DEFAULT_MAX_BYTES
from ledger.loop.config.config_file import MAX_ITERATIONS_EXPECTED as MAX_ITERATIONS_EXPECTED
from ledger.loop.config.config_file import NOTICES as NOTICES
from ledger.loop.config.config_file import ConfigError as ConfigError
from ledger.loop.config.config_file import NotifyConfig as NotifyConfig
from ledger.loop.config.config_file import check_notify as check_notify
from ledger.loop.config.config_file import config_path as config_path
from ledger.loop.config.config_file import convert as convert
from ledger.loop.config.config_file import key_prefix, read_config
from ledger.loop.decide.guards import GuardConfig
from ledger.loop.validate.rules import RuleConfigError, parse_rules

AGENT_MAX_ITERATIONS: Final = {"me": 15, "qa": 10, "sec": 10, "doc": 6, "do": 8}
DEFAULT_MAX_ITERATIONS: Final = 15
AUTO_FLOOR: Final = 3  # the fewest iterations max_iterations = "auto" chooses (auto_floor)
AUTO_CEILING: Final = 50  # and the most (auto_ceiling)
FRONTMATTER_RE: Final = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
AGENTS_DIR: Final = Path(".claude") / "agents"
AGENT_NAME_RE: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


class LoopConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How one loop runs. ``rules`` are validation rule tables (see
    ``ledger.loop.validate.rules``); ``hooks`` are preset names registered in order. ``kind`` is the kind of
    task (``bugfix``, ``docs``: any name), which groups past loops for ``max_iterations = "auto"``
    (``ledger.loop.decide.limits``), between ``auto_floor`` and ``auto_ceiling``."""

    task: str = ""
    agent: str = ""
    kind: str = ""
    max_iterations: int | Literal["auto"] | None = None
    auto_floor: int = AUTO_FLOOR
    auto_ceiling: int = AUTO_CEILING
    completion_promises: list[str] = msgspec.field(default_factory=lambda: ["COMPLETE", "BLOCKED"])
    exclusive_promises: bool = False  # only completion_promises complete (not COMPLETE, LOOP_DONE)
    rules: list[dict[str, Any]] = []
    hooks: list[str] = []
    guards: GuardConfig = GuardConfig()
    require_passing_validation: bool = False
    notify: NotifyConfig = NotifyConfig()
    summary: bool = False  # each next prompt carries the loop so far (``ledger.loop.prompt.summary``)
    on_task_blocked: Literal["skip", "stop"] = "skip"  # a stuck task of a list (docs/design/task-lists.md)
    snapshots: bool = True  # a git snapshot of each iteration's work tree (docs/snapshots.md)
    snapshot_max_bytes: int = DEFAULT_MAX_BYTES  # a larger file is left out of a snapshot, and named

    def effective_max_iterations(self) -> int:
        """``max_iterations`` if set to a number, else the agent's default (``AGENT_MAX_ITERATIONS``; 15
        otherwise): also what ``"auto"`` falls back to without enough past loops."""
        if isinstance(self.max_iterations, int):
            return self.max_iterations
        return AGENT_MAX_ITERATIONS.get(self.agent, DEFAULT_MAX_ITERATIONS)


class AgentIteration(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """The ``iteration:`` block of an agent's frontmatter (docs/design/agent-definitions.md)."""

    enabled: bool = False
    max_iterations: int | Literal["auto"] | None = None  # "auto": as max_iterations in ralph.toml
    completion_promises: list[str] = []
    validation_rules: list[str] = []


def load_toml(path: Path) -> LoopConfig:
    """``ralph.toml`` (top level), or ``pyproject.toml``'s ``[tool.ralph]``."""
    try:
        data = tomllib.loads(read_config(path))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        data = tool.get("ralph", {}) if isinstance(tool, dict) else {}  # `tool = 1`: no [tool.ralph]
        return _check_rules(convert(data, LoopConfig, str(path), "tool.ralph"), str(path), "tool.ralph.")
    return _check_rules(convert(data, LoopConfig, str(path)), str(path))


def load_checked(path: Path, *, runner: bool = False) -> LoopConfig:
    """``load_toml``, then ``check_config``: a configuration that will not fail once a loop runs."""
    config = load_toml(path)
    check_config(config, str(path), key_prefix(path), runner=runner)
    return config


def _check_rules(config: LoopConfig, source: str, prefix: str = "") -> LoopConfig:
    """``config``, once its rule tables decode (``ledger.loop.validate.rules``): a bad rule is a one-line
    error
    here, not when a loop starts."""
    try:
        parse_rules(config.rules, source, root=prefix + "rules")
    except RuleConfigError as exc:
        raise ConfigError(str(exc)) from None
    return config


def has_config(project: Path) -> bool:
    """Whether ``project`` has a ralph configuration (``config_path`` finds one)."""
    return config_path(project) is not None


def find_config(project: Path) -> LoopConfig:
    """The project's configuration (``config_path``), checked in full; defaults when there is none."""
    path = config_path(project)
    return LoopConfig() if path is None else load_checked(path)


def _positive(value: float, integer: bool) -> str | None:
    """What is wrong with a threshold that must be > 0 (``None`` when it is fine)."""
    if integer:
        return None if value >= 1 else f"expected a whole number >= 1, got {value}"
    if not math.isfinite(value) or value <= 0:
        return f"expected a finite number of seconds > 0, got {value}"
    return None


def check_can_complete(config: LoopConfig, source: str, prefix: str = "") -> None:
    """Raise ``ConfigError`` when the loop as it will run (the hook's ``--completion-promise``
    applied) has exclusive promises and none listed: nothing could ever complete it."""
    if config.exclusive_promises and not config.completion_promises:
        raise ConfigError(
            f"{source}: {prefix}completion_promises: expected at least one promise word while "
            "exclusive_promises is true (nothing could complete the loop)"
        )


def source_of(project: Path) -> tuple[str, str]:
    """The configuration file of ``project`` as messages name it, and the prefix of its keys."""
    path = config_path(project)
    if path is None:
        return str(project / "ralph.toml"), ""
    return str(path), key_prefix(path)


def check_config(config: LoopConfig, source: str, prefix: str = "", *, runner: bool = False) -> None:
    """Raise ``ConfigError`` for the first setting that would fail or never take effect once a loop
    runs: ``max_iterations`` < 1, an empty promise, an unknown hook name, an invalid regular expression,
    a zero or negative threshold, thresholds of a disabled guard. With ``runner``, also the settings
    the loop runner never uses (``max_stop_retries``) and exclusive promises with none listed (the
    hook's ``loop start --completion-promise`` supplies one). The message is one line: ``source``, the key
    (after ``prefix``), what is expected."""
    from ledger.loop.decide.stop_policies import (
        PRESET_FNS,
    )  # here: the hooks module is not needed to read a file

    def bad(key: str, what: str) -> ConfigError:
        return ConfigError(f"{source}: {prefix}{key}: {what}")

    if isinstance(config.max_iterations, int) and config.max_iterations < 1:
        raise bad("max_iterations", f"{MAX_ITERATIONS_EXPECTED}, got {config.max_iterations}")
    _check_auto(config, bad)
    for i, word in enumerate(config.completion_promises):
        if not word.strip():
            raise bad(f"completion_promises[{i}]", "expected a promise word, got an empty string")
    if runner:
        check_can_complete(config, source, prefix)
    for i, name in enumerate(config.hooks):
        if name not in PRESET_FNS:
            known = ", ".join(sorted(PRESET_FNS))
            raise bad(f"hooks[{i}]", f"unknown hook {name!r} (expected one of: {known})")
    for i, rule in enumerate(config.rules):
        pattern = rule.get("pattern")
        if rule.get("type") == "content_pattern" and isinstance(pattern, str):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise bad(f"rules[{i}].pattern", f"invalid regular expression {pattern!r}: {exc}") from None
    _check_guards(config.guards, bad, runner)
    check_notify(config.notify, bad)
    if config.snapshot_max_bytes < 0:
        raise bad(
            "snapshot_max_bytes",
            f"expected a size in bytes >= 0 (0: no limit), got {config.snapshot_max_bytes}",
        )


def check_kind(kind: str) -> str:
    """``kind`` when it names a task kind, as an agent is named (``check_agent_name``), else
    ``ConfigError`` (``kind: expected ...``)."""
    return check_agent_name(kind, "kind")


def _check_auto(config: LoopConfig, bad: Callable[[str, str], ConfigError]) -> None:
    """``check_config``'s part for ``kind``, ``auto_floor`` and ``auto_ceiling``."""
    if config.kind:
        try:
            check_kind(config.kind)
        except ConfigError as exc:
            raise bad("kind", str(exc).removeprefix("kind: ")) from None
    if config.auto_floor < 1:
        raise bad("auto_floor", f"expected a whole number >= 1, got {config.auto_floor}")
    if config.auto_ceiling < config.auto_floor:
        raise bad(
            "auto_ceiling",
            f"expected a whole number >= auto_floor ({config.auto_floor}), got {config.auto_ceiling}",
        )


def _check_guards(guards: GuardConfig, bad: Callable[[str, str], ConfigError], runner: bool) -> None:
    """``check_config``'s part for ``[guards]``."""
    for name in guards.__struct_fields__:
        guard = getattr(guards, name)
        default = type(guard)()
        for key in guard.__struct_fields__:
            value = getattr(guard, key)
            if key == "enabled" or isinstance(value, bool):
                continue
            if name == "quality_regression" and key == "min_drop":
                fine = math.isfinite(value) and value >= 0
                problem = None if fine else f"expected a number >= 0, got {value}"
            elif name == "quality_regression" and key == "span" and value < 2:
                problem = f"expected a whole number >= 2 (a fall takes two scores), got {value}"
            elif name == "token_budget" and not guard.enabled:
                problem = None if value >= 0 else f"expected a whole number >= 1, got {value}"
            elif name == "context_window":
                fine = math.isfinite(value) and 0 < value <= 1
                problem = None if fine else f"expected a fraction > 0 and <= 1, got {value}"
            elif name == "cost_budget":
                fine = (not guard.enabled and value == 0) or (math.isfinite(value) and value > 0)
                problem = None if fine else f"expected a number of US dollars > 0, got {value}"
            else:
                problem = _positive(value, isinstance(value, int))
            if problem:
                raise bad(f"guards.{name}.{key}", problem)
        changed = [
            k for k in guard.__struct_fields__ if k != "enabled" and getattr(guard, k) != getattr(default, k)
        ]
        if changed and not guard.enabled:
            raise bad(
                f"guards.{name}.{changed[0]}",
                f"never takes effect while guards.{name}.enabled is false (set enabled = true, or remove it)",
            )
        if runner and name == "max_stop_retries" and changed:
            raise bad(
                f"guards.{name}.{changed[0]}",
                "never takes effect in `ralph-ledger run` (it counts stops blocked within one iteration; "
                "the runner never blocks a stop): remove it",
            )


def frontmatter(text: str, source: str) -> dict[str, Any]:
    """The YAML frontmatter of a markdown file ({} when there is none)."""
    m = FRONTMATTER_RE.match(text)
    if not m:
        return {}
    import yaml

    try:
        data = yaml.safe_load(m.group(1))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: frontmatter is not valid YAML: {one_line(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: frontmatter: expected a mapping of keys, got {type(data).__name__}")
    return data


def promise_word(text: str) -> str:
    """'<promise>COMPLETE</promise>' -> 'COMPLETE'; other text with its whitespace folded
    (``ledger.loop.validate.promises.unwrap``)."""
    from ledger.loop.validate.promises import unwrap

    return unwrap(text)


def load_agent(path: Path, base: LoopConfig | None = None) -> LoopConfig:
    """Apply an agent file's ``iteration:`` block to ``base``. Its
    ``validationRules`` name rules defined in ``base.rules``; an unknown name
    is an error."""
    base = base or LoopConfig()
    meta = frontmatter(read_config(path), str(path))
    name = meta.get("name")
    if isinstance(name, list | dict):  # not str()-ed: a YAML alias bomb would take minutes
        kind = "a list" if isinstance(name, list) else "a table"
        raise ConfigError(f"{path}: name: expected a string, got {kind}")
    agent = str(name or path.stem)
    block = convert(meta.get("iteration", {}), AgentIteration, str(path), "iteration")
    if isinstance(block.max_iterations, int) and block.max_iterations < 1:
        raise ConfigError(
            f"{path}: iteration.maxIterations: {MAX_ITERATIONS_EXPECTED}, got {block.max_iterations}"
        )
    rules = base.rules
    if block.validation_rules:
        rules = rules_named(base.rules, block.validation_rules, f"{path}: iteration.validationRules")
    return msgspec.structs.replace(
        base,
        agent=agent,
        max_iterations=block.max_iterations if block.max_iterations is not None else base.max_iterations,
        completion_promises=[promise_word(p) for p in block.completion_promises] or base.completion_promises,
        rules=rules,
    )


def check_agent_name(name: str, key: str = "agent") -> str:
    """``name`` when it is a safe agent file name (1-64 letters, digits, ``-`` and ``_``), else
    ``ConfigError`` saying so in one line, naming ``key``."""
    if AGENT_NAME_RE.fullmatch(name) is None or name.strip("-_") == "":
        raise ConfigError(
            f"{key}: expected a name of letters, digits, '-' and '_' (at most 64), got {name!r}"
        )
    return name


def agent_path(project: Path, agent: str) -> Path:
    """Where the definition of ``agent`` lives in ``project``: ``.claude/agents/<agent>.md``
    (``ConfigError`` for a name that is not a safe file name)."""
    return project / AGENTS_DIR / f"{check_agent_name(agent)}.md"


def agent_config(project: Path, agent: str, base: LoopConfig) -> LoopConfig:
    """``base`` with the ``iteration:`` block of ``project``'s ``.claude/agents/<agent>.md`` applied
    (``load_agent``), or ``base`` for ``agent`` when there is no such file. ``ConfigError`` (one line)
    for a name that is not a safe file name or a file that cannot be read or applied."""
    path = agent_path(project, agent)
    if not path.is_file():
        return msgspec.structs.replace(base, agent=agent)
    return load_agent(path, base)


def rules_named(
    rules: list[dict[str, Any]], names: list[str], key: str, source: str = ""
) -> list[dict[str, Any]]:
    """The rule tables of ``rules`` named in ``names``, in that order (an agent's ``validationRules``,
    an MCP call's): rules are defined in the configuration and only named elsewhere. ``ConfigError``
    ``{key}[i]: no rule named 'x'`` (``in {source}``) with the names defined, for a name none has."""
    known = {str(r.get("name")): r for r in rules}
    for i, name in enumerate(names):
        if name not in known:
            where = f" in {source}" if source else ""
            defined = ", ".join(sorted(known)) or "none defined in ralph.toml"
            raise ConfigError(f"{key}[{i}]: no rule named {name!r}{where} (expected one of: {defined})")
    return [known[n] for n in names]


def recorded_config(config: LoopConfig) -> dict[str, Any]:
    """The configuration as ``session_started`` records it; ``exclusive_promises``, ``summary`` and
    ``on_task_blocked`` only when set (the snapshot settings only when not the defaults), so the
    records of loops without them are as they were before they existed."""
    recorded: dict[str, Any] = msgspec.to_builtins(config)
    for key in ("exclusive_promises", "summary"):
        if not recorded[key]:
            del recorded[key]
    defaults = (
        ("kind", ""),
        ("on_task_blocked", "skip"),
        ("auto_floor", AUTO_FLOOR),
        ("auto_ceiling", AUTO_CEILING),
        ("snapshots", True),
        ("snapshot_max_bytes", DEFAULT_MAX_BYTES),
    )
    for key, default in defaults:
        if recorded[key] == default:  # likewise the settings of adaptive limits
            del recorded[key]
    del recorded["notify"]  # its URLs may hold secrets: read from the configuration when sent
    return recorded


def changed_settings(recorded: dict[str, Any], current: LoopConfig) -> list[str]:
    """The settings of ``current`` (the configuration as a loop's start would read it now) that differ
    from ``recorded`` (what the loop's ``session_started`` recorded), by name, the task aside: what an
    edit of the configuration file since the start would change, were the loop to take it (it does
    not: docs/design/loop-config.md)."""
    now = recorded_config(current)
    keys = (now.keys() | recorded.keys()) - {"task"}
    return sorted(k for k in keys if now.get(k) != recorded.get(k))

"""The project's configuration file: where it is (``ralph.toml``, else ``[tool.ralph]`` in
``pyproject.toml``), how its keys are named, its one-line errors, and its ``[notify]`` table read on
its own. Light (the standard library and msgspec): the Stop hook reads ``[notify]`` when a loop ends
without importing the rest of the configuration (``ledger.loop.config.loop_config``, which re-exports
these)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import msgspec

from ledger.core.errors import closest, error_reason, explain, tokens

T = TypeVar("T")
NOTICES: Final = ("complete", "blocked", "escalated", "guard")
"""What ``[notify]`` notifies about (``ledger.notify``): a session completed, blocked, escalated; a guard."""
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
MAX_ITERATIONS_EXPECTED: Final = 'expected a whole number >= 1 or "auto"'
"""What ``max_iterations`` (``maxIterations``) takes: the words of its one-line errors."""


class ConfigError(Exception):
    """Bad configuration; the message is one line naming file and key."""


class NotifyConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[notify]``: the apprise URLs notified (Slack, ntfy, e-mail, ``json://`` webhooks, desktop) and
    ``on`` what (``NOTICES``). Never recorded in a journal: a URL may hold a secret."""

    urls: list[str] = []
    on: list[str] = msgspec.field(default_factory=lambda: list(NOTICES))


CHOICES: Final[dict[str, tuple[str, ...]]] = {"on_task_blocked": ("skip", "stop")}
"""The values a configuration key of fixed words takes, named when a value is none of them."""


def convert(data: Any, typ: type[T], source: str, prefix: str = "") -> T:
    """msgspec.convert with a one-line error naming ``source`` and the key."""
    try:
        return msgspec.convert(data, typ)
    except msgspec.ValidationError as exc:
        where, what = explain(str(exc), data, choices=CHOICES)
        field = where.lstrip(".")
        if field in ("max_iterations", "maxIterations") and isinstance(data, dict):  # int | "auto"
            what = f"{MAX_ITERATIONS_EXPECTED}, got {_shown(data[field])}"  # not msgspec's union words
        key = (
            (prefix + where)
            if where.startswith("[")
            else ".".join(p for p in (prefix, where.lstrip(".")) if p)
        )
        if what == "unknown key":
            what += _meant_key(typ, where)
        raise ConfigError(f"{source}: {key or '(top level)'}: {what}") from None


def _meant_key(typ: type[Any], where: str) -> str:
    """For an unknown key at ``where`` (``.guards.thrashing.treshold``): ``; did you mean 'threshold'?``
    when a key of the table it is in is close to it, else ``""``."""
    from msgspec import inspect

    *parents, (_, slip) = tokens(where) or [(None, "")]
    info: Any = inspect.type_info(typ)
    for _, name in parents:
        info = _table(info)
        if name and isinstance(info, inspect.StructType):
            info = next((f.type for f in info.fields if f.encode_name == name), None)
        elif not name and isinstance(info, inspect.DictType):
            info = info.value_type
        else:
            return ""
    info = _table(info)
    keys = [f.encode_name for f in info.fields] if isinstance(info, inspect.StructType) else []
    meant = closest(slip, keys)
    return f"; did you mean {meant!r}?" if meant else ""


def _table(info: Any) -> Any:
    """A msgspec type's table (struct) type: the type itself, or the struct of a union (``X | None``)."""
    from msgspec import inspect

    if isinstance(info, inspect.UnionType):
        return next((t for t in info.types if isinstance(t, inspect.StructType)), info)
    return info


def _shown(value: Any) -> str:
    """A value as an error names it: a scalar's repr (cut), else only its type (a list may be a YAML
    alias bomb: its repr would never end)."""
    if isinstance(value, str | int | float | bool) or value is None:
        text = repr(value)
        return text if len(text) <= 60 else text[:59] + "…"
    return f"a {type(value).__name__}"


def read_config(path: Path) -> str:
    """The text of a configuration file; ``ConfigError`` (one line) when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {error_reason(exc)}") from None


def key_prefix(path: Path) -> str:
    """How the keys of the configuration in ``path`` are named: ``tool.ralph.`` in a pyproject.toml."""
    return "tool.ralph." if path.name == "pyproject.toml" else ""


def config_path(project: Path) -> Path | None:
    """The file holding the project's configuration: ``ralph.toml``, else a ``pyproject.toml`` with
    a ``[tool.ralph]`` table, else ``None``. A ``pyproject.toml`` that cannot be read or parsed is
    returned too, so that loading it reports why."""
    ralph = project / "ralph.toml"
    if ralph.is_file():
        return ralph
    pyproject = project / "pyproject.toml"
    if not pyproject.is_file():
        return None
    import tomllib  # here: a project without a configuration file never pays for it

    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return pyproject
    tool = data.get("tool")
    return pyproject if isinstance(tool, dict) and "ralph" in tool else None


def check_notify(notify: NotifyConfig, bad: Callable[[str, str], ConfigError]) -> None:
    """``[notify]``'s checks (``check_config`` runs them): each URL ``scheme://...`` (apprise checks
    the rest when it sends), each ``on`` one of ``NOTICES``."""
    for i, url in enumerate(notify.urls):
        scheme, sep, rest = url.strip().partition("://")
        if not sep or not _SCHEME.fullmatch(scheme) or not rest.strip():
            raise bad(f"notify.urls[{i}]", f"expected a notification URL such as 'ntfy://topic', got {url!r}")
    for i, what in enumerate(notify.on):
        if what not in NOTICES:
            raise bad(f"notify.on[{i}]", f"expected one of {', '.join(NOTICES)}, got {what!r}")


def load_notify(project: Path) -> NotifyConfig | None:
    """``project``'s ``[notify]`` table, checked (``None`` when it has no configuration file);
    ``ConfigError`` (one line naming the file and the key) when it cannot be read or is bad. Only
    this table is read: the rest of the file is the loop's (``ledger.loop.config.loop_config``)."""
    path = config_path(project)
    if path is None:
        return None
    import tomllib

    try:
        data = tomllib.loads(read_config(path))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    prefix = key_prefix(path)
    if prefix:
        tool = data.get("tool")
        data = tool.get("ralph", {}) if isinstance(tool, dict) else {}
        data = data if isinstance(data, dict) else {}
    notify = convert(data.get("notify", {}), NotifyConfig, str(path), prefix + "notify")

    def bad(key: str, what: str) -> ConfigError:
        return ConfigError(f"{path}: {prefix}{key}: {what}")

    check_notify(notify, bad)
    return notify

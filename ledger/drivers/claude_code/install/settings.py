"""Installing ``ralph-ledger``'s hook (Stop, SubagentStop, StopFailure, SessionStart) into a project's
``.claude/settings.json``: merged into what is there, never clobbering other hooks, with one-line
errors naming the file and key.

Stop hooks never import this module (nor ``json``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from ledger.core.atomic import atomic_write
from ledger.drivers.claude_code.stop.plugin import ClaudeCodeError, StrPath

SETTINGS_FILE: Final = ".claude/settings.json"


class SettingsError(ClaudeCodeError):
    """``.claude/settings.json`` cannot be merged into."""


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def load_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` ({} when the file is missing or blank); ``SettingsError`` naming
    the file when it cannot be read, is not JSON or not an object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise SettingsError(f"{path}: not UTF-8 text") from None
    except OSError as e:
        from ledger.core.errors import error_reason

        raise SettingsError(f"{path}: cannot read: {error_reason(e)}") from None
    if not text.strip():
        return {}
    import json  # here: Stop hooks never read the settings

    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SettingsError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: expected a JSON object, got {_kind(data)}")
    return data


def expect(value: object, kind: type, where: str, path: Path) -> None:
    """``SettingsError`` when ``value`` (at key ``where`` of ``path``) is not of ``kind``."""
    if not isinstance(value, kind):
        wanted = "an object" if kind is dict else "a list"
        raise SettingsError(f"{path}: {where}: expected {wanted}, got {_kind(value)}")


HOOK_EVENTS: Final = ("Stop", "SubagentStop", "StopFailure", "SessionStart")
"""The Claude Code events the hook is installed for: a stop decides the loop, a sub-agent's stop is
recorded for it (``ledger.drivers.claude_code.stop.subagent``), a turn an API error ended and a
session's start (resumed, forked) are acted on by ``ledger.drivers.claude_code.stop.lifecycle``
(docs/design/claude-code-hooks.md)."""


DETACHED: Final = ("StopFailure",)
"""The events whose hook runs detached: Claude Code 2.1.328 does not wait for a StopFailure hook. It
sends it SIGTERM as it starts (before Python could set a handler) and ends what is left of it when it
exits, so the command ignores SIGTERM and starts the hook in a session of its own (``setsid -f``)
to record the failure after the client moved on (docs/design/claude-code-hooks.md)."""

DETACH_PREFIX: Final = "trap '' TERM; exec "
"""What ``detached`` puts before a command (then ``setsid -f``, where there is a ``setsid``)."""


def detached(command: str) -> str:
    """``command`` run with SIGTERM ignored and, where there is a ``setsid``, in a new session (so
    that the client ending its hook does not end it)."""
    import shutil

    return DETACH_PREFIX + ("setsid -f " if shutil.which("setsid") else "") + command


def attached(command: str) -> str:
    """``command`` without what ``detached`` added (itself when it has none)."""
    if not command.startswith(DETACH_PREFIX):
        return command
    rest = command.removeprefix(DETACH_PREFIX)
    return rest.removeprefix("setsid -f ")


def _entries(settings: dict[str, Any], path: Path, event: str) -> list[Any]:
    """``settings["hooks"][event]`` (created when missing), its shape checked."""
    hooks = settings.setdefault("hooks", {})
    expect(hooks, dict, "hooks", path)
    stop = hooks.setdefault(event, [])
    expect(stop, list, f"hooks.{event}", path)
    entries: list[Any] = stop
    for n, entry in enumerate(entries):
        expect(entry, dict, f"hooks.{event}[{n}]", path)
        inner = entry.get("hooks", [])
        expect(inner, list, f"hooks.{event}[{n}].hooks", path)
        for m, hook in enumerate(inner):
            expect(hook, dict, f"hooks.{event}[{n}].hooks[{m}]", path)
    return entries


def _has_command(entry: dict[str, Any], command: str) -> bool:
    return any(h.get("type") == "command" and h.get("command") == command for h in entry.get("hooks", []))


def install_hook(
    settings_path: StrPath,
    command: str,
    *,
    replaces: Callable[[str], bool] | None = None,
    events: tuple[str, ...] = HOOK_EVENTS,
    commands: Mapping[str, str] | None = None,
) -> bool:
    """Add a hook running ``command`` for each of ``events`` (``HOOK_EVENTS``) to a Claude Code
    settings file, keeping everything else.

    Returns False when that command is already every event's hook. A hook whose command
    ``replaces`` accepts (an older form of the same hook) is given ``command`` in its place instead
    of adding a second one. Creates the file and its folder when missing (an empty file counts as
    ``{}``); ``SettingsError`` when the file is not JSON or not shaped like settings (checked for
    every event before anything is written). Written atomically with 2-space indentation.
    ``commands`` gives an event another command than ``command`` (a ``detached`` one).
    """
    import json  # here, like in load_json_object: Stop hooks import this module, never json

    if not command.strip():
        raise ValueError("command must not be empty")
    path = Path(settings_path)
    settings = load_json_object(path)
    changed = False
    for event, entries in [(event, _entries(settings, path, event)) for event in events]:
        wanted = (commands or {}).get(event, command)
        if any(_has_command(entry, wanted) for entry in entries):
            continue
        older = [
            hook
            for entry in entries
            for hook in entry.get("hooks", [])
            if replaces is not None
            and hook.get("type") == "command"
            and replaces(str(hook.get("command", "")))
        ]
        for hook in older:
            hook["command"] = wanted
        if not older:
            entries.append({"hooks": [{"type": "command", "command": wanted}]})
        changed = True
    if changed:
        atomic_write(path, (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return changed

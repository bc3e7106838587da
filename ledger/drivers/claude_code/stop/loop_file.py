"""The ledger-native loop's file, ``.claude/ralph-ledger.local.json``: what ``loop start`` writes and
which Claude Code session and ledger session a stop claims it for (see ``native``). Light: the
SubagentStop hook reads it without importing DuckDB."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from ledger.core.atomic import atomic_write
from ledger.core.errors import error_reason
from ledger.core.home import Home
from ledger.drivers.claude_code.stop.loop_sessions import (
    LoopRecord,
    belongs,
    claude_session_of,
    loop_session,
    named_session,
)
from ledger.drivers.claude_code.stop.stop_input import HookInput

AGENT: Final = "claude-code"
"""The agent a ledger-native loop records when neither its configuration nor ``loop start`` names one."""


class LoopFile(msgspec.Struct, frozen=True, kw_only=True):
    """``.claude/ralph-ledger.local.json``: who owns the loop and what was asked.

    ``max_iterations`` and ``completion_promise`` override the configuration
    when set (a completion promise is then the only one that completes, as
    with the plugin); ``claude_session_id`` and ``ledger_session`` are empty
    until the first stop claims the file.
    """

    prompt: str
    claude_session_id: str = ""
    max_iterations: int | Literal["auto"] | None = (
        None  # "auto": ledger.loop.decide.limits chooses at the start
    )
    completion_promise: str | None = None
    started_at: str | None = None  # when ``loop start`` wrote it (None: a file from before loop ids)
    ledger_session: str = ""  # the loop's ledger session, chosen by the first stop
    agent: str = ""  # loop start --agent: .claude/agents/<agent>.md applies (config.agent_config)
    kind: str = ""  # loop start --kind: the kind of task (overrides the configuration's kind)
    tasks: str = ""  # loop start --tasks: the task list's file (absolute), read by the first stop


class LoopFileError(ValueError):
    """The loop file is unreadable or malformed; one line naming it."""


def read_loop_file(path: Path) -> LoopFile | None:
    """The loop file, or ``None`` when there is none; ``LoopFileError`` when it is malformed."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LoopFileError(f"{path}: cannot read: {error_reason(exc)}") from None
    try:
        loop = msgspec.json.decode(raw, type=LoopFile)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise LoopFileError(f"{path}: not a ralph-ledger loop file: {exc}") from None
    if not loop.prompt.strip() and not loop.tasks:
        raise LoopFileError(f"{path}: the prompt is empty")
    if isinstance(loop.max_iterations, int) and loop.max_iterations < 1:
        raise LoopFileError(
            f"{path}: max_iterations: expected a whole number >= 1, got {loop.max_iterations}"
        )
    return loop


def write_loop_file(path: Path, loop: LoopFile) -> None:
    """Write the loop file atomically, readable by its owner only."""
    atomic_write(path, msgspec.json.format(msgspec.json.encode(loop), indent=2) + b"\n", mode=0o600)


def claim(
    loop: LoopFile, data: HookInput, home: Home, clock: Callable[[], datetime]
) -> tuple[LoopFile, LoopRecord, int]:
    """The loop claimed by this stop's session, naming its ledger session; that session's record
    and where its first turn starts reading the transcript."""
    sid = loop.ledger_session
    if sid and belongs(sid, data.session_id):
        return loop, *named_session(home, data.session_id, sid, clock)
    claimed = loop.claude_session_id == data.session_id

    def same_loop(record: LoopRecord) -> bool:  # a file claimed before loops had their own session
        return claimed and loop.started_at is None

    sid, record, carry = loop_session(home, data.session_id, same_loop, clock)
    claim = msgspec.structs.replace(loop, claude_session_id=data.session_id, ledger_session=sid)
    return claim, record, carry


def restore(project: Path, journal: Path) -> Path | None:
    """After an ``unblock`` of a ledger-native loop (its journal ``journal``; its session ``cc-<id>``
    or ``cc-<id>-N``), write its loop file again in ``project`` (the loop's end removed it) so that
    the next stop of its Claude Code session goes on with it; its path, or ``None`` when the session
    is not such a loop (a plugin loop, a runner's) or a loop file is there already."""
    from ledger import events as ev
    from ledger.drivers.claude_code.stop.locate import LOOP_FILE, STATE_FILE
    from ledger.storage.fold import events_of

    sid = journal.name.removesuffix(".jsonl")
    path = project / LOOP_FILE
    if not sid.startswith("cc-") or path.exists() or (project / STATE_FILE).exists():
        return None
    started = [e for e in events_of(journal) if isinstance(e, ev.SessionStarted)]
    if not started or started[-1].config.get("mode") == "ralph-loop":
        return None
    first = started[-1]
    claude = claude_session_of(sid, journal.parent)
    loop = LoopFile(
        prompt=first.prompt or first.task,
        claude_session_id=claude,
        ledger_session=sid,
        **_as_started(first.config),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_loop_file(path, loop)
    return path


def _as_started(config: dict[str, Any]) -> dict[str, Any]:
    """The loop file's overrides that give, over the project's configuration file, the settings a
    loop recorded at its start (``config``) when that file is as it was: what ``native.config_note``
    compares the file with once an ``unblock`` wrote the loop file again."""
    promises = config.get("completion_promises") or []
    agent = config.get("agent") or ""
    max_iterations = config.get("max_iterations")
    return {
        "max_iterations": max_iterations
        if max_iterations == "auto" or isinstance(max_iterations, int)
        else None,
        "completion_promise": promises[0]
        if config.get("exclusive_promises") and len(promises) == 1
        else None,
        "kind": str(config.get("kind") or ""),
        "agent": "" if agent == AGENT else str(agent),
    }

"""What a Claude Code stop reads and answers: the Stop event's stdin (:class:`HookInput`), the
transcript it names, and what the hook prints (:class:`HookOutcome`). Where the loop and its
home are: ``ledger.drivers.claude_code.stop.locate``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import msgspec

from ledger.core.words import plural
from ledger.drivers.claude_code.stop.locate import MAX_STDIN, HookInputError


class HookInput(msgspec.Struct, frozen=True, kw_only=True):
    """The hook's stdin (unknown fields are ignored): a Stop's, a SubagentStop's, a StopFailure's
    (``error``, ``error_details``) or a SessionStart's (``source``). A SubagentStop's
    ``session_id`` and ``transcript_path`` are the parent session's; ``agent_id``, ``agent_type``
    and ``agent_transcript_path`` (its own transcript, under ``subagents/``) name the sub-agent."""

    session_id: str = ""
    transcript_path: str | None = ""  # null: no transcript, as when absent
    cwd: str = ""
    stop_hook_active: bool = False
    last_assistant_message: str | None = None
    hook_event_name: str = "Stop"
    agent_id: str | None = None
    agent_type: str | None = None
    agent_transcript_path: str | None = None
    prompt_id: str | None = None
    background_tasks: list[Any] | None = None
    session_crons: list[Any] | None = None
    error: str | None = None  # StopFailure: the kind of API error ("rate_limit", "server_error", ...)
    error_details: str | None = None  # StopFailure: more about it, when the client gives it
    source: str | None = None  # SessionStart: "startup", "resume", "clear", "compact" or "fork"

    def tasks(self) -> list[dict[str, Any]]:
        """The background tasks the client still knows (objects only)."""
        return [t for t in self.background_tasks or () if isinstance(t, dict)]

    def running_subagents(self) -> list[dict[str, Any]]:
        """The sub-agents still running in the background: the client wakes the agent when each
        ends, so the stop waits for them (docs/design/claude-code-stop.md)."""
        return [t for t in self.tasks() if t.get("type") == "subagent" and t.get("status") in RUNNING]

    def stop_id(self, mark: str) -> str:
        """This stop's identity: its Claude Code session, the prompt its turn answers and the hook
        run's ``mark`` (``locate.new_mark``), recorded with its decision (docs/design/warm-worker.md)."""
        return f"{self.session_id}:{self.prompt_id or ''}:{mark}"

    def stop_fields(self, stop_id: str = "") -> dict[str, Any]:
        """What a ``stop_decided`` event records of this input (and the stop's identity)."""
        return {
            "stop_id": stop_id,
            "prompt_id": self.prompt_id or "",
            "background_tasks": self.tasks(),
            "session_crons": [c for c in self.session_crons or () if isinstance(c, dict)],
        }


RUNNING: Final = frozenset({"running", "pending"})
"""A background task's statuses while it works (2.1.328 sends ``running``)."""


def waiting_reason(tasks: list[dict[str, Any]]) -> str:
    """The reason of a stop allowed while sub-agents run."""
    names = ", ".join(str(t.get("description") or t.get("id") or "?") for t in tasks[:3])
    return f"waiting for {plural(len(tasks), 'background sub-agent')} to finish: {names}"


class HookOutcome(msgspec.Struct, frozen=True):
    """What the hook process prints and its exit code (always 0), and the journals it appended to
    without an fsync: :func:`main` syncs them once the answer is out (see docs/reliability.md)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    sync: tuple[str, ...] = ()


def parse_input(raw: bytes) -> HookInput:
    """Decode stdin strictly enough to act on, with one-line errors."""
    if len(raw) > MAX_STDIN:
        raise HookInputError(f"stdin is {len(raw)} bytes, over the {MAX_STDIN} byte limit")
    try:
        data = msgspec.json.decode(raw, type=HookInput)
    except msgspec.ValidationError as exc:
        raise HookInputError(f"stdin is not a Stop hook event: {exc}") from None
    except msgspec.DecodeError as exc:
        raise HookInputError(f"stdin is not JSON: {exc}") from None
    except RecursionError:
        raise HookInputError("stdin is not a Stop hook event: JSON nested too deeply") from None
    if not data.session_id.strip():
        raise HookInputError("stdin has no session_id")
    return data


def transcript_problem(data: HookInput) -> tuple[Path | None, str]:
    """The transcript path from stdin, resolved, and ``""``; or None and what is wrong with it
    (see :func:`resolve_transcript`)."""
    return resolve_transcript(data.transcript_path, "transcript_path")


def resolve_transcript(given: str | None, key: str) -> tuple[Path | None, str]:
    """The transcript path stdin gives under ``key``, resolved, and ``""``; or None and what is
    wrong with it (absent, relative, missing, not a regular file: a directory, a FIFO, a device or
    a symlink loop could block or never end)."""
    if not given:
        return None, f"the {'Stop' if key == 'transcript_path' else 'SubagentStop'} event names no {key}"
    try:
        path = Path(given).expanduser()
        if not path.is_absolute():
            return None, f"transcript {given!r} is not an absolute path"
        path = path.resolve()
        if not path.exists():
            return None, f"transcript {path} does not exist"
        return (path, "") if path.is_file() else (None, f"transcript {path} is not a regular file")
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte, "~" with no home
        return None, f"transcript {given!r} cannot be resolved"


def transcript_of(data: HookInput) -> Path | None:
    """The transcript path from stdin, resolved; None when absent, relative, or not a regular file
    (see :func:`transcript_problem`)."""
    return transcript_problem(data)[0]

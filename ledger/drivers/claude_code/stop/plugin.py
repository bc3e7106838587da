"""The ``ralph-loop`` plugin's state file (``.claude/ralph-loop.local.md``) and its Stop-hook
decisions, and ``loop start`` argument parsing, as the official plugin's scripts behave; where and
why this differs from them: ``docs/claude-code-plugin.md``.

Stop hooks import this module, so it uses the standard library and msgspec only (no DuckDB,
PyArrow or PyYAML; the frontmatter is parsed here; ``tests/architecture/test_house_rules.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import msgspec
from msgspec.structs import replace

from ledger.core.atomic import atomic_write, sweep_temps
from ledger.drivers.claude_code.stop.locate import STATE_FILE
from ledger.loop.validate.promises import unwrap

MAX_ASSISTANT_LINES: Final = 100  # the plugin looks at the last 100 assistant lines only

StrPath = str | os.PathLike[str]
Action = Literal["allow", "block"]


class ClaudeCodeError(Exception):
    """A Claude Code integration problem; the message is one line."""


class StateError(ClaudeCodeError):
    """The loop state file is malformed or unreadable."""


class UsageError(ClaudeCodeError):
    """``loop start`` arguments are wrong."""


# --------------------------------------------------------------------------- state file


class LoopState(msgspec.Struct, frozen=True, kw_only=True):
    """The plugin's loop state. ``completion_promise`` None means none; ``session_id`` "" means
    not yet claimed; ``extra`` keeps unknown frontmatter lines (key, raw value) in order."""

    active: bool = True
    iteration: int = 1
    max_iterations: int = 0
    completion_promise: str | None = None
    session_id: str = ""
    started_at: str | None = None
    prompt: str
    extra: tuple[tuple[str, str], ...] = ()
    ledger_session: str = ""  # the loop's ledger session, written by the first stop ("" before it)

    def __post_init__(self) -> None:
        if self.iteration < 0 or self.max_iterations < 0:
            raise ValueError("iteration and max_iterations must not be negative")


_KEY_LINE: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(.*)")
_WHOLE: Final = re.compile(r"[0-9]+")
_KNOWN: Final = (
    "active",
    "iteration",
    "session_id",
    "max_iterations",
    "completion_promise",
    "started_at",
    "ledger_session",
)
_NULLS: Final = ("", "null", "~")


def _unquote(value: str) -> str:
    """Drop one pair of surrounding double quotes, as the plugin's ``sed 's/^"\\(.*\\)"$/\\1/'``."""
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


def _frontmatter(lines: Sequence[str], source: str) -> dict[str, str]:
    """``key: value`` pairs (values stripped); blank and ``#`` lines are skipped."""
    fields: dict[str, str] = {}
    for number, line in enumerate(lines, start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _KEY_LINE.fullmatch(line)
        if m is None:
            raise StateError(f"{source}: line {number}: expected 'key: value', got {line!r}")
        if m[1] in fields:
            raise StateError(f"{source}: {m[1]}: given twice")
        fields[m[1]] = m[2].strip()
    return fields


def _whole(fields: dict[str, str], key: str, source: str) -> int:
    if key not in fields:
        raise StateError(f"{source}: {key}: missing")
    value = fields[key]
    if not _WHOLE.fullmatch(value):
        raise StateError(f"{source}: {key}: expected a whole number, got {value!r}")
    return int(value)


def _flag(fields: dict[str, str], source: str) -> bool:
    value = fields.get("active", "true")
    if value not in ("true", "false"):
        raise StateError(f"{source}: active: expected true or false, got {value!r}")
    return value == "true"


def _promise(fields: dict[str, str]) -> str | None:
    raw = fields.get("completion_promise", "")
    return None if raw in _NULLS else _unquote(raw)


def parse_state(text: str, *, source: str = STATE_FILE) -> LoopState:
    """Parse the state file's text; ``source`` names it in ``StateError`` messages."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[0] != "---":
        raise StateError(f"{source}: expected a '---' line opening the frontmatter")
    try:
        end = lines.index("---", 1)
    except ValueError:
        raise StateError(f"{source}: the frontmatter has no closing '---' line") from None
    fields = _frontmatter(lines[1:end], source)
    body = lines[end + 1 :]
    if body and body[0] == "":
        body = body[1:]
    return LoopState(
        active=_flag(fields, source),
        iteration=_whole(fields, "iteration", source),
        max_iterations=_whole(fields, "max_iterations", source),
        completion_promise=_promise(fields),
        session_id=_unquote(fields.get("session_id", "")),
        started_at=_unquote(fields["started_at"]) if "started_at" in fields else None,
        prompt="\n".join(body).rstrip("\n"),
        extra=tuple((k, v) for k, v in fields.items() if k not in _KNOWN),
        ledger_session=_unquote(fields.get("ledger_session", "")),
    )


def read_state(path: StrPath) -> LoopState | None:
    """The loop state at ``path``, None when there is no file; ``StateError`` when malformed."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise StateError(f"{p}: not UTF-8 text") from None
    except OSError as e:
        from ledger.core.errors import error_reason

        raise StateError(f"{p}: cannot read: {error_reason(e)}") from None
    return parse_state(text, source=str(p))


def _one_line(name: str, value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError(f"{name} must be one line")
    return value


def _promise_yaml(promise: str | None) -> str:
    """``null`` or the promise in double quotes, newlines flattened (as the newest setup does)."""
    if promise is None:
        return "null"
    return '"' + promise.replace("\r", " ").replace("\n", " ") + '"'


def render_state(state: LoopState) -> str:
    """The state file text, in the plugin's layout (``session_id: `` keeps its trailing space)."""
    lines = [
        "---",
        f"active: {'true' if state.active else 'false'}",
        f"iteration: {state.iteration}",
        f"session_id: {_one_line('session_id', state.session_id)}",
        f"max_iterations: {state.max_iterations}",
        f"completion_promise: {_promise_yaml(state.completion_promise)}",
    ]
    if state.started_at is not None:
        lines.append(f'started_at: "{_one_line("started_at", state.started_at)}"')
    if state.ledger_session:
        lines.append(f"ledger_session: {_one_line('ledger_session', state.ledger_session)}")
    lines += [f"{k}: {_one_line(k, v)}" for k, v in state.extra]
    return "\n".join([*lines, "---", "", state.prompt]) + "\n"


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, keeping its mode (see ``ledger.core.atomic``)."""
    atomic_write(path, text.encode("utf-8"))


def write_state(path: StrPath, state: LoopState) -> None:
    """Write ``state`` to ``path`` atomically, creating the folder if needed."""
    _atomic_write(Path(path), render_state(state))


def new_state(args: LoopArgs, *, session_id: str = "", now: datetime | None = None) -> LoopState:
    """The state ``loop start`` writes: iteration 1, ``started_at`` in UTC like the setup script."""
    started = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return LoopState(
        iteration=1,
        max_iterations=args.max_iterations,
        completion_promise=args.completion_promise,
        session_id=session_id,
        started_at=started,
        prompt=args.prompt,
    )


# --------------------------------------------------------------------------- decisions


Outcome = Literal[
    "continue",
    "no_loop",
    "other_session",
    "max_reached",
    "completed",
    "no_transcript",
    "no_prompt",
    "block_cap",
    "paused",
    "waiting",
]


class PluginDecision(msgspec.Struct, frozen=True, kw_only=True):
    """What the plugin's Stop hook does for one stop.

    ``outcome`` says why; ``reason`` is the prompt when blocking and a short plain explanation when
    allowing. ``system_message`` is "" when allowing. ``next_state`` None means the file is deleted
    (or stays absent); the unchanged ``state`` means the file is left alone. ``message_for_user`` is
    what the plugin prints when it lets the agent stop, on stderr when ``message_to_stderr``.
    """

    action: Action
    outcome: Outcome
    reason: str = ""
    system_message: str = ""
    next_state: LoopState | None = None
    message_for_user: str | None = None
    message_to_stderr: bool = False

    @property
    def ours(self) -> bool:
        """Whether this session drives the loop (False: no loop, or another session's loop)."""
        return self.outcome not in ("no_loop", "other_session")

    @property
    def completed(self) -> bool:
        """The completion promise was detected."""
        return self.outcome == "completed"

    @property
    def max_reached(self) -> bool:
        """The loop stopped at ``max_iterations``."""
        return self.outcome == "max_reached"

    def hook_json(self) -> str | None:
        """The JSON the plugin prints to block (as ``jq -n`` formats it), None when allowing."""
        if self.action != "block":
            return None
        body = {"decision": "block", "reason": self.reason, "systemMessage": self.system_message}
        # byte for byte json.dumps(body, indent=2, ensure_ascii=False), without importing json
        return msgspec.json.format(msgspec.json.encode(body), indent=2).decode()


_NO_PROMPT: Final = (
    "⚠️  Ralph loop: State file corrupted or incomplete\n"
    f"   File: {STATE_FILE}\n"
    "   Problem: No prompt text found\n\n"
    "   This usually means:\n"
    "     • State file was manually edited\n"
    "     • File was corrupted during writing\n\n"
    "   Ralph loop is stopping. Run /ralph-loop again to start fresh."
)


def _active_promise(promise: str | None) -> str | None:
    """The plugin treats ``null`` (even quoted) and the empty string as no promise."""
    return None if promise is None or promise in ("", "null") else promise


def _plugin_prompt_empty(prompt: str) -> bool:
    """The bash hook drops ``---`` lines from the prompt and then tests for emptiness."""
    return all(line in ("", "---") for line in prompt.split("\n"))


def _stop(outcome: Outcome, reason: str, message: str, *, stderr: bool = False) -> PluginDecision:
    """Allow the stop and delete the file, printing ``message`` like the plugin."""
    return PluginDecision(
        action="allow",
        outcome=outcome,
        reason=reason,
        next_state=None,
        message_for_user=message,
        message_to_stderr=stderr,
    )


def _block(state: LoopState, promise: str | None) -> PluginDecision:
    nxt = state.iteration + 1
    if promise is None:
        msg = f"🔄 Ralph iteration {nxt} | No completion promise set - loop runs infinitely"
    else:
        msg = (
            f"🔄 Ralph iteration {nxt} | To stop: output <promise>{promise}</promise>"
            " (ONLY when statement is TRUE - do not lie to exit!)"
        )
    return PluginDecision(
        action="block",
        outcome="continue",
        reason=state.prompt,
        system_message=msg,
        next_state=replace(state, iteration=nxt),
    )


def _no_transcript(problem: str) -> PluginDecision:
    """Stop: the agent's last message cannot be read (``problem`` names the transcript and why)."""
    why = problem or "no assistant message could be read"
    message = f"⚠️  Ralph loop: Failed to extract assistant messages: {why}; Ralph loop is stopping."
    return _stop("no_transcript", why, message, stderr=True)


def _decide_owned(state: LoopState, last_text: str | None, problem: str) -> PluginDecision:
    """Steps 5-9 of the plugin, for a loop this session owns."""
    top = state.max_iterations
    if top > 0 and state.iteration >= top:
        return _stop(
            "max_reached",
            f"max iterations ({top}) reached",
            f"🛑 Ralph loop: Max iterations ({top}) reached.",
        )
    if last_text is None:
        return _no_transcript(problem)
    promise = _active_promise(state.completion_promise)
    if promise is not None and unwrap(last_text, plugin=True) == promise:
        detected = f"✅ Ralph loop: Detected <promise>{promise}</promise>"
        return _stop("completed", f"completion promise detected: {promise}", detected)
    if _plugin_prompt_empty(state.prompt):
        return _stop("no_prompt", "the state file has no prompt", _NO_PROMPT, stderr=True)
    return _block(state, promise)


def plugin_decision(
    state: LoopState | None, last_text: str | None, *, hook_session_id: str, transcript_problem: str = ""
) -> PluginDecision:
    """The plugin Stop hook's decision for ``state`` (None: no state file) and the last assistant
    text (None: the transcript could not be read; ``transcript_problem`` says which and why, for the
    one line printed). See the module docstring for the rules."""
    if state is None:
        return PluginDecision(action="allow", outcome="no_loop", reason="no loop state file", next_state=None)
    if state.session_id and state.session_id != hook_session_id:
        reason = f"the loop belongs to session {state.session_id}"
        return PluginDecision(action="allow", outcome="other_session", reason=reason, next_state=state)
    if not state.session_id and hook_session_id:
        state = replace(state, session_id=hook_session_id)  # claimed by the first stop
    return _decide_owned(state, last_text, transcript_problem)


def apply_decision(path: StrPath, decision: PluginDecision, *, current: LoopState | None) -> None:
    """Delete or rewrite the state file as the plugin would; ``current`` is what was read."""
    if decision.next_state is None:
        Path(path).unlink(missing_ok=True)
        sweep_temps(Path(path))  # what killed rewrites left: nothing rewrites this file again
    elif decision.next_state != current:
        write_state(path, decision.next_state)  # (removes them first)
    else:
        sweep_temps(Path(path))


# --------------------------------------------------------------------------- loop start


class LoopArgs(msgspec.Struct, frozen=True, kw_only=True):
    """Parsed ``loop start`` arguments; ``max_iterations`` 0 means unlimited."""

    prompt: str
    max_iterations: int = 0
    completion_promise: str | None = None
    show_help: bool = False


USAGE: Final = 'usage: ralph-ledger loop start "PROMPT" [--max-iterations N] [--completion-promise TEXT]'
_OPTIONS: Final = ("--max-iterations", "--completion-promise")


def _option_value(name: str, inline: str | None, argv: Sequence[str], i: int) -> tuple[str, int]:
    """The option's value (inline after ``=`` or the next argument) and the next index."""
    if inline is None:
        if i >= len(argv) or argv[i].startswith("--"):
            raise UsageError(f"{name} needs a value")
        inline, i = argv[i], i + 1
    if inline == "":
        raise UsageError(f"{name} needs a value")
    return inline, i


def _scan(argv: Sequence[str]) -> tuple[list[str], dict[str, str], bool]:
    """Prompt words, option values by name, and whether help was asked for."""
    words: list[str] = []
    values: dict[str, str] = {}
    i, options_done = 0, False
    while i < len(argv):
        arg, i = argv[i], i + 1
        if options_done or arg == "-" or not arg.startswith("-"):
            words.append(arg)
        elif arg == "--":
            options_done = True
        elif arg in ("-h", "--help"):
            return words, values, True
        else:
            name, eq, inline = arg.partition("=")
            if name not in _OPTIONS:
                raise UsageError(f"unknown option {name!r} (put -- before prompt words that start with '-')")
            if name in values:
                raise UsageError(f"{name} given twice")
            values[name], i = _option_value(name, inline if eq else None, argv, i)
    return words, values, False


def parse_loop_args(argv: Sequence[str], *, prompt_optional: bool = False) -> LoopArgs:
    """Parse the arguments after ``loop start``; ``UsageError`` (one line) when they are wrong.
    ``prompt_optional``: a task-list loop (``--tasks``), whose tasks are the work."""
    words, values, show_help = _scan(argv)
    prompt = " ".join(words)
    if show_help:
        return LoopArgs(prompt=prompt, show_help=True)
    if not prompt.strip() and not prompt_optional:
        raise UsageError(f"missing prompt; {USAGE}")
    max_raw = values.get("--max-iterations", "0")
    if not _WHOLE.fullmatch(max_raw):
        raise UsageError(f"--max-iterations: expected a whole number (0 = unlimited), got {max_raw!r}")
    promise = values.get("--completion-promise")
    if promise is not None:
        promise = promise.replace("\r", " ").replace("\n", " ")
    return LoopArgs(prompt=prompt, max_iterations=int(max_raw), completion_promise=promise)

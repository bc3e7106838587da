"""Copilot CLI's exact tokens: its ``--usage-output-file FILE``, read after each run of the ``copilot``
format (whose JSON stream reports no tokens).

A ``copilot`` command without the flag gets one naming a file in a private temporary folder; a
run's tokens are the session's totals less those this loop last read, each model's apart. The
file's fields, and how it is opened safely: docs/design/agent-formats.md#tokens-the-usage-file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path, PurePath
from typing import Final

import msgspec

from ledger.drivers.runner.formats.report import AgentReport, Sidecar, SideRun
from ledger.events import TokenUsage

FLAG: Final = "--usage-output-file"

MAX_BYTES: Final = 1 << 20
"""The most of a usage file read (Copilot's is about 2 KB)."""


class _Tokens(msgspec.Struct, gc=False):
    input: int = msgspec.field(default=0, name="inputTokens")
    output: int = msgspec.field(default=0, name="outputTokens")
    cache_read: int = msgspec.field(default=0, name="cacheReadTokens")
    cache_write: int = msgspec.field(default=0, name="cacheWriteTokens")


class _Metric(msgspec.Struct, gc=False):
    usage: _Tokens = msgspec.field(default_factory=_Tokens)


class _File(msgspec.Struct, gc=False):
    model_metrics: dict[str, _Metric] = msgspec.field(default_factory=dict, name="modelMetrics")
    current_model: str | None = msgspec.field(default=None, name="currentModel")
    session_start: str = msgspec.field(default="", name="sessionStartTime")
    last_input: int = msgspec.field(default=0, name="lastCallInputTokens")


class Usage(msgspec.Struct, frozen=True, gc=False):
    """A usage file's totals: each model's tokens (input not read from or written to a cache), the
    model (``currentModel``, else the only one), the session (``sessionStartTime``) and the input,
    cache included, of the last request (``lastCallInputTokens``: how full the context was)."""

    models: tuple[tuple[str, TokenUsage], ...]
    model: str
    session: str
    context_tokens: int


def _tokens(u: _Tokens) -> TokenUsage:
    """One model's tokens as the ledger records them (Copilot's input counts cache reads and writes;
    its output counts reasoning, billed as output)."""
    return TokenUsage(
        input=max(u.input - u.cache_read - u.cache_write, 0),
        output=u.output,
        cache_creation=u.cache_write,
        cache_read=u.cache_read,
    )


def parse_usage(raw: bytes | str) -> Usage | None:
    """The totals of a usage file's text (``None``: not a usage file)."""
    try:
        f = msgspec.json.decode(raw, type=_File)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    models = tuple((name, _tokens(m.usage)) for name, m in f.model_metrics.items())
    model = f.current_model or (models[0][0] if len(models) == 1 else "")
    return Usage(models, model, f.session_start, f.last_input)


def _less(total: TokenUsage, before: TokenUsage) -> TokenUsage:
    """``total`` less ``before``, field by field (never below zero)."""
    return TokenUsage(
        input=max(total.input - before.input, 0),
        output=max(total.output - before.output, 0),
        cache_creation=max(total.cache_creation - before.cache_creation, 0),
        cache_read=max(total.cache_read - before.cache_read, 0),
    )


def _sum(tokens: Iterable[TokenUsage]) -> TokenUsage:
    """The sum of ``tokens``, field by field."""
    all_ = list(tokens)
    return TokenUsage(
        input=sum(t.input for t in all_),
        output=sum(t.output for t in all_),
        cache_creation=sum(t.cache_creation for t in all_),
        cache_read=sum(t.cache_read for t in all_),
    )


def _option(args: Sequence[str]) -> str | None:
    """The path the last ``--usage-output-file PATH`` / ``=PATH`` of ``args`` names (``None``: none)."""
    path: str | None = None
    for i, arg in enumerate(args):
        if arg == FLAG and i + 1 < len(args):
            path = args[i + 1]
        elif arg.startswith(FLAG + "="):
            path = arg[len(FLAG) + 1 :]
    return path


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a file's versions apart (inode, size, modification time), ``None``: no file."""
    try:
        st = path.lstat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def read_private(path: Path) -> bytes | None:
    """A regular file's first ``MAX_BYTES`` when this user owns it; opened without following a
    symlink (``None``: absent, a symlink, someone else's, unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return None
        try:
            return f.read(MAX_BYTES)
        except OSError:
            return None


class CopilotUsage(Sidecar):
    """The usage files of one loop's Copilot runs, and the totals last read for each session."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, TokenUsage]] = {}  # session -> model -> totals last read

    @contextlib.contextmanager
    def run(self, agent_cmd: Sequence[str]) -> Iterator[SideRun]:
        """The command with a usage file (the user's, or a private one added) and the reader of it."""
        cmd = list(agent_cmd)
        own = _option(cmd[1:])
        if own is not None or not cmd or PurePath(cmd[0]).name != "copilot":  # a wrapper: left alone
            path = Path(own) if own is not None else None
            before = _stamp(path) if path is not None else None
            yield SideRun(cmd, lambda report: self.complete(report, path, before))
            return
        folder = Path(tempfile.mkdtemp(prefix="ralph-copilot-"))  # 0700: no one else writes there
        try:
            path = folder / "usage.json"
            added = [cmd[0], FLAG, str(path), *cmd[1:]]  # first: a last option may take a value
            yield SideRun(added, lambda report: self.complete(report, path, None))
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def complete(
        self, report: AgentReport, path: Path | None, before: tuple[int, int, int] | None
    ) -> AgentReport:
        """``report`` with the run's tokens and (when the stream named none) model from ``path``;
        unchanged when the run wrote no usage file (``before``: the file's stamp before the run)."""
        if path is None or (before is not None and _stamp(path) == before):
            return report  # not written by this run: an earlier run's totals
        raw = read_private(path)
        usage = parse_usage(raw) if raw is not None else None
        if usage is None:
            return report
        read = self.seen.get(usage.session, {}) if usage.session else {}
        models = tuple((m, _less(t, read.get(m, TokenUsage()))) for m, t in usage.models)
        if usage.session:
            self.seen[usage.session] = dict(usage.models)
        return msgspec.structs.replace(
            report,
            tokens=_sum(t for _, t in models),
            models=models,  # each priced at its model (a sub-agent's may differ)
            model=report.model or usage.model,
            context_tokens=report.context_tokens or usage.context_tokens,
        )

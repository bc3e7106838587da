"""Google's Gemini CLI's two output formats, ``gemini --output-format stream-json`` (one JSON event
per line) and ``--output-format json`` (one pretty-printed object), told apart by their content.

Each model's tokens are input (not cached), output (candidates and thoughts) and cache reads, so
that each is priced at its own model (``AgentReport.models``); no cost is reported. Each format's
events and fields, as Gemini CLI 0.61.0 writes them: docs/design/agent-formats.md#gemini-cli.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ledger.drivers.runner.formats.report import AgentReport, Lines, uncached
from ledger.events import TokenUsage

EDIT_TOOLS: Final = frozenset({"write_file", "replace"})

KNOWN: Final = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})


class _Stats(msgspec.Struct, gc=False):
    total_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached: int = 0
    input: int | None = None


class _RunStats(_Stats, gc=False):
    models: dict[str, _Stats] = {}


class _Parameters(msgspec.Struct, gc=False):
    file_path: str | None = None


class _Error(msgspec.Struct, gc=False):
    message: str = ""


class _Line(msgspec.Struct, gc=False):
    type: str = ""
    model: str | None = None
    role: str | None = None
    content: str | None = None
    tool_name: str | None = None
    parameters: _Parameters | None = None
    stats: _RunStats | None = None
    outcome: str | None = msgspec.field(default=None, name="status")  # a result's: success, error
    error: _Error | None = None
    severity: str | None = None
    message: str | None = None


class _Tokens(msgspec.Struct, gc=False):
    input: int | None = None
    prompt: int = 0
    candidates: int = 0
    total: int = 0
    cached: int = 0
    thoughts: int = 0
    tool: int = 0


class _ModelStats(msgspec.Struct, gc=False):
    tokens: _Tokens = msgspec.field(default_factory=_Tokens)
    roles: dict[str, msgspec.Raw] = {}


class _Tools(msgspec.Struct, gc=False, rename="camel"):
    total_calls: int = 0


class _JsonStats(msgspec.Struct, gc=False):
    models: dict[str, _ModelStats] = {}
    tools: _Tools = msgspec.field(default_factory=_Tools)


class _Json(msgspec.Struct, gc=False):
    type: str | None = None  # a stream-json line has one; the json object does not
    session_id: str | None = None
    response: str | None = None
    stats: _JsonStats | None = None
    error: _Error | None = None


_json_decoder: Final = msgspec.json.Decoder(_Json)


def _stream_tokens(stats: _Stats) -> TokenUsage:
    fresh = stats.input if stats.input is not None else uncached(stats.input_tokens, stats.cached)
    thoughts = max(stats.total_tokens - stats.input_tokens - stats.output_tokens, 0)
    return TokenUsage(input=fresh, output=stats.output_tokens + thoughts, cache_read=stats.cached)


def _json_tokens(t: _Tokens) -> TokenUsage:
    fresh = t.input if t.input is not None else uncached(t.prompt, t.cached)
    return TokenUsage(input=fresh + t.tool, output=t.candidates + t.thoughts, cache_read=t.cached)


def _total(t: TokenUsage) -> tuple[int, int]:
    return t.input + t.output + t.cache_read + t.cache_creation, t.output


def _main(models: dict[str, TokenUsage], named: str) -> str:
    """The run's model: ``named`` when it is one of ``models``, else the one that spent most."""
    if named in models or not models:
        return named
    return max(models, key=lambda m: _total(models[m]))


def _sum(tokens: list[TokenUsage]) -> TokenUsage:
    return TokenUsage(
        input=sum(t.input for t in tokens),
        output=sum(t.output for t in tokens),
        cache_creation=sum(t.cache_creation for t in tokens),
        cache_read=sum(t.cache_read for t in tokens),
    )


def _json_report(out: _Json) -> AgentReport:
    stats = out.stats or _JsonStats()
    models = {m: _json_tokens(s.tokens) for m, s in stats.models.items()}
    main = [m for m, s in stats.models.items() if "main" in s.roles]
    model = _main(models, max(main, key=lambda m: _total(models[m])) if main else "")
    return AgentReport(
        text=out.response or "",
        tokens=_sum(list(models.values())),
        model=model,
        tool_count=stats.tools.total_calls,
        error=(out.error.message or "error") if out.error is not None else "",
        models=tuple(models.items()),
    )


def _as_json(output: str) -> _Json | None:
    """The ``--output-format json`` object ``output`` is, or ``None`` (a stream, or anything else)."""
    text = output.strip()
    if not text.startswith("{"):
        return None
    try:
        out = _json_decoder.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return out if out.type is None and (out.stats or out.response is not None or out.error) else None


def parse(output: str) -> AgentReport:
    """The report of a ``gemini --output-format stream-json`` or ``json`` output."""
    whole = _as_json(output)
    if whole is not None:
        return _json_report(whole)
    lines = Lines(output, _Line)
    model, chunks, tools = "", list[str](), 0
    files: dict[str, None] = {}
    tokens, models = TokenUsage(), dict[str, TokenUsage]()
    said, error = "", ""  # the last error line's message; the error that ended the run
    for line in lines:
        if line.type not in KNOWN:
            lines.unknown()
        elif line.type == "init" and line.model:
            model = line.model
        elif line.type == "message" and line.role == "assistant" and line.content:
            chunks.append(line.content)
        elif line.type == "tool_use":
            tools += 1
            chunks = []  # the final text is what follows the last tool call
            path = line.parameters.file_path if line.parameters is not None else None
            if line.tool_name in EDIT_TOOLS and path:
                files[path] = None
        elif line.type == "error" and line.severity == "error" and line.message:
            said = line.message
        elif line.type == "result":
            failed = line.outcome == "error"
            error = ((line.error.message if line.error else "") or said or "error") if failed else ""
            if line.stats is not None:  # the run's totals: the last result wins
                models = {m: _stream_tokens(s) for m, s in line.stats.models.items()}
                tokens = _sum(list(models.values())) if models else _stream_tokens(line.stats)
    return AgentReport(
        text="".join(chunks),
        tokens=tokens,
        model=_main(models, model),
        tool_count=tools,
        files_modified=tuple(files),
        skipped=lines.skipped,
        error=error,
        models=tuple(models.items()),
    )

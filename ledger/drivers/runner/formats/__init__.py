"""Agent output formats for ``ralph-ledger run``: one parser per agent, a registry, and detection.

Each format reads an agent's whole stdout into an ``AgentReport`` (final text, tokens, cost when
reported, model, tool calls, edited files, skipped lines). A run names one with ``--agent-format
NAME`` or lets ``detect`` choose from the agent command; a plain mode whose stdout mixes the answer
with echo is refused (``PLAIN_REFUSALS``). The formats: docs/runner.md; each
agent's: docs/design/agent-formats.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from types import MappingProxyType
from typing import Final

from ledger.drivers.runner.formats import claude, codex, copilot, cursor, gemini, opencode, text
from ledger.drivers.runner.formats.copilot_usage import CopilotUsage
from ledger.drivers.runner.formats.report import AgentReport, Parser, Sidecar, SideRun

__all__ = [
    "FORMATS",
    "MODEL_OPTIONS",
    "PLAIN_REFUSALS",
    "AgentFormat",
    "AgentReport",
    "SideRun",
    "Sidecar",
    "UnknownFormat",
    "command_model",
    "detect",
    "missing_flag",
    "named",
    "plain_refusal",
    "resolve",
]


@dataclass(frozen=True, slots=True)
class AgentFormat:
    """One output format: its name, its parser, whether it was checked against a real sample,
    whose limit reports its runs carry (``ledger.drivers.runner.limits``; ``None``: plain text), and
    what makes a loop's ``Sidecar`` (what it reads beside stdout: Copilot's usage file)."""

    name: str
    parse: Parser
    confirmed: bool
    limits: str | None = None
    sidecar: Callable[[], Sidecar] = Sidecar


FORMATS: Final[Mapping[str, AgentFormat]] = MappingProxyType(
    {
        f.name: f
        for f in (
            AgentFormat("amp", claude.parse, confirmed=False, limits="claude"),
            AgentFormat("claude", claude.parse, confirmed=True, limits="claude"),
            AgentFormat("codex", codex.parse, confirmed=True, limits="codex"),
            AgentFormat("copilot", copilot.parse, confirmed=True, limits="copilot", sidecar=CopilotUsage),
            AgentFormat("cursor", cursor.parse, confirmed=False),
            AgentFormat("gemini", gemini.parse, confirmed=True, limits="gemini"),
            AgentFormat("opencode", opencode.parse, confirmed=True, limits="opencode"),
            AgentFormat("text", text.parse, confirmed=True),
        )
    }
)
"""Every format by name."""


class UnknownFormat(ValueError):
    """A format name that is not in ``FORMATS``; the message names the choices."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown agent format {name!r} (choose from {', '.join(FORMATS)})")


def named(name: str) -> AgentFormat:
    """The format called ``name``; ``UnknownFormat`` if there is none."""
    try:
        return FORMATS[name]
    except KeyError:
        raise UnknownFormat(name) from None


def _option(args: Sequence[str], *names: str) -> str | None:
    """The value of the last ``--name VALUE`` or ``--name=VALUE`` among ``args`` (``None``: absent)."""
    value: str | None = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(name + "="):
                value = arg[len(name) + 1 :]
    return value


def _cursor(program: str, args: Sequence[str]) -> bool:
    """Whether a command runs Cursor's agent CLI writing JSON: ``cursor-agent`` (which prints when
    its output is not a terminal) or, a name other programs could have, ``agent`` with ``-p`` or
    ``--print``; both with ``--output-format stream-json`` or ``json``."""
    if _option(args, "--output-format") not in ("stream-json", "json"):
        return False
    return program == "cursor-agent" or (program == "agent" and ("-p" in args or "--print" in args))


def detect(agent_cmd: Sequence[str]) -> AgentFormat:
    """The format an agent command asks its agent to write (the table above), else ``text``."""
    if not agent_cmd:
        return FORMATS["text"]
    program, args = PurePath(agent_cmd[0]).name, list(agent_cmd[1:])
    name = "text"
    if program == "claude" and _option(args, "--output-format") in ("stream-json", "json"):
        name = "claude"
    elif program == "codex" and "exec" in args and ("--json" in args or "--experimental-json" in args):
        name = "codex"
    elif program == "gemini" and _option(args, "--output-format", "-o") in ("stream-json", "json"):
        name = "gemini"
    elif program == "opencode" and "run" in args and _option(args, "--format") == "json":
        name = "opencode"
    elif _cursor(program, args):
        name = "cursor"
    elif program == "amp" and "--stream-json" in args:
        name = "amp"
    elif program == "copilot" and _option(args, "--output-format") == "json":
        name = "copilot"
    return FORMATS[name]


MODEL_OPTIONS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {"claude": ("--model",), "codex": ("-m", "--model"), "opencode": ("-m", "--model")}
)
"""Agents whose output names no model, by program name: the options naming the model they run on."""


def command_model(agent_cmd: Sequence[str]) -> str:
    """The model an agent command asks for (``""``: none named), for an agent in ``MODEL_OPTIONS``:
    the last ``-m NAME`` / ``--model NAME``, else Codex's ``-c model=NAME`` (a TOML string or bare).
    A run records it when the agent's own output names no model (Codex's ``exec``, in both modes;
    plain ``claude -p``, and its error results in json mode; opencode, its ``provider/`` left out)."""
    if not agent_cmd:
        return ""
    program, args = PurePath(agent_cmd[0]).name, list(agent_cmd[1:])
    names = MODEL_OPTIONS.get(program)
    if names is None:
        return ""
    if (value := _option(args, *names)) is not None:
        return value.split("/", 1)[-1] if program == "opencode" else value  # opencode's provider/model
    if program != "codex":  # Claude Code's -c is --continue
        return ""
    for setting in filter(None, (_option(args[i : i + 2], "-c", "--config") for i in range(len(args)))):
        key, _, raw = setting.partition("=")
        if key.strip() == "model":
            value = raw.strip().strip("'\"")
    return value or ""


def resolve(name: str | None, agent_cmd: Sequence[str]) -> AgentFormat:
    """The format called ``name`` or, when ``name`` is ``None``, the one detected from the command."""
    return detect(agent_cmd) if name is None else named(name)


PLAIN_REFUSALS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "copilot": "--output-format json",  # stdout: commentary, tool echo (commands) and the answer
        "gemini": "-o stream-json",  # stdout: every model turn's text, commentary before tool calls too
        "opencode": "--format json",  # stdout: every text part, commentary before tool calls too
    }
)
"""Agents whose plain output cannot tell their final answer from echo (the prompt, reasoning, tool
output) on stdout, by program name: the flag that makes them write a format read here. ``run``
refuses such an agent in plain mode (``plain_refusal``), as the real clients showed
(``docs/design/clients.md``)."""


def plain_refusal(agent_cmd: Sequence[str], named_format: str | None) -> str | None:
    """Why ``run`` refuses ``agent_cmd`` (one line naming the flag to add), or ``None``: only for a
    plain-text run detected from the command (a format named with ``--agent-format`` is the user's
    word) of an agent in ``PLAIN_REFUSALS``."""
    if named_format is not None or not agent_cmd or detect(agent_cmd).name != "text":
        return None
    program = PurePath(agent_cmd[0]).name
    flag = PLAIN_REFUSALS.get(program)
    if flag is None:
        return None
    return (
        f"{program}'s plain output mixes its answer with the prompt, reasoning and tool output it "
        f"echoes, so a promise could be read from the echo: add {flag} to the agent command"
    )


def missing_flag(agent_cmd: Sequence[str]) -> str | None:
    """A flag the agent itself will not run without in the mode its command asks for, as one line
    naming it (``None``: none is missing): ``claude -p --output-format stream-json`` exits 1 without
    ``--verbose`` (Claude Code 2.1.328), which would fail every iteration."""
    if not agent_cmd or PurePath(agent_cmd[0]).name != "claude":
        return None
    args = list(agent_cmd[1:])
    printing = "-p" in args or "--print" in args
    if printing and _option(args, "--output-format") == "stream-json" and "--verbose" not in args:
        return (
            "claude -p --output-format stream-json exits 1 without --verbose: "
            "add --verbose to the agent command"
        )
    return None

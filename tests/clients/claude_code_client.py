"""Claude Code 2.1.328 under ``ralph-ledger run`` and with the MCP server: the turns the mock serves,
the client's environment, and the captures saved for the fast replay tests.

``python -m tests.clients.claude_code_client`` runs the real client once per case of ``CAPTURES``
against the Anthropic mock and writes its stdout to
``tests/fixtures/clients/claude-code-2.1.328/run-*`` with, in ``run-served.json``, the turns served
for each (what ``tests/unit/test_captures_claude_code_run.py`` computes its expected numbers from).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tests.clients.conftest import client_env
from tests.clients.mocks.anthropic import MODEL, AnthropicAPI
from tests.clients.mocks.base import Failure, Reply, Script, ToolCall, Turn, Usage

VERSION = "2.1.328"
CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "clients" / f"claude-code-{VERSION}"
KEY = "sk-ant-test-0000000000"
PROMPT = "Write the files you are asked for. Say <promise>COMPLETE</promise> when done."
"""The loop's prompt: it holds the promise, as real prompts do (a mode that echoes it would complete)."""

RATE_LIMITED = Failure(
    429,
    {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed the rate limit for your organization of 50 requests "
            "per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
        },
    },
    headers=(("retry-after", "30"), ("request-id", "req_mock_429")),
)
"""A 429 as the Anthropic API sends it (its body, its ``retry-after`` header)."""

BAD_KEY = Failure(
    401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
)
SERVER_ERROR = Failure(
    500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
)


def iteration(work: Path, n: int, last: bool) -> list[Reply]:
    """The two model turns of iteration ``n`` (one ``claude -p`` run): text and a Write of
    ``f{n}.txt``, then a final text that promises COMPLETE only in the ``last`` iteration. Every
    usage figure is distinct, so a sum that misses or repeats a turn shows."""
    base = 1000 * n
    final = (
        f"Wrote f{n}.txt. <promise>COMPLETE</promise>" if last else f"Wrote f{n}.txt; more to do next time."
    )
    return [
        Reply(
            text=f"I'll write f{n}.txt.",
            tool_calls=(ToolCall("Write", {"file_path": str(work / f"f{n}.txt"), "content": f"{n}\n"}),),
            usage=Usage(input=base + 11, output=50 + n, cache_read=3 * base + 7, cache_write=500 + n),
        ),
        Reply(
            text=final,
            usage=Usage(input=base + 23, output=60 + n, cache_read=4 * base + 9, cache_write=100 + n),
        ),
    ]


def with_subagent(final: str) -> list[Reply]:
    """A run that hands work to a sub-agent in the foreground (the ``Agent`` tool): the main turn
    calling it, the sub-agent's one turn, the main turn ending with ``final``."""
    task = {
        "description": "greet",
        "prompt": "Say hi",
        "subagent_type": "general-purpose",
        "run_in_background": False,
    }
    return [
        Reply(
            text="Delegating.",
            tool_calls=(ToolCall("Agent", task),),
            usage=Usage(input=1013, output=17, cache_read=119, cache_write=31),
        ),
        Reply(
            text="hi from the sub-agent", usage=Usage(input=2027, output=29, cache_read=223, cache_write=43)
        ),
        Reply(text=final, usage=Usage(input=3049, output=37, cache_read=331, cache_write=59)),
    ]


def env(home: Path, url: str, **extra: str) -> dict[str, str]:
    """The client's environment against the mock at ``url`` (no retries of a failed request: the
    loop, not the client, decides what a failure costs)."""
    return client_env(
        home,
        {
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            **extra,
        },
    )


def command(claude: Path, mode: str, tools: str = "Write") -> list[str]:
    """``claude -p`` in ``mode`` (``stream-json``, ``json`` or ``text``: plain)."""
    argv = [str(claude), "-p", "--model", MODEL, "--allowedTools", tools]
    if mode == "stream-json":
        argv += ["--output-format", "stream-json", "--verbose"]
    elif mode == "json":
        argv += ["--output-format", "json"]
    return argv


def served(turns: Sequence[Turn]) -> list[dict[str, object]]:
    """The turns as JSON (what a replay test reads back)."""
    return [{"failure" if isinstance(t, Failure) else "reply": asdict(t)} for t in turns]


CASES: dict[str, tuple[str, str]] = {
    # file name: (mode, what is served)
    "run-stream-json.jsonl": ("stream-json", "iteration"),
    "run-json.json": ("json", "iteration"),
    "run-text.txt": ("text", "iteration"),
    "run-stream-json-429.jsonl": ("stream-json", "429"),
    "run-json-429.json": ("json", "429"),
    "run-text-429.txt": ("text", "429"),
    "run-stream-json-401.jsonl": ("stream-json", "401"),
    "run-text-500.txt": ("text", "500"),
    "run-json-max-turns.json": ("json", "max-turns"),  # with --max-turns 1
    "run-stream-json-subagent.jsonl": ("stream-json", "subagent"),  # --allowedTools Agent
}


def capture(claude: Path, scratch: Path) -> None:
    """Run every case of ``CASES`` and save its stdout and what was served."""
    work = scratch / "work"
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    record: dict[str, object] = {}
    for name, (mode, what) in CASES.items():
        failures: dict[str, Turn] = {"429": RATE_LIMITED, "401": BAD_KEY, "500": SERVER_ERROR}
        turns: list[Turn] = [failures[what]] if what in failures else [*iteration(work, 1, last=True)]
        argv = command(claude, mode) + (["--max-turns", "1"] if what == "max-turns" else [])
        if what == "subagent":
            turns, argv = (
                [*with_subagent("Done. <promise>COMPLETE</promise>")],
                command(claude, mode, "Agent"),
            )
        with AnthropicAPI(Script(turns)) as api:
            proc = subprocess.run(
                argv,
                input=PROMPT,
                env=env(scratch / "home", api.url),
                cwd=work,
                capture_output=True,
                text=True,
                timeout=60,
            )
            (CAPTURES / name).write_text(proc.stdout)
            record[name] = {
                "mode": mode,
                "argv": ["claude", *argv[1:]],
                "exit": proc.returncode,
                "served": served([s.turn for s in api.served]),
            }
        for f in work.glob("*.txt"):
            f.unlink()
    (CAPTURES / "run-served.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    from tests.clients.conftest import installed_bin

    bin_dir = installed_bin()
    CAPTURES.mkdir(parents=True, exist_ok=True)
    capture(bin_dir / "claude", Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/claude-code-capture"))

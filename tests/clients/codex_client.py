"""OpenAI Codex against the Responses mock: its throwaway ``CODEX_HOME``, its environment, the
command lines of its two modes, and the scripts the contract tests and the captures serve.

Codex reads a custom ``model_provider`` from ``$CODEX_HOME/config.toml``: ``base_url`` the mock's
``/v1``, ``wire_api = "responses"``, the key from ``env_key``; no retries (a 429 fails at once, as
Codex reports it after its own retries). Codex 0.169.0 asks for nothing but ``POST /v1/responses``.
``python -m tests.clients.codex_client`` writes the captures in ``CAPTURES`` (see its README).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.clients.conftest import client_env
from tests.clients.mocks.base import Reply, Script, ToolCall, Turn, Usage
from tests.clients.mocks.responses import MODEL, ResponsesAPI, rate_limited, unauthorized, usage_limit

VERSION = "0.169.0"
CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "clients" / f"codex-{VERSION}"
PROMISE = "<promise>COMPLETE</promise>"
PROMPT = f"Add notes.txt saying hello. Say {PROMISE} only when the task is done.\n"
"""The task: it holds the promise words, which plain Codex echoes (on stderr)."""
KEY = "sk-test-codex-0000000000000000"

FLAGS = ("--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-m", MODEL)
"""What lets ``codex exec`` act alone here: outside a git repository, with no sandbox (the
container has none for it), on the mock's model."""
JSON = ("exec", "--json", *FLAGS)
PLAIN = ("exec", *FLAGS)

PATCH = "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n"


def two_iterations() -> list[list[Reply]]:
    """A loop's turns by iteration: the first reasons about the promise, runs a command echoing it,
    adds ``notes.txt`` with ``apply_patch`` and answers without it; the second answers with it."""
    first = [
        Reply(
            text="Checking the project first.",
            thinking=f"I must not say {PROMISE} before notes.txt exists.",
            tool_calls=(ToolCall("exec_command", {"cmd": f"echo '{PROMISE}'"}),),
            usage=Usage(input=1200, output=40, cache_read=300, cache_write=500, thoughts=12),
        ),
        Reply(
            tool_calls=(ToolCall("apply_patch", {"input": PATCH}),),
            usage=Usage(input=150, output=60, cache_read=1700, cache_write=80, thoughts=9),
        ),
        Reply(
            text="Added notes.txt; it needs a second look.",
            usage=Usage(input=90, output=25, cache_read=1900, cache_write=0, thoughts=4),
        ),
    ]
    second = [
        Reply(
            text=f"notes.txt says hello. {PROMISE}",
            usage=Usage(input=300, output=18, cache_read=2000, cache_write=40, thoughts=6),
        )
    ]
    return [first, second]


def commentary_then_done() -> list[list[Reply]]:
    """A loop's turns by iteration: the first says the promise in a message before a command, and
    its last request answers nothing; the second answers with the promise."""
    first = [
        Reply(
            text=f"I will say {PROMISE} once the check passes.",
            tool_calls=(ToolCall("exec_command", {"cmd": "true"}),),
            usage=Usage(input=400, output=30, cache_read=100, thoughts=5),
        ),
        Reply(usage=Usage(input=50, output=3, cache_read=500)),
    ]
    second = [Reply(text=f"Checked. {PROMISE}", usage=Usage(input=60, output=8, cache_read=520, thoughts=2))]
    return [first, second]


def limited_then_done(resets_at: int | None) -> list[Turn]:
    """A usage limit (reset at ``resets_at``), then a turn that completes."""
    done = Reply(text=f"Done. {PROMISE}", usage=Usage(input=100, output=10, cache_read=20, thoughts=2))
    return [usage_limit(resets_at), done]


def unauthorized_always() -> Script:
    """Every turn answered with a 401 (a wrong API key)."""
    return Script([], after=unauthorized())


def write_home(home: Path, url: str) -> Path:
    """A ``CODEX_HOME`` whose configuration points Codex at the mock at ``url``."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'model = "{MODEL}"\n'
        'model_provider = "mock"\n'
        "[model_providers.mock]\n"
        'name = "mock"\n'
        f'base_url = "{url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "MOCK_OPENAI_KEY"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )
    return home


def codex_env(tmp: Path, url: str, bin_dir: Path) -> dict[str, str]:
    """Codex's environment: a throwaway home and ``CODEX_HOME``, the mock's key, the clients' folder
    on ``PATH``."""
    env = client_env(tmp / "home", {"CODEX_HOME": str(write_home(tmp / "codex-home", url))})
    env["MOCK_OPENAI_KEY"] = KEY
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return env


def expected(replies: Sequence[Reply]) -> dict[str, int]:
    """The tokens the ledger must record for ``replies``: Responses input without its cache reads and
    writes, output with the reasoning tokens (billed as output), cache reads, cache writes."""
    return {
        "input": sum(r.usage.input for r in replies),
        "output": sum(r.usage.output + r.usage.thoughts for r in replies),
        "cache_read": sum(r.usage.cache_read for r in replies),
        "cache_creation": sum(r.usage.cache_write for r in replies),
    }


def served(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """What each turn served, as a capture's ``.served.json`` keeps it: a reply's text, tool calls
    and usage, a failure's status and body."""
    fields = ("input", "output", "cache_read", "cache_write", "thoughts")
    out: list[dict[str, Any]] = []
    for turn in turns:
        if isinstance(turn, Reply):
            calls = [c.name for c in turn.tool_calls]
            usage = {f: getattr(turn.usage, f) for f in fields}
            out.append({"text": turn.text, "tool_calls": calls, "usage": usage})
        else:
            out.append({"status": turn.status, "body": turn.body})
    return out


# ----------------------------------------------------------------------------- captures
def _capture(bin_dir: Path, tmp: Path, turns: list[Turn], args: Sequence[str]) -> tuple[str, str, Any]:
    """Codex's stdout and stderr for one run serving ``turns``, and the replies served."""
    work = tmp / "work"
    work.mkdir(parents=True)
    with ResponsesAPI(Script(turns)) as api:
        env = codex_env(tmp, api.url, bin_dir) | {"TZ": "UTC"}  # the zone of a limit's "try again at"
        done = subprocess.run(
            [str(bin_dir / "codex"), *args],
            input=PROMPT,
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return done.stdout, done.stderr.replace(str(tmp), "$TMP"), served([s.turn for s in api.served])


def write_captures(bin_dir: Path, tmp: Path, only: Sequence[str] = ()) -> None:
    """Write the captures of ``CAPTURES`` (``only`` those named, when given) from the real binary in
    ``bin_dir``."""
    CAPTURES.mkdir(parents=True, exist_ok=True)
    first, second = two_iterations()
    cases: list[tuple[str, list[Turn], Sequence[str]]] = [
        ("exec-json-tools", list(first), JSON),
        ("exec-json-complete", list(second), JSON),
        ("exec-plain-tools", list(first), PLAIN),
        ("exec-json-usage-limit", [usage_limit(int(time.time()) + 3 * 3600)], JSON),
        ("exec-json-usage-limit-no-reset", [usage_limit(None)], JSON),
        ("exec-plain-usage-limit", [usage_limit(None)], PLAIN),
        ("exec-json-401", [unauthorized()], JSON),
        ("exec-json-429", [rate_limited(1)], JSON),
        ("exec-json-commentary", list(commentary_then_done()[0]), JSON),
        ("exec-plain-commentary", list(commentary_then_done()[0]), PLAIN),
    ]
    for name, turns, args in cases:
        if only and name not in only:
            continue
        out, err, replies = _capture(bin_dir, tmp / name, turns, args)
        (CAPTURES / f"{name}.{'jsonl' if '--json' in args else 'stdout.txt'}").write_text(out)
        if "--json" not in args:
            (CAPTURES / f"{name}.stderr.txt").write_text(err)
        (CAPTURES / f"{name}.served.json").write_text(json.dumps(replies, indent=1) + "\n")


if __name__ == "__main__":  # python -m tests.clients.codex_client BIN_DIR TMP [CASE ...]
    write_captures(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])

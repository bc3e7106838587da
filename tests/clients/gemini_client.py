"""Gemini CLI 0.61.0 against the ``streamGenerateContent`` mock: its throwaway home and environment,
``ralph-ledger run`` of it in a fresh git project, the scripts its contract tests and captures serve,
and the ledger's expected numbers computed from what the mock served."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.clients.conftest import client_env
from tests.clients.mocks.base import Reply, ToolCall, Usage
from tests.clients.mocks.gemini import GeminiAPI
from tests.journeys.conftest import GIT, script

PROMPT = "Write notes.txt saying hello. Say <promise>COMPLETE</promise> when it is done.\n"
"""The task; it holds the promise words, so a completion on echoed prompt shows."""

PROMISE = "<promise>COMPLETE</promise>"


def settings(max_attempts: int | None = None) -> dict[str, Any]:
    """``~/.gemini/settings.json``: the API key's auth (``GOOGLE_GEMINI_BASE_URL`` alone selects
    the ``gateway`` auth, which 0.61.0's headless mode refuses: "Invalid auth method selected."), no
    usage statistics, no update check; ``max_attempts`` caps the CLI's retries (its first retry of a
    429 waits at least 5 s)."""
    general: dict[str, Any] = {"disableAutoUpdate": True, "disableUpdateNag": True}
    if max_attempts is not None:
        general["maxAttempts"] = max_attempts
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": general,
    }


def gemini_env(tmp: Path, url: str, max_attempts: int | None = None) -> dict[str, str]:
    """Gemini CLI's environment: a throwaway home with ``settings``, the mock's URL, a fake key,
    the workspace trusted (else headless mode exits 55), no self-relaunch (0.61.0 starts a second
    node process for a larger heap: the same code, twice the start-up) and its error reports in
    ``tmp``."""
    home = tmp / "home"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings(max_attempts)))
    return client_env(
        home,
        {
            "GOOGLE_GEMINI_BASE_URL": url,
            "GEMINI_API_KEY": "gemini-test-key-0000000000000000",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "TMPDIR": str(tmp),
        },
    )


def project(tmp: Path) -> Path:
    """A fresh git project (one commit; ``.ralph/`` ignored) holding ``PROMPT.md``."""
    root = tmp / "project"
    root.mkdir(parents=True)
    (root / "PROMPT.md").write_text(PROMPT)
    (root / ".gitignore").write_text(".ralph/\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "init"], cwd=root, check=True)
    return root


@dataclass
class Loop:
    """One ``ralph-ledger run`` of Gemini CLI: its exit and output, its journal, the mock."""

    proc: subprocess.CompletedProcess[str]
    events: list[dict[str, Any]]
    api: GeminiAPI
    root: Path
    _rows: list[dict[str, Any]] | None = None

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The journal's events of type ``kind``."""
        return [e for e in self.events if e["type"] == kind]

    def ledger(self) -> list[dict[str, Any]]:
        """Session ``s1``'s ``iterations`` rows, each with the session's ``tokens`` and ``cost_usd``
        (``session_tokens``, ``session_cost``) and its turns' ``turn_costs`` (``turns``), by
        ``ralph-ledger sql --json`` (asked once)."""
        if self._rows is None:
            query = (
                "SELECT i.*, s.tokens AS session_tokens, s.cost_usd AS session_cost, "
                "(SELECT list(struct_pack(model := t.model, cost := t.cost_usd)) FROM turn_costs t "
                " WHERE t.session_id = i.session_id AND t.iteration = i.iteration) AS turns "
                "FROM iterations i JOIN sessions s USING (session_id) WHERE session_id = 's1' "
                "ORDER BY i.iteration"
            )
            home = str(self.root / ".ralph")
            argv = [script("ralph-ledger"), "--home", home, "sql", "--json", query]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
            self._rows = json.loads(done.stdout)
        return self._rows


def run_gemini(
    tmp: Path,
    gemini: Path,
    api: GeminiAPI,
    args: list[str],
    *run_args: str,
    max_attempts: int | None = None,
) -> Loop:
    """``ralph-ledger run --session s1 --prompt PROMPT.md RUN_ARGS -- gemini ARGS`` in a fresh git
    project, Gemini CLI pointed at ``api`` (started here)."""
    root = project(tmp)
    with api:
        env = gemini_env(tmp, api.url, max_attempts)
        env["RALPH_HOME"] = str(root / ".ralph")
        argv = [script("ralph-ledger"), "run", "--session", "s1", "--prompt", "PROMPT.md", *run_args]
        proc = subprocess.run(
            [*argv, "--", str(gemini), *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    journal = root / ".ralph" / "journals" / "s1.jsonl"
    text = journal.read_text() if journal.exists() else ""
    events = [json.loads(line) for line in text.splitlines() if line.strip()]
    return Loop(proc, events, api, root)


def write_then_continue(path: str) -> list[Reply]:
    """One iteration: the model thinks, says it will write ``path`` (its commentary holding the
    promise words), writes it, then thinks again and answers CONTINUE."""
    return [
        Reply(
            text=f"I will write notes.txt now, then say {PROMISE} once it is verified.",
            thinking="**Planning** the file write.",
            tool_calls=(ToolCall("write_file", {"file_path": path, "content": "hello\n"}),),
            usage=Usage(input=1200, output=40, cache_read=300, thoughts=45),
        ),
        Reply(
            text="Wrote notes.txt; the check runs next iteration. CONTINUE",
            thinking="The file is written.",
            usage=Usage(input=1350, output=25, cache_read=600, thoughts=30),
        ),
    ]


def complete() -> list[Reply]:
    """One iteration: the model thinks and completes."""
    return [
        Reply(
            text=f"notes.txt says hello. {PROMISE}",
            thinking="Checking the file once more.",
            usage=Usage(input=1500, output=18, cache_read=900, thoughts=60),
        )
    ]


def ledger_tokens(u: Usage) -> dict[str, int]:
    """What the ledger must record for ``u``: thoughts are billed, so counted, as output."""
    return {"input": u.input, "output": u.output + u.thoughts, "cache_read": u.cache_read}


def price(model: str, u: Usage) -> float:
    """What ``u`` costs on ``model`` by genai-prices (its input counts cache reads; thoughts are
    output)."""
    from genai_prices import Usage as Priced
    from genai_prices import calc_price

    priced = Priced(
        input_tokens=u.input + u.cache_read,
        cache_read_tokens=u.cache_read,
        output_tokens=u.output + u.thoughts,
    )
    return float(calc_price(priced, model_ref=model).total_price)

"""opencode 1.18.33 through ``ralph-ledger run``, against the chat completions mock: its JSON mode in a
worktree loop (tokens, cost, tools, files, the final text; the edit lands in the worktree), and its
plain mode refused. Its 429 (opencode retries 5 times, about 5 s, then gives up) is replayed from a
capture (``tests/unit/test_captures_opencode.py``): each opencode run costs about 5 s of CPU."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.clients import chat_clients as cc
from tests.clients.conftest import client_env
from tests.clients.mocks.base import Reply, Script, ToolCall, Usage
from tests.clients.mocks.chat import MODEL, ChatAPI
from tests.journeys.conftest import Project

pytestmark = pytest.mark.clients

PRICE = {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 0.0}
"""USD per million tokens, given to opencode in its configuration (it reports the cost it computes)."""

AGENT = ["opencode", "run", "--format", "json", "-m", f"mock/{MODEL}"]

LOOP = [
    # iteration 1: commentary naming the promise, a write, reasoning naming it, then CONTINUE
    Reply(
        text="I will write notes.txt and say <promise>COMPLETE</promise> at the very end.",
        tool_calls=(ToolCall("write", {"filePath": "notes.txt", "content": "first note\n"}),),
        thinking="The user wants <promise>COMPLETE</promise> later.",
        usage=Usage(input=1200, output=40, cache_read=300, thoughts=12),
    ),
    Reply(text="notes.txt is written; CONTINUE", usage=Usage(input=90, output=11, cache_read=1500)),
    # iteration 2: the promise
    Reply(text="All done. <promise>COMPLETE</promise>", usage=Usage(input=1400, output=9, thoughts=4)),
]
PER_ITERATION = (LOOP[:2], LOOP[2:])


def opencode_env(root: Path, api: ChatAPI, bin_dir: Path) -> dict[str, str]:
    """opencode's environment: a throwaway home and ``OPENCODE_CONFIG`` naming one provider, the
    mock (openai-compatible, priced by ``PRICE``), and no fetch of models.dev, npm nor an update."""
    config = root / "opencode.json"
    model = {"name": "GPT-4.1 (mock)", "cost": PRICE, "limit": {"context": 1047576, "output": 32768}}
    config.write_text(
        json.dumps(
            {
                "$schema": "https://opencode.ai/config.json",
                "provider": {
                    "mock": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Mock",
                        "options": {"baseURL": f"{api.url}/v1", "apiKey": "sk-mock-0000000000000000"},
                        "models": {MODEL: model},
                    }
                },
                "model": f"mock/{MODEL}",
                "autoupdate": False,
                "share": "disabled",
            }
        )
    )
    env = client_env(
        root / "home",
        {
            "OPENCODE_CONFIG": str(config),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            # it installs its plugin package into the config folder at each start: from npm's cache
            # only, so it fails at once instead of reaching the registry
            "npm_config_offline": "true",
        },
    )
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return env


def cost(replies: tuple[Reply, ...] | list[Reply]) -> float:
    """What ``replies`` cost at ``PRICE`` (reasoning billed as output)."""
    return (
        sum(
            r.usage.input * PRICE["input"]
            + (r.usage.output + r.usage.thoughts) * PRICE["output"]
            + r.usage.cache_read * PRICE["cache_read"]
            for r in replies
        )
        / 1e6
    )


@dataclass
class Loop:
    project: Project
    api: ChatAPI
    env: dict[str, str]
    done: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def loop(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    """One loop of real opencode (``--format json``) in the worktree ``w``: two iterations."""
    root = tmp_path_factory.mktemp("opencode-json")
    p = cc.project(root / "project")
    with ChatAPI(Script(LOOP)) as api:
        env = opencode_env(root, api, client_bin)
        done = cc.run(p, env, AGENT, "--worktree", "w", "--max-iterations", "4")
    yield Loop(p, api, env, done)


def test_the_json_loop_continues_then_completes_on_the_final_text(loop: Loop) -> None:
    """The promise in commentary before a tool call and in reasoning does not count; the last text does."""
    assert loop.done.returncode == 0, loop.done.stdout + loop.done.stderr
    assert loop.api.replies() == LOOP and len(loop.api.served) == len(LOOP)
    events = loop.project.journal("s1")
    promises = [(e["iteration"], e["signal"]) for e in events if e["type"] == "promise_detected"]
    assert promises == [(2, "COMPLETE")]
    assert [t["iteration"] for t in cc.turns(loop.project)] == [1, 2]


def test_the_json_loop_records_what_the_mock_served(loop: Loop) -> None:
    """Per iteration and in all: tokens and cost equal what was served, tools and files as done."""
    recorded = cc.turns(loop.project)
    assert [t["tokens"] for t in recorded] == [cc.served_tokens(it) for it in PER_ITERATION]
    assert [t["tool_count"] for t in recorded] == [1, 0]
    assert recorded[0]["files_modified"] == ["notes.txt"]
    assert recorded[1]["files_modified"] == []
    ledger = cc.costs(loop.project, loop.env)
    assert ledger == pytest.approx([cost(it) for it in PER_ITERATION], rel=1e-9)
    assert sum(c or 0.0 for c in ledger) == pytest.approx(
        cost(loop.api.replies()), rel=1e-9
    )  # the last turn included


def test_a_worktree_loop_edits_the_worktree_not_the_main_checkout(loop: Loop) -> None:
    """opencode works in ``$PWD``: the agent's ``PWD`` names the worktree it runs in (defect 11)."""
    tree = loop.project.dir / ".ralph" / "worktrees" / "w"
    assert (tree / "notes.txt").read_text() == "first note\n"
    assert not (loop.project.dir / "notes.txt").exists()


def test_plain_opencode_run_is_refused_naming_the_flag(client_bin: Path, tmp_path: Path) -> None:
    """Plain ``opencode run`` writes every text part to stdout, commentary before a tool call too: a
    promise there would complete the loop (defect 13). ``run`` refuses it, naming ``--format json``."""
    p = cc.project(tmp_path / "project")
    script = Script(
        [
            Reply(
                text="Plan: write notes.txt; <promise>COMPLETE</promise> comes last.",
                tool_calls=(ToolCall("write", {"filePath": "notes.txt", "content": "x\n"}),),
                usage=Usage(input=10, output=5),
            ),
            Reply(text="More to do. CONTINUE", usage=Usage(input=10, output=5)),
        ],
        after=Reply(text="More to do. CONTINUE", usage=Usage(input=10, output=5)),
    )
    with ChatAPI(script) as api:
        env = opencode_env(tmp_path, api, client_bin)
        done = cc.run(p, env, ["opencode", "run", "-m", f"mock/{MODEL}"], "--max-iterations", "2")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--format json" in line and line.startswith("ralph-ledger run: opencode"), line
    assert not api.served

"""GitHub Copilot CLI 1.0.102 through ``ralph-ledger run``, against the chat completions mock: its JSON
mode in a loop (a 429 first; then the final text, tools, files and model; tokens and cost from
the usage file the run asks for), and its text mode refused (its text-mode 429 is replayed from a capture:
``tests/unit/test_captures_copilot.py``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.clients import chat_clients as cc
from tests.clients.conftest import client_env
from tests.clients.mocks.base import Reply, Script, ToolCall, Usage
from tests.clients.mocks.chat import MODEL, ChatAPI, rate_limited
from tests.journeys.conftest import Project

pytestmark = pytest.mark.clients

KEY = "sk-mock-" + "0123456789abcdef" * 4
"""A long API key: Copilot masks the key's value wherever it appears in its output."""

AGENT = ["copilot", "--allow-all-tools", "--output-format", "json"]
"""Copilot in JSON mode, the prompt on stdin."""

LIMITED = [rate_limited(0)] * 6
"""What Copilot's first run gets: a 429 to its request and to its 5 retries, so it gives up."""


def copilot_env(root: Path, api: ChatAPI, bin_dir: Path) -> dict[str, str]:
    """Copilot's environment: a throwaway home, offline, the mock as its OpenAI provider."""
    env = client_env(
        root / "home",
        {
            "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": f"{api.url}/v1",
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_PROVIDER_API_KEY": KEY,
            "COPILOT_MODEL": MODEL,
            "COPILOT_AUTO_UPDATE": "false",
        },
    )
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return env


def loop_script(work: Path) -> list[Reply]:
    """Two iterations: commentary, reasoning and a command naming the promise, a file created, then
    CONTINUE; then the promise."""
    return [
        Reply(
            text="I will create notes.txt; <promise>COMPLETE</promise> comes at the very end.",
            thinking="The user wants <promise>COMPLETE</promise> later.",
            tool_calls=(
                ToolCall("create", {"path": str(work / "notes.txt"), "file_text": "first note\n"}),
                ToolCall("bash", {"command": "echo '<promise>COMPLETE</promise>'", "description": "echo"}),
            ),
            usage=Usage(input=1200, output=40, cache_read=300, thoughts=12),
        ),
        Reply(text="notes.txt is created; CONTINUE", usage=Usage(input=90, output=11, cache_read=1500)),
        Reply(text="All done. <promise>COMPLETE</promise>", usage=Usage(input=1400, output=9)),
    ]


@dataclass
class Loop:
    project: Project
    api: ChatAPI
    env: dict[str, str]
    done: subprocess.CompletedProcess[str]
    script: list[Reply]


@pytest.fixture(scope="module")
def loop(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    """One loop of real Copilot (``--output-format json``): a run that ends on a 429, then two
    iterations."""
    root = tmp_path_factory.mktemp("copilot-json")
    p = cc.project(root / "project")
    script = loop_script(p.dir)
    with ChatAPI(Script([*LIMITED, *script])) as api:
        env = copilot_env(root, api, client_bin)
        env["TMPDIR"] = str(root / "tmp")  # where the run's private usage file goes
        (root / "tmp").mkdir()
        done = cc.run(p, env, AGENT, "--max-iterations", "4")
    yield Loop(p, api, env, done, script)


def test_the_json_loop_continues_then_completes_on_the_final_text(loop: Loop) -> None:
    """The prompt's echo (``user.message``), commentary, reasoning and a command naming the promise do
    not complete the loop; the last ``assistant.message`` does (defect 12)."""
    assert loop.done.returncode == 0, loop.done.stdout + loop.done.stderr
    assert loop.api.replies() == loop.script
    events = loop.project.journal("s1")
    promises = [(e["iteration"], e["signal"]) for e in events if e["type"] == "promise_detected"]
    assert promises == [(2, "COMPLETE")]


def test_the_json_loop_records_tools_files_and_model(loop: Loop) -> None:
    """Tools, files and the model as Copilot reported them."""
    recorded = cc.turns(loop.project)
    assert [t["iteration"] for t in recorded] == [1, 2]
    assert [t["tool_count"] for t in recorded] == [2, 0]
    assert [t["files_modified"] for t in recorded] == [["notes.txt"], []]
    assert [t["model"] for t in recorded] == [MODEL, MODEL]
    assert KEY not in loop.done.stdout


def test_the_json_loop_records_exact_tokens_and_cost(loop: Loop) -> None:
    """Copilot's stream has no tokens: the run adds ``--usage-output-file`` (a private file) and
    records what it says, per iteration and per loop equal to what the mock served, priced from the
    model; the 429's run served nothing and records nothing."""
    first, second = loop.script[:2], loop.script[2:]
    recorded = cc.turns(loop.project)
    assert [t["tokens"] for t in recorded] == [cc.served_tokens(first), cc.served_tokens(second)]
    last = [it[-1].usage for it in (first, second)]  # each run's last request: the context's fill
    assert [t["context_tokens"] for t in recorded] == [u.input + u.cache_read for u in last]
    served = loop.api.served_usage()
    in_all = {k: sum(t["tokens"][k] for t in recorded) for k in recorded[0]["tokens"]}
    assert in_all == {
        "input": served.input,
        "output": served.output + served.thoughts,  # OpenAI's output counts reasoning
        "cache_creation": served.cache_write,
        "cache_read": served.cache_read,
    }
    (limit,) = [e for e in loop.project.journal("s1") if e["type"] == "rate_limited"]
    assert limit["tokens"] == cc.served_tokens([])
    costs = cc.costs(loop.project, loop.env)
    assert costs == pytest.approx([cc.price(cc.served_tokens(first)), cc.price(cc.served_tokens(second))])
    assert sum(c or 0 for c in costs) == pytest.approx(cc.price(cc.served_tokens(loop.script)))
    assert not list(Path(loop.env["TMPDIR"]).glob("ralph-copilot-*"))  # its private file is removed


def test_a_json_429_is_a_rate_limit_not_an_iteration(loop: Loop) -> None:
    """Copilot retries a 429 five times, then ends its run with a ``session.error`` of type
    ``rate_limit``: the loop waits and runs iteration 1 again (defect 12)."""
    (limit,) = [e for e in loop.project.journal("s1") if e["type"] == "rate_limited"]
    assert limit["iteration"] == 1 and "429 Rate limit reached for" in limit["reason"], limit
    assert limit["resets_at"] is not None


def test_text_mode_is_refused_naming_the_flag(client_bin: Path, tmp_path: Path) -> None:
    """Copilot's text mode writes commentary, each tool's command and the answer to stdout alike: a
    promise in any would complete the loop (defect 12). ``run`` refuses it, naming the flag."""
    p = cc.project(tmp_path / "project")
    with ChatAPI(Script(loop_script(p.dir))) as api:
        env = copilot_env(tmp_path, api, client_bin)
        done = cc.run(p, env, ["copilot", "--allow-all-tools"], "--max-iterations", "2")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--output-format json" in line and line.startswith("ralph-ledger run: copilot"), line
    assert not api.served

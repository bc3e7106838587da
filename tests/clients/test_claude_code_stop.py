"""The Claude Code Stop and SubagentStop hook against the real Claude Code, in both modes.

Each case installs the hook in a throwaway git project as a user does (``ralph-ledger init
claude-code``, ``ralph-ledger loop start``), runs the real ``claude -p`` against the Anthropic mock
with a script of turns, and compares the ledger (``ralph-ledger sql``, the journal) with what the
mock served. The hook command ``init`` wrote runs behind a wrapper that logs each input as the hook
received it (the captures in tests/fixtures/clients/claude-code-2.1.328/ were made this way). One
client run per case (module-scoped), shared by its assertions. The rules checked are in
docs/design/claude-code-stop.md.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import VENV_BIN, client_env
from tests.clients.mocks.anthropic import MODEL, AnthropicAPI
from tests.clients.mocks.base import Reply, Request, Script, ToolCall, Turn, Usage
from tests.unit.test_costs import library_price

pytestmark = pytest.mark.clients

RALPH = str(VENV_BIN / "ralph-ledger")
STREAM = ("--output-format", "stream-json", "--verbose")
SUBTASK = "SUBTASK"  # a sub-agent's prompt carries it: its requests get the sub-agent's script


@dataclass
class Run:
    """One real client run in a project with the hook installed: what the mock served, the hook's
    inputs, the client's output."""

    project: Path
    home: Path
    api: AnthropicAPI
    inputs: list[dict[str, Any]]
    stdout: str
    main: list[Reply] = field(default_factory=list)  # the turns served to the main agent, in order
    sub: list[Reply] = field(default_factory=list)  # and to sub-agents

    def sql(self, query: str) -> list[dict[str, Any]]:
        proc = subprocess.run(
            [RALPH, "sql", "--json", query], cwd=self.project, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        rows: list[dict[str, Any]] = json.loads(proc.stdout)
        return rows

    def journal(self) -> list[dict[str, Any]]:
        (path,) = (self.project / ".ralph" / "journals").glob("*.jsonl")
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def stops(self, event: str = "Stop") -> list[dict[str, Any]]:
        return [i for i in self.inputs if i.get("hook_event_name") == event]

    def transcript(self) -> Path:
        return Path(self.stops()[0]["transcript_path"])


def usage_of(replies: list[Reply]) -> dict[str, int]:
    return {
        "input": sum(r.usage.input for r in replies),
        "output": sum(r.usage.output for r in replies),
        "cache_read": sum(r.usage.cache_read for r in replies),
        "cache_write": sum(r.usage.cache_write for r in replies),
    }


def recorded(run: Run, where: str = "true") -> dict[str, int]:
    (row,) = run.sql(
        "select coalesce(sum(input), 0) as input, coalesce(sum(output), 0) as output, "
        "coalesce(sum(cache_read), 0) as cache_read, coalesce(sum(cache_write), 0) as cache_write "
        f"from turn_tokens where {where}"
    )
    return {k: int(v) for k, v in row.items()}


def claude_run(
    client_bin: Path,
    root: Path,
    turns: Callable[[Request], Turn],
    *,
    mode: str,
    loop: tuple[str, ...],
    toml: str = "",
    tools: str = "Write,Edit,Read,Agent,TaskCreate,TaskUpdate,TaskList,TodoWrite",
    env: dict[str, str] | None = None,
) -> Run:
    """``init claude-code`` and ``loop start`` in a fresh project, the hook behind a logging wrapper,
    then one real ``claude -p`` against the mock; the warm worker the hook started is stopped."""
    project, home = root / "project", root / "home"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    if toml:
        (project / "ralph.toml").write_text(toml)
    base = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    for args in (["init", "claude-code"], ["loop", "start", *loop, "--mode", mode]):
        proc = subprocess.run(
            [RALPH, *args], cwd=project, env=base, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
    settings_path = project / ".claude" / "settings.json"
    settings = json.loads(settings_path.read_text())
    (command,) = {h["command"] for x in settings["hooks"]["Stop"] for h in x["hooks"]}
    log = root / "hook-inputs.jsonl"
    wrapper = root / "hook.sh"
    wrapper.write_text(
        f"#!/bin/sh\nin=$(cat)\nprintf '%s\\n' \"$in\" >> {shlex.quote(str(log))}\n"
        f"printf '%s' \"$in\" | {command}\n"
    )
    wrapper.chmod(0o755)
    for entries in settings["hooks"].values():
        for entry in entries:
            for hook in entry["hooks"]:
                hook["command"] = str(wrapper)
    settings_path.write_text(json.dumps(settings))
    api = AnthropicAPI(turns)
    try:
        with api:
            extra = {
                "ANTHROPIC_BASE_URL": api.url,
                "ANTHROPIC_API_KEY": "sk-ant-test-0000000000",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                **(env or {}),
            }
            proc = subprocess.run(
                [str(client_bin / "claude"), "-p", "--model", MODEL, "--allowedTools", tools, *STREAM],
                input="Do the work",
                env=client_env(home, extra),
                cwd=project,
                capture_output=True,
                text=True,
                timeout=90,
            )
        assert proc.returncode == 0, proc.stderr[-2000:]
    finally:
        _stop_worker(project)
    inputs = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    run = Run(project, home, api, inputs, proc.stdout)
    for s in api.served:
        if isinstance(s.turn, Reply):
            sub = SUBTASK in json.dumps(s.request.body.get("messages", [])[:1])
            (run.sub if sub else run.main).append(s.turn)
    if os.environ.get(CAPTURE):
        capture(run, Path(os.environ[CAPTURE]) / root.name.rstrip("0123456789"), log)
    return run


CAPTURE = "RALPH_CAPTURE_DIR"
"""Set, each run's transcripts, hook inputs and served turns are saved there (see the captures' README)."""


def capture(run: Run, out: Path, log: Path) -> None:
    """Save a run as tests/fixtures/clients/claude-code-2.1.328/<case>/ holds it."""
    out.mkdir(parents=True, exist_ok=True)
    transcript = run.transcript()
    (out / "transcript.jsonl").write_bytes(transcript.read_bytes())
    for agent in sorted((transcript.parent / transcript.stem / "subagents").glob("*.jsonl")):
        (out / "subagent.jsonl").write_bytes(agent.read_bytes())
    (out / "hook-inputs.jsonl").write_bytes(log.read_bytes())
    served = [
        {
            "agent": who,
            "text": r.text,
            "usage": [r.usage.input, r.usage.output, r.usage.cache_read, r.usage.cache_write],
        }
        for who, replies in (("main", run.main), ("sub", run.sub))
        for r in replies
    ]
    (out / "served.json").write_text(json.dumps(served, indent=1) + "\n")


def _stop_worker(project: Path) -> None:
    """SIGTERM the warm worker the hook started in the project's home (its pid is in the lock)."""
    lock = project / ".ralph" / "stop-worker.lock"
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            os.kill(int(lock.read_text()), signal.SIGTERM)
            return
        except (OSError, ValueError):
            time.sleep(0.05)


class Router:
    """The main agent's turns in order, and a sub-agent's (its first message names ``SUBTASK``),
    each served after ``delay`` seconds."""

    def __init__(self, main: list[Reply], sub: list[Reply], delay: float = 0.0) -> None:
        self.main, self.sub, self.delay = Script(main), Script(sub), delay
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Turn:
        if SUBTASK in json.dumps(request.body.get("messages", [])[:1]):
            time.sleep(self.delay)
            return self.sub(request)
        return self.main(request)


def write(path: Path, text: str = "x") -> ToolCall:
    return ToolCall("Write", {"file_path": str(path), "content": text})


# --- 1. the drop-in loop: the transcript lags the stop ------------------------------------------------


@pytest.fixture(scope="module")
def drop_in(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("drop-in")
    main = [  # text-only turns end fast: their stop usually comes before the transcript holds them
        Reply(text="Working.", usage=Usage(100, 10, 1000, 50)),
        Reply(
            text="Writing a.", tool_calls=(write(root / "project" / "a.txt"),), usage=Usage(105, 15, 1050, 55)
        ),
        Reply(text="Wrote a.", usage=Usage(110, 11, 1100, 60)),
        Reply(text="Checked a.", usage=Usage(120, 12, 1200, 70)),
        Reply(text="<promise>DONE</promise>", usage=Usage(130, 13, 1300, 80)),
    ]
    yield drop_in_loop(client_bin, root, main)


def drop_in_loop(client_bin: Path, root: Path, main: list[Reply], env: dict[str, str] | None = None) -> Run:
    """A drop-in loop (promise ``DONE``) of the real client served ``main``'s turns."""
    loop = ("Do the work", "--completion-promise", "DONE", "--max-iterations", "6")
    return claude_run(client_bin, root, Script(main), mode="plugin", loop=loop, env=env)


@pytest.fixture(scope="module")
def drop_in_warm(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The drop-in loop as a user runs it: its stops served by the warm worker (the default)."""
    root = tmp_path_factory.mktemp("drop-in-warm")
    main = [
        Reply(text="Working.", usage=Usage(100, 10, 1000, 50)),
        Reply(
            text="Writing b.", tool_calls=(write(root / "project" / "b.txt"),), usage=Usage(105, 15, 1050, 55)
        ),
        Reply(text="Wrote b.", usage=Usage(110, 11, 1100, 60)),
        Reply(text="<promise>DONE</promise>", usage=Usage(130, 13, 1300, 80)),
    ]
    yield drop_in_loop(client_bin, root, main, env={"RALPH_WARM": "1"})


def test_the_warm_worker_records_the_same_as_a_stop_in_process(drop_in_warm: Run) -> None:
    """Per iteration and per loop, the last turn included, whoever served the stops."""
    m = drop_in_warm.main
    per = [recorded(drop_in_warm, f"iteration = {n}") for n in (1, 2, 3)]
    assert per == [usage_of(m[:1]), usage_of(m[1:3]), usage_of(m[3:])]
    assert recorded(drop_in_warm) == usage_of(m)
    (row,) = drop_in_warm.sql("select status, iteration from sessions")
    assert (row["status"], row["iteration"]) == ("complete", 3)
    assert (drop_in_warm.project / ".ralph" / "stop-worker.lock").exists()  # a worker served them
    assert not [e for e in drop_in_warm.journal() if e["type"] == "error_recorded"]


def test_drop_in_tokens_and_cost_equal_what_was_served_the_last_turn_included(drop_in: Run) -> None:
    served = usage_of(drop_in.main)
    assert recorded(drop_in) == served
    (row,) = drop_in.sql("select status, iteration, cost_usd from sessions")
    assert (row["status"], row["iteration"]) == ("complete", 4)
    from ledger.events import TokenUsage

    price = library_price(
        MODEL,
        TokenUsage(
            input=served["input"],
            output=served["output"],
            cache_read=served["cache_read"],
            cache_creation=served["cache_write"],
        ),
    )
    assert row["cost_usd"] == pytest.approx(price, rel=1e-9)


def test_drop_in_per_iteration_tokens_and_files_are_the_iterations_own(drop_in: Run) -> None:
    per = [recorded(drop_in, f"iteration = {n}") for n in (1, 2, 3, 4)]
    m = drop_in.main
    assert per == [usage_of(m[:1]), usage_of(m[1:3]), usage_of(m[3:4]), usage_of(m[4:])]
    rows = drop_in.sql("select iteration, files_modified from iterations order by iteration")
    assert [r["files_modified"] for r in rows] == [[], [str(drop_in.project / "a.txt")], [], []]
    turns = [e for e in drop_in.journal() if e["type"] == "agent_turn"]
    tools = [sum(t["tool_count"] for t in turns if t["iteration"] == n) for n in (1, 2, 3, 4)]
    assert tools == [0, 1, 0, 0] and {t["model"] for t in turns} == {MODEL}
    assert [t["output_excerpt"] for t in turns] == [s["last_assistant_message"] for s in drop_in.stops()]


def test_drop_in_decides_from_the_last_assistant_message(drop_in: Run) -> None:
    stops = drop_in.stops()
    said = ["Working.", "Wrote a.", "Checked a.", "<promise>DONE</promise>"]
    assert [s["last_assistant_message"] for s in stops] == said
    decided = [e for e in drop_in.journal() if e["type"] == "stop_decided"]
    assert [e["decision"] for e in decided] == ["block", "block", "block", "allow"]
    assert [e["prompt_id"] for e in decided] == [s["prompt_id"] for s in stops]
    assert not [e for e in drop_in.journal() if e["type"] == "error_recorded"]  # every turn landed in time


# --- 2. the ledger-native loop: task tools, a refused TodoWrite, a sub-agent ------------------------------

NATIVE_TOML = """max_iterations = 5

[[rules]]
type = "todos"
name = "todos"
"""


@pytest.fixture(scope="module")
def native(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("native")
    todo = {"todos": [{"content": "Never done", "status": "pending", "activeForm": "Not doing"}]}
    agent = {"description": "notes", "prompt": f"{SUBTASK}: write notes", "run_in_background": False}
    main = [
        Reply(text="Planning.", tool_calls=(ToolCall("TodoWrite", todo),), usage=Usage(100, 10, 500, 5)),
        Reply(
            text="Tasks.",
            tool_calls=(ToolCall("TaskCreate", {"subject": "Write b", "description": "the file b"}),),
            usage=Usage(101, 11, 510, 6),
        ),
        Reply(text="Delegating.", tool_calls=(ToolCall("Agent", agent),), usage=Usage(102, 12, 520, 7)),
        Reply(text="b is next.", usage=Usage(103, 13, 530, 8)),  # stop 1: one task pending: continue
        Reply(
            text="Writing b.",
            tool_calls=(
                write(root / "project" / "b.txt"),
                ToolCall("TaskUpdate", {"taskId": "1", "status": "completed"}),
            ),
            usage=Usage(104, 14, 540, 9),
        ),
        Reply(text="<promise>COMPLETE</promise>", usage=Usage(105, 15, 550, 10)),  # stop 2: all done
    ]
    sub = [
        Reply(text="Noting.", tool_calls=(write(root / "project" / "notes.md"),), usage=Usage(40, 4, 0, 400)),
        Reply(text="Notes written.", usage=Usage(41, 5, 300, 0)),
    ]
    yield claude_run(
        client_bin, root, Router(main, sub), mode="ledger", loop=("Do the work",), toml=NATIVE_TOML
    )


def test_native_completes_once_the_task_list_is_done(native: Run) -> None:
    (row,) = native.sql("select status, iteration from sessions")
    assert (row["status"], row["iteration"]) == ("complete", 2)
    results = native.sql(
        "select iteration, passed, message from rule_results where rule = 'todos' order by 1"
    )
    assert [(r["iteration"], r["passed"]) for r in results] == [(1, False), (2, True)]
    assert "Write b" in results[0]["message"] and "Never done" not in results[0]["message"]


def test_native_tokens_equal_what_was_served_subagent_included(native: Run) -> None:
    assert recorded(native) == usage_of(native.main + native.sub)
    assert recorded(native, "iteration = 1") == usage_of(native.main[:4] + native.sub)
    assert recorded(native, "iteration = 2") == usage_of(native.main[4:])


def test_subagent_stop_records_the_subagents_own_run(native: Run) -> None:
    (stop,) = native.stops("SubagentStop")
    assert stop["last_assistant_message"] == "Notes written."
    (event,) = [e for e in native.journal() if e["type"] == "subagent_stopped"]
    tokens = event["tokens"]
    served = usage_of(native.sub)
    assert (tokens["input"], tokens["output"], tokens["cache_read"], tokens["cache_creation"]) == (
        served["input"],
        served["output"],
        served["cache_read"],
        served["cache_write"],
    )
    assert event["files_modified"] == [str(native.project / "notes.md")]
    assert (event["tool_count"], event["iteration"], event["model"]) == (1, 1, MODEL)


def test_native_files_are_the_iterations_own(native: Run) -> None:
    rows = native.sql("select iteration, files_modified from iterations order by iteration")
    assert str(native.project / "b.txt") in rows[1]["files_modified"]


# --- 3. the block cap --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def capped(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("cap")
    main = [Reply(text=f"Thinking {n}.", usage=Usage(10 + n, 1)) for n in range(6)]
    yield claude_run(
        client_bin,
        root,
        Script(main),
        mode="plugin",
        loop=("Do the work", "--max-iterations", "9"),
        env={"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "2"},
    )


def test_the_loop_uses_every_block_the_client_honours_and_ends_itself_at_the_next(capped: Run) -> None:
    assert len(capped.main) == 3  # Claude Code honours 2 blocks in a row: three turns
    assert "overriding and ending turn" not in capped.stdout  # the loop ended it, not the client
    (row,) = capped.sql("select status, iteration from sessions")
    assert (row["status"], row["iteration"]) == ("escalated", 3)
    trips = [e for e in capped.journal() if e["type"] == "guard_tripped"]
    assert [(t["guard"], t["evidence"]) for t in trips] == [
        ("block_cap", {"blocks_without_progress": 2, "cap": 2})
    ]
    assert recorded(capped) == usage_of(capped.main)


# --- 7. a stop while a sub-agent works in the background ----------------------------------------------


@pytest.fixture(scope="module", params=["plugin", "ledger"])
def background(
    request: pytest.FixtureRequest, client_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Run]:
    mode = str(request.param)
    root = tmp_path_factory.mktemp("background" if mode == "plugin" else "background-ledger")
    agent = {"description": "write c", "prompt": f"{SUBTASK}: write c", "run_in_background": True}
    main = [
        Reply(text="Delegating.", tool_calls=(ToolCall("Agent", agent),), usage=Usage(200, 20)),
        Reply(text="Waiting for the agent.", usage=Usage(210, 21)),  # stop 1: the sub-agent still works
        Reply(text="The agent wrote c.", usage=Usage(220, 22)),  # woken by the client: stop 2
        Reply(text="<promise>DONE</promise>", usage=Usage(230, 23)),  # stop 3
    ]
    sub = [
        Reply(text="Writing c.", tool_calls=(write(root / "project" / "c.txt"),), usage=Usage(50, 5)),
        Reply(text="c written.", usage=Usage(60, 6)),
    ]
    yield claude_run(
        client_bin,
        root,
        Router(main, sub, delay=0.4),
        mode=mode,
        loop=("Do the work", "--completion-promise", "DONE", "--max-iterations", "6"),
        toml="max_iterations = 6\n" if mode == "ledger" else "",
    )


def test_a_stop_while_a_subagent_runs_waits_for_it(background: Run) -> None:
    first = background.stops()[0]
    assert [t["status"] for t in first["background_tasks"]] == ["running"]
    texts = [r.text for r in background.main]
    assert texts == ["Delegating.", "Waiting for the agent.", "The agent wrote c.", "<promise>DONE</promise>"]
    decided = [e for e in background.journal() if e["type"] == "stop_decided"]
    assert [(e["decision"], e["waiting"], e["iteration"]) for e in decided] == [
        ("allow", True, 1),
        ("block", False, 1),
        ("allow", False, 2),
    ]
    assert decided[0]["background_tasks"] == first["background_tasks"]
    (row,) = background.sql("select status, iteration from sessions")
    assert (row["status"], row["iteration"]) == ("complete", 2)
    assert recorded(background) == usage_of(background.main + background.sub)
    assert recorded(background, "iteration = 1") == usage_of(background.main[:3] + background.sub)

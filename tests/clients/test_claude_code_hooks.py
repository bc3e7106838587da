"""Claude Code's StopFailure and SessionStart against the real Claude Code 2.1.328, in a
ledger-native loop: a turn the Anthropic mock answers with a 429 (``RATE_LIMITED``, as the API sends
it) is a usage-limit wait at the same iteration; a fork (``--resume ID --fork-session``) never drives
the loop; ``claude --resume ID`` goes on with it (the hook reminds the agent which iteration goes on)
and its next stop is that iteration's turn. The hook runs behind a wrapper logging each input, as
in ``test_claude_code_stop``; the rules: docs/design/claude-code-hooks.md."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.drivers.claude_code.install.settings import detached
from tests.clients.claude_code_client import RATE_LIMITED, env
from tests.clients.mocks.anthropic import MODEL, AnthropicAPI
from tests.clients.mocks.base import Reply, Script, Turn, Usage
from tests.clients.test_claude_code_stop import RALPH, STREAM, _stop_worker

pytestmark = pytest.mark.clients

REMINDER = "[ralph-ledger] This session runs the loop"
LOOP = ("loop", "start", "Do the work", "--completion-promise", "DONE", "--mode", "ledger")


@dataclass
class Session:
    """A project with the hook installed by ``init`` and a loop started, and its client runs."""

    root: Path
    claude: Path

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def log(self) -> Path:
        return self.root / "hook-inputs.jsonl"

    def inputs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def run(
        self, turns: list[Turn], *args: str, prompt: str
    ) -> tuple[subprocess.CompletedProcess[str], AnthropicAPI]:
        """One ``claude -p`` against the mock serving ``turns``; the hook's warm worker stopped after."""
        api = AnthropicAPI(Script(turns))
        try:
            with api:
                argv = [str(self.claude), "-p", "--model", MODEL, "--allowedTools", "Write", *args, *STREAM]
                proc = subprocess.run(
                    argv,
                    input=prompt,
                    env=env(self.root / "home", api.url),
                    cwd=self.project,
                    capture_output=True,
                    text=True,
                    timeout=90,
                )
        finally:
            _stop_worker(self.project)
        return proc, api

    def ralph(self, *args: str) -> str:
        """``ralph-ledger ARGS`` in the project; its stdout."""
        proc = subprocess.run([RALPH, *args], cwd=self.project, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def journal(self, sid: str) -> list[dict[str, Any]]:
        path = self.project / ".ralph" / "journals" / f"{sid}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def installed(client_bin: Path, root: Path, *, loop: bool = True) -> Session:
    """``init claude-code`` and ``loop start --mode ledger`` in a fresh git project, the hook
    command behind a wrapper that logs every input."""
    session = Session(root, client_bin / "claude")
    session.project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=session.project, check=True)
    (session.project / "ralph.toml").write_text("max_iterations = 5\n")
    session.ralph("init", "claude-code")
    if loop:
        session.ralph(*LOOP)
    path = session.project / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    assert sorted(settings["hooks"]) == ["SessionStart", "Stop", "StopFailure", "SubagentStop"]
    (command,) = {h["command"] for x in settings["hooks"]["Stop"] for h in x["hooks"]}
    (apart,) = {h["command"] for x in settings["hooks"]["StopFailure"] for h in x["hooks"]}
    assert apart == detached(command)  # Claude Code ends a StopFailure hook at once: detached
    wrapper = root / "hook.sh"
    wrapper.write_text(
        f"#!/bin/sh\nin=$(cat)\nprintf '%s\\n' \"$in\" >> {shlex.quote(str(session.log))}\n"
        f"printf '%s' \"$in\" | {command}\n"
    )
    wrapper.chmod(0o755)
    for event, entries in settings["hooks"].items():
        for entry in entries:
            for hook in entry["hooks"]:
                hook["command"] = detached(str(wrapper)) if event == "StopFailure" else str(wrapper)
    path.write_text(json.dumps(settings))
    return session


def recorded(session: Session, sid: str, kind: str, within: float = 60.0) -> None:
    """Wait until ``sid``'s journal holds a ``kind`` event (a detached hook runs after the client)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if any(e["type"] == kind for e in session.journal(sid)):
                return
        time.sleep(0.1)


@dataclass
class Limited:
    """The three runs: limited, forked, resumed."""

    session: Session
    sid: str  # the Claude Code session that owns the loop
    runs: list[subprocess.CompletedProcess[str]]
    apis: list[AnthropicAPI]


@pytest.fixture(scope="module")
def limited(client_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Limited]:
    session = installed(client_bin, tmp_path_factory.mktemp("hooks"))
    first, api1 = session.run(
        [Reply(text="Step one.", usage=Usage(100, 10)), RATE_LIMITED], prompt="Do the work"
    )
    sid = json.loads(first.stdout.splitlines()[-1])["session_id"]
    recorded(
        session, f"cc-{sid}", "rate_limited"
    )  # the detached StopFailure hook records after the client ended
    fork, api2 = session.run(
        [Reply(text="Forked work.", usage=Usage(50, 5))],
        "--resume",
        sid,
        "--fork-session",
        prompt="Try another way",
    )
    done = Reply(text="Step two. <promise>DONE</promise>", usage=Usage(120, 12))
    resumed, api3 = session.run([done], "--resume", sid, prompt="Go on")
    if os.environ.get("RALPH_CAPTURE_DIR"):  # the captures' folder: lifecycle/inputs-loop.jsonl
        out = Path(os.environ["RALPH_CAPTURE_DIR"]) / "lifecycle"
        out.mkdir(parents=True, exist_ok=True)
        (out / "inputs-loop.jsonl").write_bytes(session.log.read_bytes())
    yield Limited(session, sid, [first, fork, resumed], [api1, api2, api3])


def test_the_limited_turn_is_a_wait_at_the_same_iteration(limited: Limited) -> None:
    first = limited.runs[0]
    assert first.returncode == 1 and "Request rejected (429)" in first.stdout  # the client's own report
    failures = [i for i in limited.session.inputs() if i["hook_event_name"] == "StopFailure"]
    assert [(f["session_id"], f["error"]) for f in failures] == [(limited.sid, "rate_limit")]
    events = limited.session.journal(f"cc-{limited.sid}")
    (wait,) = [e for e in events if e["type"] == "rate_limited"]
    assert wait["iteration"] == 2 and wait["reason"].startswith("API Error: Request rejected (429)")
    assert wait["wait_s"] == 60.0 and wait["resets_at"] is None  # the API key's 429 gives no reset time
    seq = [e["type"] for e in events]
    assert seq.index("rate_limited") > seq.index("iteration_started")  # recorded while iteration 2 ran


def test_a_fork_of_the_looping_session_never_drives_its_loop(limited: Limited) -> None:
    starts = [i for i in limited.session.inputs() if i["hook_event_name"] == "SessionStart"]
    (fork,) = [s for s in starts if s["source"] == "fork"]
    assert fork["session_id"] != limited.sid
    fork_stops = [
        i
        for i in limited.session.inputs()
        if i["hook_event_name"] == "Stop" and i["session_id"] == fork["session_id"]
    ]
    assert len(fork_stops) == 1 and limited.runs[1].returncode == 0  # allowed: one turn, nothing more
    journals = sorted(p.name for p in (limited.session.project / ".ralph" / "journals").glob("*.jsonl"))
    assert journals == [f"cc-{limited.sid}.jsonl"]


def test_a_resume_goes_on_with_the_same_iteration_and_the_agent_is_told(limited: Limited) -> None:
    resumed = limited.runs[2]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    starts = [i for i in limited.session.inputs() if i["hook_event_name"] == "SessionStart"]
    assert [s["source"] for s in starts if s["session_id"] == limited.sid] == ["startup", "resume"]
    request = json.dumps(limited.apis[2].served[0].request.body)
    assert f"{REMINDER} cc-{limited.sid}: iteration 2 goes on." in request  # SessionStart's stdout reached it
    events = limited.session.journal(f"cc-{limited.sid}")
    assert [e["iteration"] for e in events if e["type"] == "validation_ran"] == [1, 2]
    assert [e["type"] for e in events][-1] == "session_completed"
    (done,) = [e for e in events if e["type"] == "session_completed"]
    assert done["total_iterations"] == 2  # the limited turn was not an iteration


@pytest.fixture(scope="module")
def forked_loop(
    client_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Session, str, Reply]]:
    """A session's turn with no loop, then a loop started and run in a fork of that session."""
    session = installed(client_bin, tmp_path_factory.mktemp("fork"), loop=False)
    first, _ = session.run(
        [Reply(text="Parent work.", usage=Usage(1000, 100, 5000, 500))], prompt="Do the work"
    )
    sid = json.loads(first.stdout.splitlines()[-1])["session_id"]
    session.ralph(*LOOP)
    done = Reply(text="<promise>DONE</promise>", usage=Usage(7, 3, 11, 13))
    fork, _ = session.run([done], "--resume", sid, "--fork-session", prompt="Finish it")
    assert fork.returncode == 0, fork.stderr[-2000:]
    forked = json.loads(fork.stdout.splitlines()[-1])["session_id"]
    if os.environ.get("RALPH_CAPTURE_DIR"):  # the fork's transcript: lifecycle/fork-transcript.jsonl
        (stop,) = [
            i for i in session.inputs() if i["session_id"] == forked and i["hook_event_name"] == "Stop"
        ]
        out = Path(os.environ["RALPH_CAPTURE_DIR"]) / "lifecycle"
        (out / "fork-transcript.jsonl").write_bytes(Path(stop["transcript_path"]).read_bytes())
    yield session, forked, done


def test_a_loop_started_in_a_fork_counts_only_the_forks_own_turns(
    forked_loop: tuple[Session, str, Reply],
) -> None:
    session, fork, done = forked_loop
    events = session.journal(f"cc-{fork}")
    assert [e["type"] for e in events][-1] == "session_completed"
    turns = [e for e in events if e["type"] == "agent_turn"]
    tokens = {
        k: sum(t["tokens"][k] for t in turns) for k in ("input", "output", "cache_read", "cache_creation")
    }
    u = done.usage
    assert tokens == {
        "input": u.input,
        "output": u.output,
        "cache_read": u.cache_read,
        "cache_creation": u.cache_write,
    }

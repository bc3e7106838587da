"""``ledger.notify``: what one append notifies about, what the notification says, the MCP tools'
path, and a stop's cost: the hook process that ends a loop imports neither apprise nor DuckDB."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.core.home import Home
from ledger.drivers.mcp.schemas import Validated
from ledger.drivers.mcp.tools import Tools
from ledger.loop.config.config_file import load_notify
from ledger.loop.config.loop_config import ConfigError, LoopConfig, NotifyConfig, recorded_config
from ledger.notify import Request, notice_of, request_of
from ledger.notify.send import BODY_LIMIT, compose
from tests.receiver import receiving

ALL = ("complete", "blocked", "escalated", "guard")
TRIP = ev.GuardTripped(session_id="s", iteration=3, guard="stall", detail="no progress", evidence={"n": 3})
ESCALATED = ev.SessionEscalated(session_id="s", iteration=3, guard="stall", reason="guard stall tripped")


@pytest.mark.parametrize(
    ("events", "on", "notice"),
    [
        ([ev.SessionCompleted(session_id="s")], ALL, "complete"),
        ([ev.SessionBlocked(session_id="s")], ALL, "blocked"),
        ([TRIP, ESCALATED], ALL, "escalated"),  # one notification for the trip and the end it forced
        ([TRIP, ESCALATED], ("guard",), "guard"),
        ([TRIP, ESCALATED], ("complete", "blocked"), None),
        ([ev.SessionCompleted(session_id="s")], (), None),
        (
            [
                ev.IterationStarted(session_id="s", iteration=2),
                ev.SignalResolved(session_id="s", signal="CONTINUE"),
            ],
            ALL,
            None,
        ),
    ],
)
def test_what_an_append_notifies_about(
    events: list[ev.Event], on: tuple[str, ...], notice: str | None
) -> None:
    assert notice_of(events, on) == notice


def test_a_request_carries_the_guard_and_its_evidence_but_compose_never_a_url() -> None:
    request = request_of(Path("/h/journals/s.jsonl"), [TRIP, ESCALATED], "escalated", ["slack://T/B/secret"])
    assert (request.session_id, request.iteration, request.guard, request.detail) == (
        "s",
        3,
        "stall",
        "no progress",
    )
    assert json.loads(request.evidence) == {"n": 3} and request.reason == "guard stall tripped"
    row = {"task": "Fix the login\nand more", "status": "escalated", "max_iterations": 15, "agent": "claude"}
    title, body = compose(request, {**row, "tokens": 12345, "cost_usd": 0.5})
    assert title == "ralph-ledger: s escalated"
    assert body.splitlines() == [
        "Session s: escalated",
        "Task: Fix the login",
        "Status: escalated at iteration 3 of 15",
        "Reason: guard stall tripped",
        "Guard: stall: no progress",
        'Evidence: {"n":3}',
        "Agent: claude",
        "Spent: 12,345 tokens, cost $0.5000",
    ]
    assert "secret" not in title + body


def test_a_guard_notice_is_titled_by_its_guard_and_a_body_stays_short() -> None:
    request = Request(journal="/j", session_id="s", notice="guard", guard="stall", reason="x" * 5000)
    title, body = compose(request, None)
    assert title == "ralph-ledger: s guard stall tripped"
    assert len(body) == BODY_LIMIT and body.endswith("…") and "Status: guard at iteration 0" in body
    said = Request(
        journal="/j", session_id="s", notice="guard", guard="stall", detail="stalled", reason="stall: stalled"
    )
    assert compose(said, None)[1].splitlines()[-2:] == ["Reason: stall: stalled", "Guard: stall"]  # not twice


def test_the_urls_are_never_recorded_in_a_session() -> None:
    config = LoopConfig(notify=NotifyConfig(urls=["slack://T/B/secret"]))
    assert "notify" not in recorded_config(config) and "secret" not in json.dumps(recorded_config(config))


def test_the_mcp_tools_notify_when_the_agent_completes(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    with receiving() as receiver:
        (project / "ralph.toml").write_text(f'[notify]\nurls = ["{receiver.url()}"]\n')
        tools = Tools(Home(tmp_path / "home"), project)
        tools.call("iteration_start", {"taskId": "t1", "task": "Add the login page"})
        validated = tools.call(
            "iteration_validate", {"taskId": "t1", "agentOutput": "<promise>COMPLETE</promise>"}
        )
        assert isinstance(validated, Validated) and validated.completion_signal == "COMPLETE"
        tools.call("iteration_complete", {"taskId": "t1", "completionPromise": "COMPLETE"})
        (post,) = receiver.wait()
    assert post.body["title"] == "ralph-ledger: t1 completed"
    assert "Task: Add the login page" in post.body["message"]


HOOK_MUST_NOT_IMPORT = (
    "apprise",
    "duckdb",
    "pyarrow",
    "requests",
    "json",
    "dataclasses",
    "inspect",
    "ledger.loop.config.loop_config",
)


def test_a_stop_that_ends_a_loop_hands_the_notification_over_and_imports_nothing_slow(tmp_path: Path) -> None:
    """A drop-in stop that completes its loop, with ``[notify]``: the hook process neither imports
    apprise nor DuckDB nor waits for the receiver (2 s to answer); the sender posts."""
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "ralph-loop.local.md").write_text(
        "---\nactive: true\niteration: 1\nsession_id: \nmax_iterations: 0\n"
        'completion_promise: "ALL DONE"\nstarted_at: "2026-11-22T00:00:00Z"\n---\n\nFix the tests\n'
    )
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text(
        '{"type": "assistant", "sessionId": "s1", "message": {"id": "m1", "role": "assistant", '
        '"content": [{"type": "text", "text": "<promise>ALL DONE</promise>"}]}}\n'
    )
    event = json.dumps({"session_id": "s1", "transcript_path": str(transcript), "cwd": str(tmp_path)})
    loaded = f"sorted(m for m in {HOOK_MUST_NOT_IMPORT!r} if m in sys.modules)"
    code = (
        "import sys; from ledger.cli import main; code = main(['hook', 'claude-code']); "
        f"print(code, {loaded}, file=sys.stderr)"
    )
    with receiving(delay_s=2.0) as receiver:
        (tmp_path / "ralph.toml").write_text(f'[notify]\nurls = ["{receiver.url()}"]\n')
        proc = subprocess.run(
            [sys.executable, "-c", code],
            input=event,
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        )
        returned = time.monotonic()
        (post,) = receiver.wait()
    assert proc.stdout == "✅ Ralph loop: Detected <promise>ALL DONE</promise>\n"
    assert proc.stderr.strip() == "0 []"
    assert returned < post.answered  # never waited for the network: the receiver answers 2 s after a POST
    assert post.body["title"] == "ralph-ledger: cc-s1 completed"


def test_notify_in_a_pyproject_is_read_alone_and_named_with_its_prefix(tmp_path: Path) -> None:
    assert load_notify(tmp_path) is None  # no configuration file: nothing to notify
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ralph]\nmax_iterations = 5\n[tool.ralph.notify]\nurls = ["ntfy://loops"]\non = ["guard"]\n'
    )
    assert load_notify(tmp_path) == NotifyConfig(urls=["ntfy://loops"], on=["guard"])
    (tmp_path / "pyproject.toml").write_text('[tool.ralph.notify]\nurls = ["ntfy://loops"]\non = ["done"]\n')
    with pytest.raises(ConfigError) as exc:
        load_notify(tmp_path)
    assert str(exc.value) == (
        f"{tmp_path / 'pyproject.toml'}: tool.ralph.notify.on[0]: expected one of complete, blocked, "
        "escalated, guard, got 'done'"
    )


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("json://127.0.0.1:8080/hook", "json://127.0.0.1:8080"),
        ("json://user:secret@example.com/x", "json://example.com"),
        ("ntfys://me:pw@ntfy.example.org/topic", "ntfys://ntfy.example.org"),
        ("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ", "slack://"),  # its host is a token
        ("discord://4174216298/JHMHI8qBe7bk2ZwO5U711o3dV_js", "discord://"),
        ("tgram://123456789:abcdefg_hijklmnop/12315544/", "tgram://"),
    ],
)
def test_a_timeout_names_a_host_only_when_it_is_no_secret(url: str, where: str) -> None:
    """The host a timeout names is the one apprise shows in a URL's private form; a token in the host
    part of a service's URL is never shown."""
    import apprise

    from ledger.notify.send import _timed_out, _where

    sender = apprise.Apprise()
    assert sender.add(url)
    assert _where(url, sender[0]) == where
    said = _timed_out(sender[0], ("connect", None))
    assert said.startswith("timed out: ") and "could not be reached within 4 s (?cto=SECONDS" in said
    assert "secret" not in said and "pw" not in said

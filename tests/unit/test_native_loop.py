"""Ledger-native Claude Code loops (``ledger.drivers.claude_code.stop.native``), end to end:
``ralph-ledger loop start`` in a project with a ``ralph.toml``, then the Stop hook run as Claude
Code runs it (a process with the event on stdin, a transcript on disk) through a whole loop and
into every guard that applies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ledger import events as E
from ledger.cli import main
from ledger.drivers.claude_code.stop.locate import LOOP_FILE, STATE_FILE
from ledger.drivers.claude_code.stop.loop_file import LoopFile, read_loop_file
from ledger.storage.journal import Cursor, read_new

CLAUDE = "9d1c2b7e-0000-4000-8000-00000000aaaa"
OTHER = "9d1c2b7e-0000-4000-8000-00000000bbbb"
NO_BREAKER = "[guards.circuit_breaker]\nenabled = false\n"


def flag(name: str) -> str:
    """A ``ralph.toml`` command rule passing while ``<name>.ok`` exists in the project."""
    code = f"import os, sys; sys.exit(0 if os.path.exists('{name}.ok') else 1)"
    return f"[[rules]]\nname = {name!r}\ntype = 'command'\nargv = [{sys.executable!r}, '-c', {code!r}]\n"


class Loop:
    """A project with a ralph configuration, a transcript and the hook run as a process."""

    def __init__(self, root: Path, config: str) -> None:
        self.project = root / "project"
        self.project.mkdir()
        (self.project / "ralph.toml").write_text(config)
        self.transcript = root / "transcript.jsonl"
        self.transcript.touch()
        self.turns = 0

    def start(self, *args: str) -> str:
        cwd = Path.cwd()
        os.chdir(self.project)
        try:
            assert main(["loop", "start", "Make the tests pass", *args]) == 0
        finally:
            os.chdir(cwd)
        return "ok"

    def say(self, text: str, *, edits: tuple[str, ...] = (), tokens: int = 10, model: str = "") -> None:
        """Append one turn: the user's prompt, a text block, then one Edit per file."""
        self.turns += 1
        n = self.turns
        msg: dict[str, Any] = {"id": f"msg_{n}", "role": "assistant", "usage": {"input_tokens": tokens}}
        if model:
            msg["model"] = model
        lines: list[dict[str, Any]] = [{"type": "user", "message": {"role": "user", "content": f"go {n}"}}]
        lines.append({"type": "assistant", "message": {**msg, "content": [{"type": "text", "text": text}]}})
        for path in edits:
            block = {"type": "tool_use", "name": "Edit", "input": {"file_path": str(self.project / path)}}
            lines.append({"type": "assistant", "message": {**msg, "content": [block]}})
        with self.transcript.open("a") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)

    def stop(self, session: str = CLAUDE) -> subprocess.CompletedProcess[str]:
        """Run ``ralph-ledger hook claude-code`` as Claude Code does at a stop."""
        stdin = {
            "session_id": session,
            "transcript_path": str(self.transcript),
            "cwd": str(self.project),
            "hook_event_name": "Stop",
            "stop_hook_active": self.turns > 1,
        }
        proc = subprocess.run(
            [sys.executable, "-m", "ledger.cli", "hook", "claude-code"],
            input=json.dumps(stdin).encode(),
            capture_output=True,
            timeout=60,
            env={**os.environ, "RALPH_HOME": str(self.project / ".ralph")},
            cwd=self.project,
            check=False,
        )
        assert proc.returncode == 0
        return subprocess.CompletedProcess(proc.args, 0, proc.stdout.decode(), proc.stderr.decode())

    def turn(self, text: str = "Working on it.", **kw: Any) -> dict[str, Any] | str:
        """One agent turn and its stop: the block JSON as a dict, or the printed line."""
        self.say(text, **kw)
        out = self.stop()
        assert out.stderr == ""
        return json.loads(out.stdout) if out.stdout.startswith("{") else out.stdout

    def events(self, session: str = CLAUDE) -> list[E.AnyEvent]:
        return read_new(self.project / ".ralph" / "journals" / f"cc-{session}.jsonl", Cursor()).events

    def touch(self, *names: str) -> None:
        for name in names:
            (self.project / f"{name}.ok").touch()

    def remove(self, *names: str) -> None:
        for name in names:
            (self.project / f"{name}.ok").unlink()


def blocked(answer: dict[str, Any] | str) -> dict[str, Any]:
    assert isinstance(answer, dict) and answer["decision"] == "block", answer
    return answer


def ended(loop: Loop, answer: dict[str, Any] | str, signal: str, guard: str = "") -> list[E.AnyEvent]:
    """The loop ended with ``signal`` (tripping ``guard``): the stop allowed, the loop file gone."""
    assert isinstance(answer, str), answer
    assert not (loop.project / LOOP_FILE).exists()
    evs = loop.events()
    assert [e.signal for e in evs if isinstance(e, E.SignalResolved)][-1] == signal
    assert isinstance(evs[-1], E.SessionCompleted | E.SessionBlocked | E.SessionEscalated | E.StopDecided)
    if guard:
        assert guard in [e.guard for e in evs if isinstance(e, E.GuardTripped)]
    assert [e.decision for e in evs if isinstance(e, E.StopDecided)][-1] == "allow"
    return evs


@pytest.fixture
def loop(tmp_path: Path) -> Loop:
    return Loop(tmp_path, flag("tests"))


def test_a_whole_loop_continue_continue_complete(loop: Loop) -> None:
    loop.start("--max-iterations", "5")
    assert isinstance(read_loop_file(loop.project / LOOP_FILE), LoopFile)
    assert not (loop.project / STATE_FILE).exists()
    first = blocked(loop.turn("Wrote a failing test.", edits=("test_x.py",)))
    assert first["reason"].startswith("Make the tests pass\n\nFeedback from iteration 1:\n- tests:")
    assert first["systemMessage"] == "🔄 Ralph iteration 2 of 5 | score 0 | failing: tests"
    claimed = read_loop_file(loop.project / LOOP_FILE)
    assert claimed is not None and claimed.claude_session_id == CLAUDE
    loop.touch("tests")
    second = blocked(loop.turn("Implemented it; tests pass."))
    assert second["reason"] == "Make the tests pass"
    assert second["systemMessage"] == "🔄 Ralph iteration 3 of 5 | score 100 | validation passing"
    last = loop.turn("All green.\n<promise>COMPLETE</promise>")
    assert isinstance(last, str) and last.startswith("✅ Ralph loop complete after 3 iterations")
    evs = ended(loop, last, "COMPLETE")
    assert isinstance(evs[-1], E.SessionCompleted) and evs[-1].total_iterations == 3
    started = [e for e in evs if isinstance(e, E.SessionStarted)]
    assert started[0].agent == "claude-code" and started[0].task == "Make the tests pass"
    turns = [e for e in evs if isinstance(e, E.AgentTurn)]
    assert [t.files_modified for t in turns] == [[str(loop.project / "test_x.py")], [], []]
    assert all(t.transcript_offset > 0 for t in turns)
    assert [e.decision for e in evs if isinstance(e, E.StopDecided)] == ["block", "block", "allow"]
    assert [e.iteration for e in evs if isinstance(e, E.IterationStarted)] == [1, 2, 3]


def test_completion_promise_from_loop_start(loop: Loop) -> None:
    loop.start("--completion-promise", "SHIPPED")
    loop.touch("tests")
    ended(loop, loop.turn("Done: <promise>SHIPPED</promise>"), "COMPLETE")


def test_blocked_promise_ends_the_loop_with_its_reason(loop: Loop) -> None:
    loop.start()
    answer = loop.turn("<promise>BLOCKED</promise>\nReason: the API key is missing")
    assert isinstance(answer, str) and answer.startswith("⛔ Ralph loop blocked at iteration 1")
    evs = ended(loop, answer, "BLOCKED")
    assert "agent promised BLOCKED: the API key is missing" in answer
    assert next(e for e in evs if isinstance(e, E.SessionBlocked)).reason.endswith("the API key is missing")


def test_manual_stop_is_honoured_at_the_next_stop(loop: Loop) -> None:
    loop.start()
    blocked(loop.turn())
    assert main(["--home", str(loop.project / ".ralph"), "stop", f"cc-{CLAUDE}", "--reason", "lunch"]) == 0
    ended(loop, loop.turn(), "BLOCKED")


def test_max_iterations(loop: Loop) -> None:
    loop.start("--max-iterations", "2")
    blocked(loop.turn())
    ended(loop, loop.turn(), "ESCALATE", "max_iterations")


def test_circuit_breaker(tmp_path: Path) -> None:
    loop = Loop(tmp_path, flag("tests") + "[guards.circuit_breaker]\nthreshold = 2\n")
    loop.start()
    blocked(loop.turn())
    ended(loop, loop.turn(), "ESCALATE", "circuit_breaker")


def test_quality_regression(tmp_path: Path) -> None:
    config = flag("a") + flag("b") + flag("c") + NO_BREAKER
    loop = Loop(tmp_path, config + "[guards.quality_regression]\nspan = 3\nmin_drop = 50\n")
    loop.start()
    loop.touch("a", "b", "c")
    assert blocked(loop.turn())["systemMessage"].endswith("score 100 | validation passing")
    loop.remove("a")
    blocked(loop.turn())
    loop.remove("b")
    evs = ended(loop, loop.turn(), "ESCALATE", "quality_regression")
    assert [e.score for e in evs if isinstance(e, E.ValidationRan)] == pytest.approx([100, 200 / 3, 100 / 3])


def test_thrashing(tmp_path: Path) -> None:
    loop = Loop(tmp_path, flag("tests") + NO_BREAKER + "[guards.thrashing]\nmin_iterations = 3\n")
    loop.start()
    blocked(loop.turn(edits=("src/app.py",)))
    blocked(loop.turn(edits=("src/app.py", "README.md")))
    evs = ended(loop, loop.turn(edits=("src/app.py",)), "BLOCKED", "thrashing")
    trip = next(e for e in evs if isinstance(e, E.GuardTripped))
    assert "app.py" in trip.detail


def test_validation_stall(tmp_path: Path) -> None:
    loop = Loop(tmp_path, flag("a") + flag("b") + NO_BREAKER + "[guards.validation_stall]\nspan = 2\n")
    loop.start()
    loop.touch("a")
    blocked(loop.turn())
    blocked(loop.turn())
    ended(loop, loop.turn(), "ESCALATE", "validation_stall")


def test_time_limit(tmp_path: Path) -> None:
    loop = Loop(tmp_path, flag("tests") + NO_BREAKER + "[guards.time_limit]\nseconds = 1.0\n")
    loop.start()
    blocked(loop.turn())
    time.sleep(1.2)
    ended(loop, loop.turn(), "BLOCKED", "time_limit")


def test_token_budget(tmp_path: Path) -> None:
    config = flag("tests") + NO_BREAKER + "[guards.token_budget]\nenabled = true\ntokens = 1500\n"
    loop = Loop(tmp_path, config)
    loop.start()
    blocked(loop.turn(tokens=1000))
    ended(loop, loop.turn(tokens=600), "ESCALATE", "token_budget")


def test_cost_budget(tmp_path: Path) -> None:
    """The turns' model comes from the transcript; 1,000 input tokens of Claude Sonnet 4.5 cost
    $0.003 (genai-prices), so the second turn reaches a $0.005 budget."""
    config = flag("tests") + NO_BREAKER + "[guards.cost_budget]\nenabled = true\nmax_cost_usd = 0.005\n"
    loop = Loop(tmp_path, config)
    loop.start()
    blocked(loop.turn(tokens=1000, model="claude-sonnet-4-5-20250929"))
    evs = ended(loop, loop.turn(tokens=1000, model="claude-sonnet-4-5-20250929"), "ESCALATE", "cost_budget")
    assert [e.model for e in evs if isinstance(e, E.AgentTurn)] == ["claude-sonnet-4-5-20250929"] * 2
    (trip,) = [e for e in evs if isinstance(e, E.GuardTripped)]
    assert trip.evidence["cost_usd"] == pytest.approx(0.006) and trip.detail.startswith("$0.0060 spent")


def test_context_window(tmp_path: Path) -> None:
    """The transcript's last request read 150,000 then 190,000 input tokens of Claude Sonnet 4.5's
    200,000 (genai-prices): the loop stops before an iteration would start 95% full."""
    config = flag("tests") + NO_BREAKER + "[guards.context_window]\nenabled = true\n"
    loop = Loop(tmp_path, config)
    loop.start()
    blocked(loop.turn(tokens=150_000, model="claude-sonnet-4-5-20250929"))
    evs = ended(
        loop, loop.turn(tokens=190_000, model="claude-sonnet-4-5-20250929"), "BLOCKED", "context_window"
    )
    assert [e.context_tokens for e in evs if isinstance(e, E.AgentTurn)] == [150_000, 190_000]


def test_error_threshold(tmp_path: Path) -> None:
    broken = "[[rules]]\nname = 'lint'\ntype = 'command'\nargv = ['/nonexistent/linter']\n"
    loop = Loop(tmp_path, broken + NO_BREAKER + "[guards.error_threshold]\nlimit = 2\n")
    loop.start()
    blocked(loop.turn())
    ended(loop, loop.turn(), "ESCALATE", "error_threshold")


def test_max_stop_retries_never_trips_here_every_block_is_a_new_iteration(tmp_path: Path) -> None:
    no_stall = "[guards.validation_stall]\nenabled = false\n"
    loop = Loop(tmp_path, flag("tests") + NO_BREAKER + no_stall + "[guards.max_stop_retries]\nlimit = 2\n")
    loop.start("--max-iterations", "4")
    for _ in range(3):
        blocked(loop.turn())
    evs = ended(loop, loop.turn(), "ESCALATE", "max_iterations")
    assert "max_stop_retries" not in [e.guard for e in evs if isinstance(e, E.GuardTripped)]


def test_another_session_is_never_blocked_or_touched(loop: Loop) -> None:
    loop.start()
    blocked(loop.turn())
    before = (loop.project / LOOP_FILE).read_bytes()
    loop.say("Other session's work.")
    other = loop.stop(OTHER)
    assert (other.stdout, other.stderr) == ("", "")
    assert (loop.project / LOOP_FILE).read_bytes() == before
    assert not (loop.project / ".ralph" / "journals" / f"cc-{OTHER}.jsonl").exists()


def test_bad_configuration_fails_open_with_one_line(loop: Loop) -> None:
    loop.start()
    (loop.project / "ralph.toml").write_text("[guards.thrashing]\nmin_iterations = 'many'\n")
    loop.say("hello")
    out = loop.stop()
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and "ralph.toml" in out.stderr and "allowing the stop" in out.stderr
    assert (loop.project / LOOP_FILE).exists()  # kept for the user to mend


def test_corrupt_loop_file_fails_open_and_is_kept(loop: Loop) -> None:
    (loop.project / LOOP_FILE).parent.mkdir()
    (loop.project / LOOP_FILE).write_text("{not json")
    loop.say("hello")
    out = loop.stop()
    assert out.stdout == "" and "ralph-ledger.local.json" in out.stderr and out.stderr.count("\n") == 1
    assert (loop.project / LOOP_FILE).read_text() == "{not json"


def test_loop_file_left_by_an_ended_loop_is_removed(loop: Loop) -> None:
    loop.start("--max-iterations", "1")
    ended(loop, loop.turn(), "ESCALATE", "max_iterations")
    left = {"prompt": "again", "claude_session_id": CLAUDE, "ledger_session": f"cc-{CLAUDE}"}
    (loop.project / LOOP_FILE).write_text(json.dumps(left))  # names the loop that ended
    loop.say("more")
    assert loop.stop().stdout == ""
    assert not (loop.project / LOOP_FILE).exists()


def test_a_loop_started_after_another_ended_is_its_own_session(loop: Loop) -> None:
    loop.start("--max-iterations", "1")
    ended(loop, loop.turn(), "ESCALATE", "max_iterations")
    first = loop.events()
    loop.start("--max-iterations", "3", "--completion-promise", "ALL GREEN")
    second = blocked(loop.turn("not yet"))
    assert second["reason"].startswith("Make the tests pass")
    assert loop.events() == first  # the first loop's record is left alone
    assert read_loop_file(loop.project / LOOP_FILE) == LoopFile(
        prompt="Make the tests pass",
        claude_session_id=CLAUDE,
        max_iterations=3,
        completion_promise="ALL GREEN",
        started_at=read_loop_file(loop.project / LOOP_FILE).started_at,  # type: ignore[union-attr]
        ledger_session=f"cc-{CLAUDE}-2",
    )
    done = loop.turn("<promise>ALL GREEN</promise>")
    assert isinstance(done, str) and "ALL GREEN" in done
    evs = loop.events(f"{CLAUDE}-2")
    assert isinstance(evs[0], E.SessionStarted) and [
        t.tokens.input for t in evs if isinstance(t, E.AgentTurn)
    ] == [10, 10]  # each turn read once: the second loop starts where the first stopped reading
    assert isinstance(evs[-1], E.SessionCompleted)


@pytest.mark.parametrize("hooks", ["", 'hooks = ["default"]\n'])
def test_a_custom_completion_promise_is_the_only_one(tmp_path: Path, hooks: str) -> None:
    loop = Loop(tmp_path, hooks + flag("tests") + NO_BREAKER)
    loop.start("--max-iterations", "5", "--completion-promise", "ALL GREEN")
    blocked(loop.turn("<promise>COMPLETE</promise>"))
    blocked(loop.turn("<promise>LOOP_DONE</promise>"))
    loop.touch("tests")
    done = loop.turn("All checks pass.\n<promise>ALL GREEN</promise>")
    assert isinstance(done, str) and done.startswith("✅") and "ALL GREEN" in done and "COMPLETE<" not in done
    completed = loop.events()[-1]
    assert isinstance(completed, E.SessionCompleted) and completed.promise == "ALL GREEN"
    assert "ALL GREEN" in completed.reason or "ALL GREEN" in done


def test_loop_start_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert main(["loop", "--project", str(plain), "start", "Do it"]) == 0
    assert (plain / STATE_FILE).exists() and not (plain / LOOP_FILE).exists()
    forced = tmp_path / "forced"
    forced.mkdir()
    assert main(["loop", "--project", str(forced), "start", "--mode=ledger", "Do it"]) == 0
    assert (forced / LOOP_FILE).exists()
    assert oct((forced / LOOP_FILE).stat().st_mode & 0o777) == "0o600"
    assert main(["loop", "--project", str(forced), "start", "Again"]) == 1
    assert main(["loop", "--project", str(tmp_path), "start", "--mode", "both", "x"]) == 2
    assert "expected ledger or plugin, got 'both'" in capsys.readouterr().err


def test_exclusive_promises_in_the_configuration(tmp_path: Path) -> None:
    loop = Loop(tmp_path, "completion_promises = ['SHIP IT']\nexclusive_promises = true\n" + flag("tests"))
    loop.start("--max-iterations", "4")
    loop.touch("tests")
    blocked(loop.turn("<promise>COMPLETE</promise>"))
    done = loop.turn("<promise>SHIP IT</promise>")
    assert isinstance(done, str) and done.startswith("✅") and "SHIP IT" in done


def test_a_second_loop_whose_first_stop_failed_still_reads_only_its_own_turns(loop: Loop) -> None:
    loop.start("--max-iterations", "1")
    ended(loop, loop.turn(tokens=7), "ESCALATE", "max_iterations")
    loop.start("--max-iterations", "3")
    good = (loop.project / "ralph.toml").read_text()
    (loop.project / "ralph.toml").write_text("max_iterations = 'soon'\n")
    loop.say("first try", tokens=20)
    assert "max_iterations" in loop.stop().stderr  # fails open; the loop file names its session
    (loop.project / "ralph.toml").write_text(good)
    loop.say("second try", tokens=300)
    assert json.loads(loop.stop().stdout)["decision"] == "block"
    turns = [e.tokens.input for e in loop.events(f"{CLAUDE}-2") if isinstance(e, E.AgentTurn)]
    assert turns == [320]  # the turns since the first loop, not the first loop's 7 again


@pytest.mark.parametrize(
    ("sid", "journals", "claude"),
    [
        ("cc-4b0c6a1e-7d2f-4c3b-9a8e-123456789012", [], "4b0c6a1e-7d2f-4c3b-9a8e-123456789012"),
        # a UUID session's first loop has a journal too: the digits are still the id's own
        (
            "cc-4b0c6a1e-7d2f-4c3b-9a8e-123456789012",
            ["cc-4b0c6a1e-7d2f-4c3b-9a8e"],
            "4b0c6a1e-7d2f-4c3b-9a8e-123456789012",
        ),
        ("cc-4b0c6a1e-7d2f-4c3b-9a8e-1f2d3c4b5a69-2", [], "4b0c6a1e-7d2f-4c3b-9a8e-1f2d3c4b5a69"),
        ("cc-s1-2", ["cc-s1"], "s1"),  # the second loop of session s1
        ("cc-s1-2", [], "s1-2"),  # no first loop of s1: a session named s1-2
        ("cc-s1-02", ["cc-s1"], "s1-02"),  # not a number as ledger_session writes it
        ("cc-s1-1", ["cc-s1"], "s1-1"),  # the first loop has no number
        ("cc-s1", [], "s1"),
    ],
)
def test_a_loops_claude_code_session_is_read_back_whole(
    tmp_path: Path, sid: str, journals: list[str], claude: str
) -> None:
    from ledger.drivers.claude_code.stop.loop_sessions import claude_session_of

    for name in journals:
        (tmp_path / f"{name}.jsonl").write_text("")
    assert claude_session_of(sid, tmp_path) == claude

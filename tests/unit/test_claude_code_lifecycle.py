"""Claude Code's StopFailure and SessionStart in a ledger-native loop
(``ledger.drivers.claude_code.stop.lifecycle``), from the inputs the real Claude Code 2.1.328 sent
(tests/fixtures/clients/claude-code-2.1.328/lifecycle/): a usage limit is a wait at the same
iteration, another API error is recorded as it is, a resumed or compacted session of a running loop
is reminded of it, any other start changes nothing. The rules: docs/design/claude-code-hooks.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger import events as E
from ledger.drivers.claude_code.stop.lifecycle import COMPONENT
from ledger.drivers.claude_code.stop.stop_input import parse_input
from tests.unit.test_native_loop import CLAUDE, NO_BREAKER, OTHER, Loop, blocked

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "clients" / "claude-code-2.1.328" / "lifecycle"
INPUTS = [json.loads(line) for line in (FIXTURES / "inputs.jsonl").read_text().splitlines()]


def real(event: str, source_or_error: str = "") -> dict[str, Any]:
    """The first input of ``event`` the real client sent (of that ``source`` or ``error``)."""
    return next(
        i
        for i in INPUTS
        if i["hook_event_name"] == event and source_or_error in ("", i.get("source"), i.get("error"))
    )


def hook(loop: Loop, given: dict[str, Any], session: str = CLAUDE) -> subprocess.CompletedProcess[str]:
    """Run the hook as Claude Code does with a real input, moved into ``loop``'s project."""
    moved = {"session_id": session, "cwd": str(loop.project), "transcript_path": str(loop.transcript)}
    stdin = {**given, **moved}
    proc = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "hook", "claude-code"],
        input=json.dumps(stdin),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RALPH_HOME": str(loop.project / ".ralph")},
        cwd=loop.project,
        check=False,
    )
    assert proc.returncode == 0
    return proc


@pytest.fixture
def looping(tmp_path: Path) -> Loop:
    """A ledger-native loop at iteration 2 (its first stop blocked)."""
    loop = Loop(tmp_path, "max_iterations = 5\n" + NO_BREAKER)
    loop.start("--completion-promise", "DONE")
    blocked(loop.turn("First part done."))
    return loop


def test_the_real_inputs_decode_with_what_the_hook_reads() -> None:
    limit = parse_input(json.dumps(real("StopFailure", "rate_limit")).encode())
    error = real("StopFailure", "server_error")
    assert (limit.hook_event_name, limit.error) == ("StopFailure", "rate_limit")
    assert limit.last_assistant_message == "API Error: Request rejected (429) · Rate limited"
    assert parse_input(json.dumps(error).encode()).error == "server_error"
    starts = [parse_input(json.dumps(i).encode()) for i in INPUTS if i["hook_event_name"] == "SessionStart"]
    assert [s.source for s in starts] == ["startup", "resume", "resume", "fork"]
    assert starts[-1].session_id != starts[0].session_id == starts[1].session_id  # a fork has its own id


def test_a_usage_limit_waits_at_the_same_iteration_and_the_next_stop_goes_on_with_it(looping: Loop) -> None:
    before = looping.events()
    out = hook(looping, real("StopFailure", "rate_limit"))
    assert (out.stdout, out.stderr) == ("", "")
    added = looping.events()[len(before) :]
    assert [type(e) for e in added] == [E.RateLimited]
    (limited,) = [e for e in added if isinstance(e, E.RateLimited)]
    assert (limited.iteration, limited.reason) == (2, "API Error: Request rejected (429) · Rate limited")
    assert (limited.resets_at, limited.wait_s) == (None, 60.0)  # no reset given: the runner's back-off
    hook(looping, real("StopFailure", "rate_limit"))
    assert [e.wait_s for e in looping.events() if isinstance(e, E.RateLimited)] == [60.0, 120.0]
    going = blocked(looping.turn("Second part done."))  # after the reset: iteration 2's own turn
    assert "iteration 3" in going["systemMessage"]
    validated = [e.iteration for e in looping.events() if isinstance(e, E.ValidationRan)]
    assert validated == [1, 2]  # the limited turns were never iterations


def test_a_limit_with_a_reset_time_waits_until_it(looping: Loop) -> None:
    said = "You\u2019ve hit your limit \u00b7 resets 5pm (UTC)"  # the client's words, typographic apostrophe
    hook(looping, {**real("StopFailure", "rate_limit"), "last_assistant_message": said})
    (limited,) = [e for e in looping.events() if isinstance(e, E.RateLimited)]
    assert limited.resets_at is not None and (limited.resets_at.hour, limited.resets_at.minute) == (17, 0)
    assert limited.reason == "You've hit your limit · resets 5pm (UTC)"
    assert 2.0 <= limited.wait_s <= 24 * 3600


def test_another_api_error_is_recorded_as_what_it_is(looping: Loop) -> None:
    before = looping.events()
    hook(looping, real("StopFailure", "server_error"))
    (error,) = looping.events()[len(before) :]
    assert isinstance(error, E.ErrorRecorded)
    assert (error.component, error.iteration) == (COMPONENT, 2)
    assert error.message.startswith("the turn ended on an API error (server_error): API Error: 500")


def test_a_stop_failure_without_a_running_loop_records_nothing(tmp_path: Path) -> None:
    loop = Loop(tmp_path, "max_iterations = 5\n")
    out = hook(loop, real("StopFailure", "rate_limit"))
    assert (out.stdout, out.stderr) == ("", "")
    assert not (loop.project / ".ralph" / "journals").exists() or not list(
        (loop.project / ".ralph" / "journals").glob("*.jsonl")
    )


def test_a_resumed_session_of_a_running_loop_is_told_which_iteration_goes_on(looping: Loop) -> None:
    before = looping.events()
    out = hook(looping, real("SessionStart", "resume"))
    assert out.stdout == f"[ralph-ledger] This session runs the loop cc-{CLAUDE}: iteration 2 goes on.\n"
    assert looping.events() == before  # nothing recorded: the next stop is iteration 2's
    assert hook(looping, real("SessionStart", "resume"), session=OTHER).stdout == ""  # not its loop


def test_a_compacted_session_is_given_the_iteration_prompt_again(looping: Loop) -> None:
    out = hook(looping, {**real("SessionStart", "resume"), "source": "compact"})
    assert "iteration 2 goes on. What it asks:" in out.stdout and "Make the tests pass" in out.stdout


@pytest.mark.parametrize("source", ["startup", "clear", "fork"])
def test_other_starts_print_and_change_nothing(looping: Loop, source: str) -> None:
    before = looping.events()
    for session in (CLAUDE, OTHER):
        out = hook(looping, {**real("SessionStart"), "source": source}, session=session)
        assert (out.stdout, out.stderr) == ("", "")
    assert looping.events() == before


def test_a_forks_copies_of_its_parents_turns_are_never_its_own() -> None:
    """The real fork transcript (a parent's turn served 1000/100/5000/500 tokens, the fork's own
    7/3/11/13): the copied lines name the parent in ``requestSessionId`` and are skipped."""
    from ledger.drivers.claude_code.transcript.scan import scan

    path = FIXTURES / "fork-transcript.jsonl"
    copies = [json.loads(line) for line in path.read_text().splitlines() if "requestSessionId" in line]
    assert copies and all(c["requestSessionId"] != c["sessionId"] for c in copies)
    got = scan(path)
    assert (got.tokens.input, got.tokens.output, got.tokens.cache_read, got.tokens.cache_creation) == (
        7,
        3,
        11,
        13,
    )
    assert got.last_text == "<promise>DONE</promise>"

"""Journeys: an agent drives its own loop through ``ralph-ledger mcp`` with the official SDK's stdio
client, and ``ralph-ledger show`` / the views agree with what the tools answered."""

from __future__ import annotations

import json
import os
import signal
import time

import anyio

from tests.journeys.conftest import Project
from tests.journeys.mcp_client import Agent, connect

TESTS_RULE = """
[[rules]]
type = "command"
name = "tests"
argv = ["python3", "-c", "import pathlib, sys; sys.exit(0 if pathlib.Path('feature.py').exists() else 1)"]
"""


def run(journey: object) -> None:
    """Run an async journey to its end."""
    anyio.run(journey)  # type: ignore[arg-type]


def show(project: Project, session: str) -> list[dict[str, object]]:
    """``ralph-ledger show SESSION --json``: one row per iteration."""
    proc = project.cli("show", session, "--json")
    assert proc.returncode == 0, proc.stderr
    shown: list[dict[str, object]] = json.loads(proc.stdout)
    return shown


def test_a_tdd_loop_driven_by_the_agent_is_recorded_like_any_other(project: Project) -> None:
    project.write("ralph.toml", TESTS_RULE)

    async def journey() -> None:
        async with connect(project.dir) as agent:
            started = await agent.call(
                "iteration_start", taskId="tdd", task="Add feature.py", maxIterations=5
            )
            assert (started["iterationNumber"], started["maxIterations"]) == (1, 5)
            failing = await agent.call("iteration_validate", taskId="tdd", agentOutput="wrote a test")
            assert failing["completionSignal"] == "CONTINUE"
            assert failing["validationPassed"] is False
            assert failing["validationReport"]["failedRules"] == 1
            assert any(line.startswith("tests:") for line in failing["feedback"])
            assert failing["nextPrompt"].startswith("Add feature.py\n\nFeedback from iteration 1:")
            nxt = await agent.call("iteration_next", taskId="tdd", notes="make the test pass")
            assert nxt["iterationNumber"] == 2
            (project.dir / "feature.py").write_text("x = 1\n")
            passing = await agent.call(
                "iteration_validate",
                taskId="tdd",
                agentOutput="Tests pass.\n<promise>COMPLETE</promise>",
                filesModified=["feature.py"],
                toolCount=3,
            )
            assert passing["completionSignal"] == "COMPLETE"
            assert (passing["validationPassed"], passing["detectedPromise"]) == (True, "COMPLETE")
            done = await agent.call("iteration_complete", taskId="tdd", completionPromise="COMPLETE")
            assert done["totalIterations"] == 2
            assert [h["signal"] for h in done["iterationHistory"]] == ["CONTINUE", "COMPLETE"]
            assert done["iterationHistory"][1]["filesModified"] == ["feature.py"]
            status = await agent.call("iteration_status", taskId="tdd")
            assert (status["status"], status["iterationNumber"]) == ("complete", 2)

    run(journey)
    (row,) = [r for r in project.sessions() if r["session_id"] == "tdd"]
    assert (row["status"], row["iteration"], row["task"]) == ("complete", 2, "Add feature.py")
    assert [(i["iteration"], i["signal"], i["score"]) for i in show(project, "tdd")] == [
        (1, "CONTINUE", 0.0),
        (2, "COMPLETE", 100.0),
    ]
    sql = project.cli(
        "sql", "SELECT tool_count FROM iterations WHERE session_id = 'tdd' ORDER BY 1", "--json"
    )
    assert json.loads(sql.stdout) == [{"tool_count": 0}, {"tool_count": 3}]


def test_blocked_max_iterations_and_the_circuit_breaker_end_the_loop(project: Project) -> None:
    project.write("ralph.toml", TESTS_RULE)

    async def journey() -> None:
        async with connect(project.dir) as agent:
            await agent.call("iteration_start", taskId="blocked")
            blocked = await agent.call(
                "iteration_validate",
                taskId="blocked",
                agentOutput="Cannot go on.\n<promise>BLOCKED</promise>\n"
                "Reason: the DBA must approve the migration",
            )
            assert blocked["completionSignal"] == "BLOCKED"
            assert "the DBA must approve the migration" in blocked["reason"]
            refused = await agent.call("iteration_next", taskId="blocked")
            assert refused.error is not None and "blocked" in refused.error

            await agent.call("iteration_start", taskId="capped", maxIterations=2, validationRules=[])
            first = await agent.call("iteration_validate", taskId="capped", agentOutput="step 1")
            assert first["completionSignal"] == "CONTINUE"
            await agent.call("iteration_next", taskId="capped")
            last = await agent.call("iteration_validate", taskId="capped", agentOutput="step 2")
            assert last["completionSignal"] == "ESCALATE"
            assert "max_iterations" in last["guardsTripped"]
            beyond = await agent.call("iteration_next", taskId="capped")
            assert beyond.error is not None and "escalated" in beyond.error

            await agent.call("iteration_start", taskId="breaker", maxIterations=10)
            signals = []
            for n in range(1, 5):
                answer = await agent.call("iteration_validate", taskId="breaker", agentOutput=f"try {n}")
                signals.append(answer["completionSignal"])
                if answer["completionSignal"] != "CONTINUE":
                    assert "circuit_breaker" in answer["guardsTripped"]
                    break
                await agent.call("iteration_next", taskId="breaker")
            assert signals == ["CONTINUE", "CONTINUE", "ESCALATE"]

    run(journey)
    status = {r["session_id"]: r["status"] for r in project.sessions()}
    assert status == {"blocked": "blocked", "capped": "escalated", "breaker": "escalated"}


def test_a_server_killed_mid_loop_is_resumed_by_a_new_one_with_the_agent_context(project: Project) -> None:
    project.write(
        "ralph.toml",
        '[[rules]]\ntype = "command"\nname = "slow"\nargv = ["sleep", "8"]\ncadence = "moderate"\n',
    )
    context = {"filesModified": ["src/auth.ts"], "lastError": "ESLint error on line 42", "tries": 2}

    async def first_server() -> None:
        async with connect(project.dir) as agent:
            await agent.call("iteration_start", taskId="resumed", task="Fix auth")
            await agent.call("iteration_validate", taskId="resumed", agentOutput="one")  # cheap: no rule
            await agent.call("iteration_next", taskId="resumed")
            made = await agent.call(
                "checkpoint_create", taskId="resumed", agentContext=context, executionPhase="impl"
            )
            assert made["checkpointId"] == "resumed-cp2.1"
            with anyio.move_on_after(1.5):  # iteration 2 runs the slow rule: killed while it runs
                await agent.call("iteration_validate", taskId="resumed", agentOutput="two")
            os.kill(agent.server_pid, signal.SIGKILL)

    run(first_server)
    journal = project.journal("resumed")
    assert [e["type"] for e in journal].count("agent_turn") == 1  # the killed call recorded nothing

    async def second_server() -> None:
        async with connect(project.dir) as agent:
            resumed = await agent.call("checkpoint_resume", taskId="resumed")
            assert (resumed["checkpointId"], resumed["iterationNumber"]) == ("resumed-cp2.1", 2)
            assert resumed["agentContext"] == context
            assert resumed["status"] == "running"
            assert "Fix auth" in resumed["resumeInstructions"]
            listed = await agent.call("checkpoint_list", taskId="resumed")
            assert [c["checkpointId"] for c in listed["checkpoints"]][-1] == "resumed-cp2.1"
            project.write("ralph.toml", "")  # the slow rule taken away: the loop goes on
            done = await agent.call(
                "iteration_validate", taskId="resumed", agentOutput="<promise>COMPLETE</promise>"
            )
            assert done["completionSignal"] == "COMPLETE"
            assert (await agent.call("iteration_complete", taskId="resumed"))["totalIterations"] == 2

    run(second_server)
    assert {r["session_id"]: r["status"] for r in project.sessions()} == {"resumed": "complete"}


def test_two_agents_work_on_two_tasks_at_once(project: Project) -> None:
    async def loop(task: str, rounds: int) -> list[str]:
        async with connect(project.dir) as agent:
            await agent.call("iteration_start", taskId=task, maxIterations=rounds + 1)
            seen = []
            for n in range(1, rounds + 1):
                answer = await agent.call("iteration_validate", taskId=task, agentOutput=f"{task} {n}")
                seen.append(answer["completionSignal"])
                await agent.call("iteration_next", taskId=task)
            final = await agent.call(
                "iteration_validate", taskId=task, agentOutput="<promise>COMPLETE</promise>"
            )
            seen.append(final["completionSignal"])
            await agent.call("iteration_complete", taskId=task)
            return seen

    results: dict[str, list[str]] = {}

    async def both() -> None:
        async def one(task: str) -> None:
            results[task] = await loop(task, 2)

        async with anyio.create_task_group() as group:
            group.start_soon(one, "alpha")
            group.start_soon(one, "beta")

    run(both)
    assert results == {t: ["CONTINUE", "CONTINUE", "COMPLETE"] for t in ("alpha", "beta")}
    rows = {r["session_id"]: (r["status"], r["iteration"]) for r in project.sessions()}
    assert rows == {"alpha": ("complete", 3), "beta": ("complete", 3)}
    for task in ("alpha", "beta"):
        outputs = [e["output_excerpt"] for e in project.journal(task) if e["type"] == "agent_turn"]
        assert outputs[:2] == [f"{task} 1", f"{task} 2"]  # no call landed in the other task


def test_validate_completion_takes_camel_case_like_every_tool(project: Project) -> None:
    """``validate_completion`` takes ``stopReason``, ``toolCount`` and ``retryCount`` as every tool takes
    camelCase (``retryCount: 3``: seed 002's fail-open stop), still seed 002's snake_case names of
    older callers, and ``tools/list`` describes every argument of it and of ``hook_register``."""
    listed: dict[str, dict[str, object]] = {}

    async def journey() -> None:
        async with connect(project.dir) as agent:
            tools = (await agent.session.list_tools()).tools
            listed.update({t.name: t.input_schema for t in tools})
            await agent.call("iteration_start", taskId="camel")
            stop = await agent.call(
                "validate_completion", taskId="camel", stopReason="end_turn", toolCount=2, retryCount=3
            )
            assert stop.error is None, stop.error
            assert stop["complete"] is True and "max stop retries (3) reached" in stop["reason"]
            old = await agent.call(
                "validate_completion", taskId="camel", stop_reason="end_turn", retry_count=0
            )
            assert old["complete"] is False and "not been validated" in old["reason"]
            both = await agent.call("validate_completion", taskId="camel", retry_count=1, retryCount=1)
            assert (
                both.error
                == "validate_completion: retry_count: the same argument as retryCount; give one of them"
            )

    run(journey)
    assert [e["decision"] for e in project.journal("camel") if e["type"] == "stop_decided"] == [
        "allow",
        "block",
    ]
    for tool, names in (
        ("validate_completion", {"taskId", "stopReason", "toolCount", "retryCount"}),
        ("hook_register", {"taskId", "hookType", "enabled", "metadata"}),
    ):
        properties = listed[tool]["properties"]
        assert isinstance(properties, dict) and set(properties) == names
        assert all(p.get("description") for p in properties.values()), (tool, properties)


def test_hooks_and_validate_completion_answer_from_the_journal(project: Project) -> None:
    async def journey() -> None:
        async with connect(project.dir) as agent:
            await agent.call("iteration_start", taskId="hooks")
            registered = await agent.call("hook_register", taskId="hooks", hookType="promise")
            assert (registered["hookId"], registered["enabled"]) == ("promise-1", True)
            listed = await agent.call("hook_list", taskId="hooks")
            assert listed["hookCount"] == 1
            evaluated = await agent.call(
                "hook_evaluate", taskId="hooks", agentOutput="<promise>COMPLETE</promise>"
            )
            assert (evaluated["hookId"], evaluated["action"]) == ("promise-1", "complete")
            stop = await agent.call("validate_completion", taskId="hooks", stop_reason="end_turn")
            assert stop["complete"] is False and "not been validated" in stop["reason"]
            await agent.call("iteration_validate", taskId="hooks", agentOutput="<promise>COMPLETE</promise>")
            assert (await agent.call("validate_completion", taskId="hooks"))["complete"] is True
            assert (await agent.call("hook_clear", taskId="hooks"))["clearedCount"] == 1

    run(journey)
    types = [e["type"] for e in project.journal("hooks")]
    assert types.count("hook_decided") == 2  # hook_evaluate's, then iteration_validate's
    assert [e["decision"] for e in project.journal("hooks") if e["type"] == "stop_decided"] == [
        "block",
        "allow",
    ]
    assert types[-1] == "hooks_cleared"


def test_a_server_started_in_a_subdirectory_keeps_the_project_roots_home(project: Project) -> None:
    sub = project.dir / "src" / "deep"
    sub.mkdir(parents=True)

    async def journey() -> None:
        started = time.monotonic()
        async with connect(sub) as agent:
            assert (await agent.session.list_tools()).tools
            assert time.monotonic() - started < 30
            await agent.call("iteration_start", taskId="sub")

    run(journey)
    assert (project.home / "journals" / "sub.jsonl").is_file()  # the project root's home
    assert not (sub / ".ralph").exists()


def test_an_agent_definition_gives_the_loop_its_defaults_and_its_todos_gate_it(project: Project) -> None:
    project.write(
        "ralph.toml",
        '[[rules]]\ntype = "todos"\nname = "todos"\n\n[[rules]]\ntype = "file_exists"\nname = "readme"\n'
        'path = "README.md"\n',
    )
    init = project.cli("init", "claude-code", "--agent", "me", "--max-iterations", "4")
    assert init.returncode == 0, init.stderr
    todos = [
        {
            "content": "Write the failing test",
            "status": "completed",
            "activeForm": "Writing the failing test",
        },
        {"content": "Make it pass", "status": "in_progress", "activeForm": "Making it pass"},
    ]

    async def journey() -> None:
        async with connect(project.dir) as agent:
            started = await agent.call("iteration_start", taskId="me-task", agent="me")
            assert started["maxIterations"] == 4  # the agent file's iteration block
            early = await agent.call(
                "iteration_validate",
                taskId="me-task",
                agentOutput="<promise>COMPLETE</promise>",
                toolCount=2,
                todos=todos,
            )
            assert early["completionSignal"] == "CONTINUE"  # a todo remains: the promise is refused
            assert "todos: 1 todo remaining: Make it pass" in early["feedback"], early["feedback"]
            await agent.call("iteration_next", taskId="me-task")
            done = [{**t, "status": "completed"} for t in todos]
            final = await agent.call(
                "iteration_validate",
                taskId="me-task",
                agentOutput="<promise>COMPLETE</promise>",
                toolCount=1,
                todos=done,
            )
            assert final["completionSignal"] == "COMPLETE"
            bad = await agent.call("iteration_start", taskId="other", agent="../me")
            assert bad.error is not None and "agent" in bad.error and "\n" not in bad.error

    run(journey)
    (row,) = [r for r in project.sessions() if r["session_id"] == "me-task"]
    assert (row["agent"], row["max_iterations"]) == ("me", 4)


def test_two_servers_on_one_task_take_their_calls_in_turn(project: Project) -> None:
    project.write("ralph.toml", '[[rules]]\ntype = "command"\nname = "slow"\nargv = ["sleep", "1"]\n')

    async def both() -> None:
        async with connect(project.dir) as first, connect(project.dir) as second:
            await first.call("iteration_start", taskId="shared", maxIterations=5)

            async def validate(agent: Agent, said: str) -> None:
                answer = await agent.call("iteration_validate", taskId="shared", agentOutput=said)
                assert answer.error is None, answer.error

            async with anyio.create_task_group() as group:
                group.start_soon(validate, first, "from the first")
                group.start_soon(validate, second, "from the second")

    run(both)
    kinds = [e["type"] for e in project.journal("shared") if e["type"] in ("agent_turn", "signal_resolved")]
    assert kinds == ["agent_turn", "signal_resolved", "agent_turn", "signal_resolved"]  # never interleaved

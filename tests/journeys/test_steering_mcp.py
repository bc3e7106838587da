"""Journeys: a person steers a loop an agent drives through ``ralph-ledger mcp`` (pause / resume /
steer / unblock typed at another terminal), the agent seeing it in the tools' answers."""

from __future__ import annotations

from ledger.loop.prompt.next_prompt import GUIDANCE_HEADING
from tests.journeys.conftest import Project
from tests.journeys.mcp_client import connect
from tests.journeys.test_mcp import run


def ok(project: Project, *args: str) -> None:
    proc = project.cli(*args)
    assert proc.returncode == 0 and proc.stderr == "", proc


def test_pause_steer_resume_through_the_tools(project: Project) -> None:
    async def journey() -> None:
        async with connect(project.dir) as agent:
            await agent.call("iteration_start", taskId="t", task="Write the parser", maxIterations=5)
            ok(project, "pause", "t")
            ok(project, "steer", "t", "parse integers first")
            validated = await agent.call("iteration_validate", taskId="t", agentOutput="step 1")
            assert (validated["completionSignal"], validated["paused"]) == ("CONTINUE", True)
            assert validated["nextPrompt"] == f"Write the parser\n\n{GUIDANCE_HEADING}\nparse integers first"
            refused = await agent.call("iteration_next", taskId="t")
            assert refused.error == "iteration_next: task t is paused; resume it with `ralph-ledger resume t`"
            status = await agent.call("iteration_status", taskId="t")
            assert (status["paused"], status["iterationNumber"]) == (True, 1)
            ok(project, "resume", "t")
            advanced = await agent.call("iteration_next", taskId="t")
            assert (advanced["iterationNumber"], advanced["guidance"]) == (2, "parse integers first")
            assert (await agent.call("iteration_status", taskId="t"))["paused"] is False
            ok(project, "steer", "t", "late word")  # given after the validate: iteration_next carries it
            await agent.call("iteration_validate", taskId="t", agentOutput="step 2")
            assert (await agent.call("iteration_next", taskId="t"))["guidance"] == "late word"

    run(journey)
    started = [
        (e["iteration"], e["guidance"]) for e in project.journal("t") if e["type"] == "iteration_started"
    ]
    assert started == [(1, ""), (2, "parse integers first"), (3, "late word")]


def test_unblock_lets_iteration_next_work_again(project: Project) -> None:
    async def journey() -> None:
        async with connect(project.dir) as agent:
            await agent.call("iteration_start", taskId="b", task="Migrate", maxIterations=3)
            blocked = await agent.call(
                "iteration_validate", taskId="b", agentOutput="<promise>BLOCKED</promise>\nReason: which DB?"
            )
            assert blocked["completionSignal"] == "BLOCKED"
            assert (await agent.call("iteration_next", taskId="b")).error is not None
            ok(project, "unblock", "b", "use postgres", "--iterations", "2")
            advanced = await agent.call("iteration_next", taskId="b")
            assert (advanced["iterationNumber"], advanced["maxIterations"]) == (2, 3)
            assert advanced["guidance"] == "use postgres"
            done = await agent.call(
                "iteration_validate", taskId="b", agentOutput="Migrated.\n<promise>COMPLETE</promise>"
            )
            assert done["completionSignal"] == "COMPLETE"
            assert (await agent.call("iteration_complete", taskId="b"))["totalIterations"] == 2

    run(journey)

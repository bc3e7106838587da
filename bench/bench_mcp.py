"""``ralph-ledger mcp`` as an agent meets it, in one table:

    .venv/bin/python bench/bench_mcp.py [--starts 10] [--calls 200]

What it measures, and how: docs/performance.md (How the benches measure).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from tables import cpu_model, markdown_table, parse_with_smoke  # bench/tables.py, beside this script

BIN = Path(sys.executable).parent
START_S = 1.0
VALIDATE_MS = 20.0
PAUSE_S = 0.05  # the agent's work between two calls: far shorter than any model's turn
ECHO = """
from mcp.server import MCPServer
server = MCPServer("echo", log_level="WARNING")
@server.tool()
def echo(text: str) -> str:
    return text
server.run("stdio")
"""


def project(root: Path) -> Path:
    """A git project with a ``ralph.toml`` of one cheap rule."""
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "README.md").write_text("# bench\n")
    (root / "ralph.toml").write_text('[[rules]]\ntype = "file_exists"\nname = "readme"\npath = "README.md"\n')
    return root


Work = Callable[[ClientSession], Awaitable[None]]


async def session(params: StdioServerParameters, work: Work) -> float:
    """Seconds from spawning the server to its first ``tools/list`` answer; then ``work`` runs."""
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        await client.list_tools()
        ready = time.perf_counter() - started
        await work(client)
    return ready


async def nothing(client: ClientSession) -> None:
    """No work after the start."""


def measure_starts(params: StdioServerParameters, n: int) -> list[float]:
    """``n`` fresh servers' start times, in seconds."""
    return [anyio.run(session, params, nothing) for _ in range(n)]


def measure_calls(params: StdioServerParameters, calls: int, ledger: bool, pause: float = 0.0) -> list[float]:
    """Round trips, in ms: ``iteration_validate`` on one loop (``ledger``), else the echo tool; with
    ``pause`` seconds before each validate (the agent's work between its calls)."""
    times: list[float] = []
    task = f"bench-{pause}"

    async def work(client: ClientSession) -> None:
        if ledger:
            await client.call_tool("iteration_start", {"taskId": task, "maxIterations": calls + 1})
        for n in range(calls):
            if ledger:
                await anyio.sleep(pause)
                args = {"taskId": task, "agentOutput": f"iteration {n}"}
                t0 = time.perf_counter()
                result = await client.call_tool("iteration_validate", args)
                times.append((time.perf_counter() - t0) * 1000)
                assert not result.is_error, result.content
                await client.call_tool("iteration_next", {"taskId": task})
            else:
                t0 = time.perf_counter()
                await client.call_tool("echo", {"text": f"iteration {n}"})
                times.append((time.perf_counter() - t0) * 1000)

    anyio.run(session, params, work)
    return times


def p95(values: list[float]) -> float:
    """The 95th percentile."""
    return statistics.quantiles(values, n=20)[-1]


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--calls", type=int, default=200)
    args = parse_with_smoke(parser, None, ("--starts", "1", "--calls", "5"))
    with tempfile.TemporaryDirectory() as tmp:
        root = project(Path(tmp) / "project")
        echo = Path(tmp) / "echo.py"
        echo.write_text(ECHO)
        ours = StdioServerParameters(command=str(BIN / "ralph-ledger"), args=["mcp"], cwd=str(root))
        base = StdioServerParameters(command=sys.executable, args=[str(echo)], cwd=str(root))
        base_starts, our_starts = [], []
        for _ in range(args.starts):  # interleaved: both under the same load
            base_starts += measure_starts(base, 1)
            our_starts += measure_starts(ours, 1)
        base_calls = measure_calls(base, args.calls, ledger=False)
        our_calls = measure_calls(ours, args.calls, ledger=True)
        paced = measure_calls(ours, args.calls, ledger=True, pause=PAUSE_S)
    b_start, o_start = statistics.median(base_starts), statistics.median(our_starts)
    b_p50, o_p50 = statistics.median(base_calls), statistics.median(our_calls)
    rows = [
        ["measure", "baseline (SDK echo server)", "ralph-ledger mcp", "ratio", "target", "verdict"],
        [
            f"start to first tools/list, median of {args.starts}",
            f"{b_start * 1000:.0f} ms",
            f"{o_start * 1000:.0f} ms",
            f"{o_start / b_start:.2f}x",
            f"<= {START_S * 1000:.0f} ms",
            "PASS" if o_start <= START_S else "FAIL",
        ],
        [
            f"round trip p50 of {args.calls} (validate / echo)",
            f"{b_p50:.1f} ms",
            f"{o_p50:.1f} ms",
            f"{o_p50 / b_p50:.2f}x",
            f"<= {VALIDATE_MS:.0f} ms",
            "PASS" if o_p50 <= VALIDATE_MS else "FAIL",
        ],
        [
            "round trip p95",
            f"{p95(base_calls):.1f} ms",
            f"{p95(our_calls):.1f} ms",
            f"{p95(our_calls) / p95(base_calls):.2f}x",
            "",
            "",
        ],
        [
            f"validate p50, {PAUSE_S * 1000:.0f} ms of agent work before each",
            f"{b_p50:.1f} ms",
            f"{statistics.median(paced):.1f} ms",
            f"{statistics.median(paced) / b_p50:.2f}x",
            f"<= {VALIDATE_MS:.0f} ms",
            "PASS" if statistics.median(paced) <= VALIDATE_MS else "FAIL",
        ],
        [
            "validate p95, paced",
            f"{p95(base_calls):.1f} ms",
            f"{p95(paced):.1f} ms",
            f"{p95(paced) / p95(base_calls):.2f}x",
            "",
            "",
        ],
    ]
    print(f"ralph-ledger mcp on {cpu_model()}\n")
    print(markdown_table(rows, right=(1, 2, 3)))


if __name__ == "__main__":
    main()

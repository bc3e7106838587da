"""Whole-process cost of the Claude Code Stop hook on a 3 MB transcript.

Drop-in mode (a ``.claude/ralph-loop.local.md`` state file, no command rules):
each run is a fresh ``ralph-ledger hook claude-code`` process that reads the
event on stdin, reads the transcript's new turn, appends to the ledger
journal and answers. Printed next to ``python3 -c pass`` and
``python3 -c 'import duckdb'`` measured in the same run. Target: median
<= 100 ms.

    .venv/bin/python bench/bench_hook.py [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = (
    ROOT.parent / "shared" / "fixtures" / "claude-code" / "ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
)
TARGET_MS = 100.0
SESSION = "bench-session"


def build_transcript(path: Path, size: int = 3_000_000) -> None:
    """A transcript of about ``size`` bytes: the largest fixture repeated with fresh message ids."""
    lines = FIXTURE.read_text().splitlines()
    written, copy = 0, 0
    with path.open("w") as out:
        while written < size:
            for raw in lines:
                line = json.loads(raw)
                msg = line.get("message")
                if isinstance(msg, dict) and msg.get("id"):
                    msg["id"] = f"{msg['id']}-{copy}"
                text = json.dumps(line) + "\n"
                out.write(text)
                written += len(text)
            copy += 1


def add_turn(path: Path, n: int) -> None:
    """One more prompt and answer, as Claude Code appends them between two stops."""
    rows = [
        {"type": "user", "message": {"role": "user", "content": f"continue {n}"}},
        {
            "type": "assistant",
            "message": {
                "id": f"msg-bench-{n}",
                "role": "assistant",
                "content": [{"type": "text", "text": f"Iteration {n}: tests still failing."}],
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
        },
    ]
    with path.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def timed(
    cmd: list[str], stdin: bytes | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, cwd=cwd, env=env, check=False)
    return (time.perf_counter() - t) * 1000, proc


def bench_hook(runs: int) -> tuple[list[float], int]:
    ralph = str(Path(sys.executable).parent / "ralph-ledger")
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        transcript = project / "transcript.jsonl"
        build_transcript(transcript)
        size = transcript.stat().st_size
        state = project / ".claude" / "ralph-loop.local.md"
        state.parent.mkdir()
        state.write_text(
            "---\nactive: true\niteration: 1\nsession_id: \nmax_iterations: 0\n"
            'completion_promise: "ALL DONE"\nstarted_at: "2026-11-22T00:00:00Z"\n---\n\nFix the tests\n'
        )
        env = {"PATH": str(Path(sys.executable).parent), "RALPH_HOME": str(project / ".ralph")}
        event = json.dumps(
            {
                "session_id": SESSION,
                "transcript_path": str(transcript),
                "cwd": str(project),
                "hook_event_name": "Stop",
                "stop_hook_active": True,
            }
        ).encode()
        times = []
        for n in range(runs + 1):
            add_turn(transcript, n)
            ms, proc = timed([ralph, "hook", "claude-code"], event, project, env)
            if proc.returncode != 0 or b'"block"' not in proc.stdout:
                raise SystemExit(f"hook failed: rc={proc.returncode} {proc.stderr.decode()[:300]}")
            if n:  # the first stop reads the whole transcript once; later stops read the new turn
                times.append(ms)
        shutil.rmtree(project / ".ralph", ignore_errors=True)
        return times, size


def bench_cmd(code: str, runs: int) -> list[float]:
    return [timed([sys.executable, "-c", code])[0] for _ in range(runs)]


def row(name: str, times: list[float], base: float | None = None, target: str = "", verdict: str = "") -> str:
    med = statistics.median(times)
    ratio = f"{med / base:.1f}x" if base else ""
    cells = [
        f"{name:<52}",
        f"{med:8.1f}",
        f"{min(times):8.1f}",
        f"{max(times):8.1f}",
        f"{ratio:>6}",
        f"{target:<9}",
        f"{verdict:<6}",
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=30)
    args = p.parse_args(argv)
    hook, size = bench_hook(args.runs)
    bare = bench_cmd("pass", args.runs)
    duck = bench_cmd("import duckdb", max(5, args.runs // 3))
    base = statistics.median(bare)
    verdict = "PASS" if statistics.median(hook) <= TARGET_MS else "FAIL"
    print(f"transcript: {size:,} bytes; {args.runs} stops, each a fresh process; times in ms")
    head = [
        f"{'command':<52}",
        f"{'median':>8}",
        f"{'min':>8}",
        f"{'max':>8}",
        f"{'vs pass':>6}",
        f"{'target':<9}",
        f"{'':<6}",
    ]
    print("| " + " | ".join(head) + " |")
    print(f"|{'-' * 54}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 8}|{'-' * 11}|{'-' * 8}|")
    print(row("ralph-ledger hook claude-code (drop-in, 3 MB)", hook, base, "<= 100 ms", verdict))
    print(row("python3 -c pass", bare, base))
    print(row("python3 -c 'import duckdb'", duck, base))
    return 0


if __name__ == "__main__":
    sys.exit(main())

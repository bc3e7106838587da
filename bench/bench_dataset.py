"""Benchmark ``ralph-tui --dataset DIR`` start-up on an exported dataset of 1M events / 10,000 sessions
from 3 sources, next to ``ralph-tui`` on one local home of the same sessions.

Run from the repository root::

    .venv/bin/python bench/bench_dataset.py            # 10,000 sessions x 100 events, 3 sources
    .venv/bin/python bench/bench_dataset.py --quick    # 1,000 sessions x 100 events

What it measures, and how: docs/performance.md (How the benches measure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tables import markdown_table, parse_with_smoke  # bench/tables.py, beside this script

BENCH_DIR: Final = Path(__file__).resolve().parent
SCRIPT: Final = Path(__file__).resolve()
SOURCES: Final = ("build-01", "build-02", "laptop")
FIRST_SCREEN_TARGET_S: Final = 2.0
CHILD_TIMEOUT_S: Final = 600.0


@dataclass(frozen=True, slots=True)
class Config:
    sessions: int
    events_per_session: int
    seed: int
    runs: int
    out: Path


SMOKE: Final = ("--sessions", "30", "--events-per-session", "20", "--runs", "1")
"""``--smoke``: 600 events, one start-up of each."""


def parse_args(argv: Sequence[str] | None) -> tuple[Config, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sessions", type=int, default=10_000)
    p.add_argument("--events-per-session", type=int, default=100)
    p.add_argument("--quick", action="store_true", help="1,000 sessions")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--runs", type=int, default=5, help="start-ups of each (the median is reported)")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "out")
    p.add_argument("--child", nargs=4, metavar=("KIND", "PATH", "EXPECT", "T0"), help=argparse.SUPPRESS)
    a = parse_with_smoke(p, argv, SMOKE)
    sessions = max(3, a.sessions // 10) if a.quick else a.sessions
    return Config(sessions, a.events_per_session, a.seed, max(1, a.runs), a.out.resolve()), a


def log(message: str) -> None:
    print(f"[bench_dataset] {message}", file=sys.stderr, flush=True)


# -- the data ------------------------------------------------------------------------------------


def build(cfg: Config) -> tuple[Path, Path]:
    """The dataset and the baseline home (built once, then cached)."""
    from bench_ledger import write_sessions  # bench/bench_ledger.py: the same synthetic sessions

    from ledger.core.home import Home
    from ledger.storage.database import Ledger
    from ledger.storage.export import export_parquet

    root = cfg.out / f"dataset-seed{cfg.seed}-s{cfg.sessions}-e{cfg.events_per_session}"
    dataset, baseline = root / "dataset", root / "one-home"
    if (root / "COMPLETE").exists():
        return dataset, baseline
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    everything = Home.resolve(baseline)
    everything.ensure()
    write_sessions(everything.journals, cfg.seed, 0, cfg.sessions, cfg.events_per_session)
    for n, name in enumerate(SOURCES):
        home = Home.resolve(root / name)
        home.ensure()
        for journal in sorted(everything.journal_files())[n :: len(SOURCES)]:
            shutil.copy(journal, home.journals / journal.name)
        with Ledger.open(home) as ledger:
            ledger.ingest()
            export_parquet(ledger, dataset, name)
        shutil.rmtree(home.root)
    with Ledger.open(everything) as ledger:
        ledger.ingest()
    (root / "COMPLETE").write_text(f"{cfg}\n")
    log(f"built {root} in {time.perf_counter() - started:.1f} s")
    return dataset, baseline


# -- the child: one start-up ---------------------------------------------------------------------


async def child(kind: str, path: Path, expect: int, t0: float) -> None:
    """Start the app on ``path`` (``dataset`` or ``home``); print when sessions reached the screen."""
    from tui.app import RalphApp
    from tui.messages import Loaded

    marks: dict[str, float] = {}

    class BenchApp(RalphApp):
        def on_loaded(self, message: Loaded) -> None:
            def painted() -> None:
                rows = self.sessions_screen.table.row_count
                if rows and "first_screen" not in marks:
                    marks["first_screen"] = time.time() - t0
                if rows >= expect and "all_rows" not in marks:
                    marks["all_rows"] = time.time() - t0

            self.call_after_refresh(painted)

    app = BenchApp(dataset=path) if kind == "dataset" else BenchApp([path])
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        while "all_rows" not in marks and time.monotonic() < deadline and not app.errors:
            await pilot.pause(0.01)
    app.cleanup()
    print(json.dumps({**marks, "errors": app.errors}), flush=True)


def start_up(kind: str, path: Path, expect: int) -> dict[str, Any]:
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--child", kind, str(path), str(expect), repr(t0)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S + 60,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{kind} start-up failed: {proc.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    if result.get("errors") or "all_rows" not in result:
        raise RuntimeError(f"{kind} start-up did not show every session: {result}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    cfg, args = parse_args(argv)
    if args.child:
        kind, path, expect, t0 = args.child
        asyncio.run(child(kind, Path(path), int(expect), float(t0)))
        return 0
    dataset, baseline = build(cfg)
    runs: dict[str, list[dict[str, Any]]] = {"dataset": [], "home": []}
    for n in range(cfg.runs):
        for kind, path in (("dataset", dataset), ("home", baseline)):
            result = start_up(kind, path, cfg.sessions)
            runs[kind].append(result)
            log(f"run {n + 1}/{cfg.runs} {kind}: {result}")
    parquet = sum(p.stat().st_size for p in (dataset / "events").glob("*/*/*.parquet"))
    events = cfg.sessions * cfg.events_per_session

    def median(kind: str, mark: str) -> str:
        return f"{statistics.median(r[mark] for r in runs[kind]):.2f} s"

    first = statistics.median(r["first_screen"] for r in runs["dataset"])
    verdict = "PASS" if first <= FIRST_SCREEN_TARGET_S else "FAIL"
    rows = [
        ["start-up", "first screen showing sessions", "every session in the table", "target"],
        [
            f"`ralph-tui --dataset DIR` ({len(SOURCES)} sources, {parquet / 1e6:.0f} MB of Parquet)",
            median("dataset", "first_screen"),
            median("dataset", "all_rows"),
            f"first screen <= {FIRST_SCREEN_TARGET_S:g} s: {verdict}",
        ],
        [
            "baseline: `ralph-tui` on one home of the same sessions (ingested)",
            median("home", "first_screen"),
            median("home", "all_rows"),
            "",
        ],
    ]
    print(
        f"{events:,} events, {cfg.sessions:,} sessions; median of {cfg.runs} start-ups each "
        "(a fresh process, headless, 120x40, from launch to the repaint)\n"
    )
    print(markdown_table(rows, right={1, 2}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

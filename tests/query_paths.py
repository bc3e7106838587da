"""A child process running user SQL through one of the query paths, as a user does
(tests/reliability/test_query_lockdown.py): ``python -m tests.query_paths PATH SOURCE QUERIES OUT``
runs each query of the JSON list ``QUERIES`` through ``PATH`` over ``SOURCE`` and writes a JSON list
of ``{"ok": ..., "said": ...}`` (the rows, or the one line of the refusal) to ``OUT``.

Paths: ``monitor`` (``Monitor.query`` on a home's ledger file), ``memory`` (on an in-memory ledger
of a folder of journals), ``dataset`` (``DatasetMonitor.query``), ``console``, ``console-dataset``
and ``console-replay`` (the TUI's SQL console, typed into with Textual's Pilot: a home, a dataset,
a replay of journals). ``ralph-ledger sql`` is run as the command itself by the test.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from ledger.monitor import DatasetMonitor, Monitor


def through_monitor(monitor: Monitor, queries: list[str]) -> list[dict[str, Any]]:
    """Each query through ``monitor.query``, its ledger loaded first."""
    for _ in monitor.load():
        pass
    out: list[dict[str, Any]] = []
    for sql in queries:
        try:
            result = monitor.query(sql, max_rows=100, timeout_s=60)
            out.append({"ok": True, "said": repr(result.rows)})
        except Exception as exc:
            out.append({"ok": False, "said": str(exc)})
    monitor.close()
    return out


def through_console(kind: str, source: Path, queries: list[str]) -> list[dict[str, Any]]:
    """Each query typed into the TUI's SQL console and run with ctrl+r; what it shows."""
    from tests.unit.test_tui_support import settle
    from tui.app import RalphApp

    if kind == "console-dataset":
        app = RalphApp(dataset=source, watch=False)
    elif kind == "console-replay":
        app = RalphApp(replay_files=sorted(source.glob("*.jsonl")), speed=0, watch=False)
    else:
        app = RalphApp(homes=[source], watch=False)
    out: list[dict[str, Any]] = []

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, lambda: app.feed.loaded)
            if kind == "console-replay":  # every line replayed, then read (no watcher here)
                await settle(pilot, lambda: app.replay.done)
                app.feed.mark_dirty(None)
                await settle(pilot, lambda: bool(app.sessions_screen.rows))
            await pilot.press("s")
            await pilot.pause()
            sql = app.sql_screen
            for query in queries:
                runs = sql.runs
                sql.editor.load_text(query)
                await pilot.press("ctrl+r")
                await settle(pilot, lambda: sql.runs == runs + 1)  # noqa: B023 (awaited here)
                if sql.error:
                    out.append({"ok": False, "said": sql.error})
                else:
                    assert sql.result is not None
                    out.append({"ok": True, "said": repr(sql.result.rows)})

    asyncio.run(scenario())
    return out


def main(argv: list[str]) -> None:
    kind, source, queries_file, out_file = argv
    queries = json.loads(Path(queries_file).read_text())
    root = Path(source)
    if kind.startswith("console"):
        out = through_console(kind, root, queries)
    elif kind == "monitor":
        out = through_monitor(Monitor(homes=[root]), queries)
    elif kind == "memory":
        out = through_monitor(Monitor([root]), queries)
    elif kind == "dataset":
        out = through_monitor(DatasetMonitor(root), queries)
    else:
        raise SystemExit(f"unknown query path {kind!r}")
    Path(out_file).write_text(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])

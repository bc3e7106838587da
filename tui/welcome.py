"""The sessions screen's empty state: what ralph-tui watches, and how to start a loop there."""

from __future__ import annotations

import shlex
from pathlib import Path

from rich.text import Text

from ledger.monitor import Monitor, default_home_here
from tui import format as fmt


def welcome_text(monitor: Monitor, cwd: Path | None = None) -> Text:
    """The empty state: what is watched (and whether it exists yet), and how to start a loop there."""
    out = Text()
    out.append("No sessions yet.\n\n", style="bold")
    for path in monitor.watch_paths:
        out.append("Watching ")
        out.append(str(path), style="bold")
        home = next((h for h in monitor.homes if path == h / "journals"), None)
        if home is not None and not home.exists():
            out.append("  (the home does not exist yet: ralph-tui creates nothing)", style=fmt.GREY)
        elif not path.is_dir():
            out.append("  (does not exist yet)", style=fmt.GREY)
        out.append("\n")
    out.append("A session shows here within a second of its journal appearing.\n\n")
    if monitor.homes:
        home = monitor.homes[0]
        here = {default_home_here(cwd), default_home_here(cwd).resolve()}
        option = "" if home in here else f" --home {shlex.quote(str(home))}"
        out.append("Start a loop (in another terminal, in the project):\n")
        out.append(f"  ralph-ledger{option} run -- AGENT_CMD ...", style="bold")
        out.append("   the loop runner; the task on stdin\n", style=fmt.GREY)
        out.append(f'  ralph-ledger{option} loop start "TASK"', style="bold")
        out.append("   in Claude Code (after ralph-ledger init claude-code)\n", style=fmt.GREY)
    else:
        out.append("Journals (*.jsonl) written to a watched directory show here.\n")
    out.append("\n? help · q quit", style=fmt.GREY)
    return out

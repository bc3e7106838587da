"""Whether the agent's program can run where the loop runs it, checked before anything starts.

The agent runs in the loop's work folder (a worktree's, with ``--worktree``), so its program is
looked for as that process will look for it: a path with a ``/`` from that folder, a bare name on
``PATH`` (a relative ``PATH`` entry from that folder too). One that is missing, a folder, or not
executable is refused in one line saying which and how to mend it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def agent_problem(program: str, cwd: Path, env: Mapping[str, str] | None = None) -> str:
    """Why ``program`` cannot be run from ``cwd`` with ``env``'s ``PATH`` (``None``: this process's
    environment); ``""`` when it can."""
    if "/" in program:
        relative = not os.path.isabs(program)
        return _file_problem(program, cwd / program if relative else Path(program), cwd if relative else None)
    unrunnable: Path | None = None
    for folder in os.get_exec_path(None if env is None else dict(env)):
        candidate = (cwd / (folder or ".")) / program
        if candidate.is_file():
            if os.access(candidate, os.X_OK):
                return ""
            unrunnable = unrunnable or candidate
    if unrunnable is not None:
        return f"agent command is not executable: {unrunnable} (make it so: chmod +x {unrunnable})"
    return f"agent command not found: {program} (not on PATH)"


def _file_problem(program: str, path: Path, cwd: Path | None) -> str:
    """Why the file ``path`` (``program`` as given; ``cwd`` when relative to it) cannot run."""
    if not path.exists():
        where = f" (no such file in {cwd}, where the agent runs)" if cwd is not None else ""
        return f"agent command not found: {program}{where}"
    if path.is_dir():
        return f"agent command is a folder, not a program: {program}"
    if not os.access(path, os.X_OK):
        return f"agent command is not executable: {program} (make it so: chmod +x {program})"
    return ""

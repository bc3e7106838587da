"""Child processes that lead their own session (agents, validation commands): ending them whole."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group ``proc`` leads (started with ``start_new_session=True``) and reap
    ``proc``; its pipes stay for the caller to drain or close (a descendant that escaped the group
    may still hold them)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored: 5 s is plenty
        proc.wait(timeout=5)

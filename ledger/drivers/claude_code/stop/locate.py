"""Where a Claude Code stop's loop is: its project (:func:`find_project`) and ledger home (:func:`hook_home`).

Standard library only (``os``), on plain string paths: the warm worker's client
(``ledger.drivers.claude_code.stop.warm``) finds the loop with it before anything heavier is imported, and
every other caller (the in-process stop, ``loop start``) uses the same functions.
"""

from __future__ import annotations

import os

from ledger.core.project import project_root, up_to_root

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: importing typing costs the Stop hook ~2.5 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

STATE_FILE = os.path.join(".claude", "ralph-loop.local.md")
"""The ``ralph-loop`` plugin's state file, relative to the project
(``ledger.drivers.claude_code.stop.plugin``)."""
LOOP_FILE = os.path.join(".claude", "ralph-ledger.local.json")
"""A ledger-native loop (``ledger.drivers.claude_code.stop.native``); it takes precedence over
``STATE_FILE``."""
MAX_STDIN = 16 * 1024 * 1024
"""The most bytes of stdin a stop reads (a Stop event is a few hundred)."""


class HookInputError(ValueError):
    """The hook's stdin is not what Claude Code sends; one line."""


def new_mark() -> str:
    """The mark of one run of the hook (its process id and the time): with the Stop input's session
    and ``prompt_id`` it is the stop's identity, recorded with its decision. Made once per hook
    process and given to whichever runs the stop, the warm worker or the hook itself after it, so a
    stop run twice is recognised (``ledger.loop.decision.recorded_stop``); two stops never share
    one, even with no transcript written between them (docs/design/warm-worker.md)."""
    import time

    return f"{os.getpid()}.{time.time_ns()}"


def has_loop(directory: str) -> bool:
    """Whether ``directory`` holds a loop file or a state file."""
    return os.path.exists(os.path.join(directory, LOOP_FILE)) or os.path.exists(
        os.path.join(directory, STATE_FILE)
    )


def _stdin_cwd(cwd: str) -> str:
    """``cwd`` from stdin (the hook's own when empty): an existing directory, else ``HookInputError``."""
    path = cwd or os.getcwd()
    if not os.path.isabs(path):
        raise HookInputError(f"cwd {cwd!r} is not an absolute path")
    path = os.path.realpath(path)
    if not os.path.isdir(path):
        raise HookInputError(f"cwd {path!r} is not a directory")
    return path


def find_project(stdin_cwd: Callable[[], str], env: Mapping[str, str] | None = None) -> str:
    """The project whose loop this stop is for: the first of ``$CLAUDE_PROJECT_DIR``, the hook's
    working directory, and stdin's ``cwd`` and its parents up to the project root (the first one
    holding ``.git``) that holds a loop file. With no loop anywhere: ``$CLAUDE_PROJECT_DIR`` when
    set, else the project root above stdin's ``cwd``. ``stdin_cwd`` is called only when it comes to
    stdin's ``cwd`` (``HookInputError`` when that is not an existing absolute directory)."""
    environ = os.environ if env is None else env
    claude_dir = environ.get("CLAUDE_PROJECT_DIR", "")
    declared = claude_dir if claude_dir and os.path.isabs(claude_dir) and os.path.isdir(claude_dir) else None
    if declared is not None and has_loop(declared):
        return os.path.realpath(declared)
    try:
        here = os.getcwd()
    except OSError:  # the hook's working directory may have been removed
        here = ""
    if here and has_loop(here):
        return here
    cwd = _stdin_cwd(stdin_cwd())
    for d in up_to_root(cwd):
        if has_loop(d):
            return d
    return os.path.realpath(declared) if declared is not None else project_root(cwd)


def hook_home(project: str, home: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The hook's ledger home, an absolute path: ``home`` (``--home``), else ``$RALPH_HOME``, else
    ``<project>/.ralph``; a relative path is taken from ``project``, wherever Claude Code runs the
    hook from."""
    chosen = os.path.expanduser(home or (os.environ if env is None else env).get("RALPH_HOME") or ".ralph")
    return chosen if os.path.isabs(chosen) else os.path.join(project, chosen)

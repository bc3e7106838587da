"""What the warm worker's client and the worker check of each other (docs/design/warm-worker.md):
the code they run (:func:`code_stamp`), who is at the other end of the socket (:func:`peer`), and
which variables of the hook's environment a request may carry (:func:`stop_env`). Standard library
only: the Stop hook's lean client imports it."""

from __future__ import annotations

import _socket
import os
import sys

PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
"""The installed ``ledger`` package's folder."""
CODE = (".py", ".sql")
"""The package's files whose change makes a running worker stale (its modules, its views and
detectors)."""
DIST = "ralph_ledger-"
"""How the installed distribution's metadata folder begins (``ralph_ledger-VERSION.dist-info``)."""
EDITABLE = "__editable___ralph_ledger_"
"""How the import finder of an editable install is named (``__editable___ralph_ledger_0_1_0_finder``)."""


_MASK = (1 << 64) - 1


def _mix(stamp: int, st: os.stat_result, name_length: int) -> int:
    """``stamp`` with one file's size, modification time and name length folded in (order-free)."""
    return (stamp + (st.st_mtime_ns * 1000003 + st.st_size) * 65599 + name_length) & _MASK


def _stamp_tree(folder: str) -> tuple[int, int]:
    """The stamp and the count of the code files under ``folder`` (``__pycache__`` aside)."""
    stamp = count = 0
    with os.scandir(folder) as entries:
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    inner, n = _stamp_tree(e.path)
                    stamp, count = (stamp + inner) & _MASK, count + n
            elif e.name.endswith(CODE):
                stamp, count = _mix(stamp, e.stat(), len(e.path)), count + 1
    return stamp, count


def _version(stamp: int) -> int:
    """``stamp`` with the installed version folded in: the distribution's metadata folder beside
    the package (an install), or the editable install's finder, whose module name holds it."""
    names = [m for m in sys.modules if m.startswith(EDITABLE)]
    with os.scandir(os.path.dirname(PACKAGE)) as entries:
        for e in entries:
            if e.name.startswith(DIST):
                stamp = _mix(stamp, e.stat(), 0)
                names.append(e.name)
    return (stamp + sum(sum(map(ord, name)) << 8 * (i % 4) for i, name in enumerate(sorted(names)))) & _MASK


def code_stamp() -> int:
    """A stamp of the whole installed package: every module, view and detector under ``ledger/``
    (its size, modification time and path length, and how many there are) and the version. Any
    upgrade or edit changes it, so a worker started before never serves a hook running after
    (about 0.3 ms: one ``stat`` a file)."""
    try:
        stamp, count = _stamp_tree(PACKAGE)
        return (_version(stamp) ^ count << 48) & _MASK
    except OSError:
        return -1


SAFE_ENV = frozenset(
    (
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        "NO_COLOR",
        "VIRTUAL_ENV",
        "CLAUDE_PROJECT_DIR",
        "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP",
        "CLAUDE_CODE_SESSION_ID",
    )
)
"""The variables of the hook's environment a stop needs, besides ``RALPH_*`` and ``LC_*``: where it
runs and for whom, the locale and clock, Claude Code's project and block cap. Nothing else (no API
key, no token) is sent to a worker."""
SAFE_PREFIXES = ("RALPH_", "LC_")


def stop_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of ``env`` (the hook's environment) sent to the worker (:data:`SAFE_ENV`)."""
    environ = os.environ if env is None else env
    return {k: v for k, v in environ.items() if is_sent(k)}


def is_sent(name: str) -> bool:
    """Whether a variable of this name is one a stop's request carries (:func:`stop_env`)."""
    return name in SAFE_ENV or name.startswith(SAFE_PREFIXES)


def peer(sock: _socket.socket) -> tuple[int, int] | None:
    """The process id and user id of the other end of a connected AF_UNIX socket (``SO_PEERCRED``),
    None where the system cannot say (then no worker is trusted)."""
    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return None
    cred = sock.getsockopt(_socket.SOL_SOCKET, option, 12)  # struct ucred: pid, uid, gid
    return int.from_bytes(cred[0:4], sys.byteorder), int.from_bytes(cred[4:8], sys.byteorder)

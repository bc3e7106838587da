"""Whether a ledger home may be used: :func:`untrusted` says why not, as :class:`UnsafeHome`.

A home is used for writing only when this user owns it and no one else can write in it, and is read
only when no one but its owner can write in it (ssh's rule for ``~/.ssh``). Standard library only:
the Stop hook checks its home before it talks to a worker listening there
(``ledger.drivers.claude_code.stop.warm``). The rules and why: docs/design/homes.md.
"""

from __future__ import annotations

import errno
import os
import stat

JOURNALS = "journals"


class UnsafeHome(PermissionError):
    """A home another user could have written in, or (for writing) not this user's: refused. Its
    one line names the folder (``filename``) and says what is wrong and what is expected;
    ``problem`` says only what is wrong (``owned by alice (uid 1000)``)."""

    problem: str = ""


def untrusted(root: str | os.PathLike[str], *, write: bool = True) -> UnsafeHome | None:
    """Why ``root`` may not be used as a ledger home (``write``: to write in), or None when it may.

    ``root`` and its ``journals/`` folder, where they exist, must not be writable by group or
    others; for writing they must also be owned by this user. A home not there yet is fine: it is
    created owner-only (0700)."""
    top = os.fspath(root)
    for path in (top, os.path.join(top, JOURNALS)):
        try:
            st = os.stat(path)
        except OSError:  # missing (created 0700 when written), or not reachable: said where it is used
            continue
        refused = unsafe_folder(path, st, write=write)
        if refused is not None:
            return refused
    return None


def unsafe_folder(path: str, st: os.stat_result, *, write: bool = True) -> UnsafeHome | None:
    """The refusal of the folder ``path`` (its ``stat``) as a home or a home's folder, or None."""
    me = os.geteuid()
    loose = st.st_mode & 0o022
    foreign = st.st_uid != me
    if not loose and not (write and foreign):
        return None
    mode = stat.S_IMODE(st.st_mode)
    who = {0o020: "its group", 0o002: "others", 0o022: "its group and others"}.get(loose, "")
    found = f"owned by {_user(st.st_uid)} with mode {mode:04o}" + (f", writable by {who}" if who else "")
    if foreign and write:
        wanted = f"a folder you own (uid {me}) that only you can write (0700)"
        wanted += ": choose another (--home, RALPH_HOME)"
    else:
        wanted = "a folder only its owner can write: chmod go-w it, or choose another home"
    refused = UnsafeHome(errno.EPERM, f"not a safe ledger home: {found}; expected {wanted}", path)
    refused.problem = f"owned by {_user(st.st_uid)}, not by you" if foreign and not who else found
    return refused


def _user(uid: int) -> str:
    """``name (uid N)``, or ``uid N`` for a uid without a name."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"

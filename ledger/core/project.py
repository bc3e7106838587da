"""A project's root: the git work tree holding a directory, and the directories up to it.

Standard library only (``os``, plain string paths): the Stop hook's lean client finds its loop with
these before anything heavier is imported, and the ledger home's default (``ledger.core.home``) walks
the same directories.
"""

from __future__ import annotations

import os


def project_root(start: str) -> str:
    """The git work tree holding ``start`` (the nearest directory at or above it holding ``.git``),
    ``start`` itself when there is none."""
    d = start
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return start
        d = parent


def up_to_root(start: str) -> list[str]:
    """``start`` and its parents up to its project root (just ``start`` outside a git work tree)."""
    root, dirs = project_root(start), [start]
    while dirs[-1] != root:
        dirs.append(os.path.dirname(dirs[-1]))
    return dirs

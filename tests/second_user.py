"""The second local user the security tests act as (uid and gid 65534, ``nobody``), for a child
process forked by a test that runs as root."""

from __future__ import annotations

import os
from typing import Final

NOBODY: Final = 65534
"""The second user's uid and gid."""


def become_nobody() -> None:
    """Turn this (forked) process into the second user: no supplementary groups, gid then uid."""
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)

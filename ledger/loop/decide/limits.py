"""Adaptive iteration limits: what ``max_iterations = "auto"`` chooses (docs/design/iteration-limits.md).

The ``limit_suggestions`` view holds, per agent and task kind, the iteration count that covered 90% of
the past completed loops and whether enough loops (10) back it. A loop starting with ``"auto"`` takes
that count, kept between ``auto_floor`` and ``auto_ceiling``; without enough loops, the configured
default (``LoopConfig.effective_max_iterations``). The choice and why are recorded in the loop's
``session_started`` (``max_iterations``, ``max_iterations_reason``), so ``show`` can say it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.core.home import Home
from ledger.loop.config.loop_config import LoopConfig

SUGGESTION_SQL = "SELECT * FROM limit_suggestions WHERE agent = ? AND task_kind = ?"


@dataclass(frozen=True, slots=True)
class Limit:
    """A loop's maximum iterations and why it is that ("" when the configuration gave the number)."""

    number: int
    reason: str = ""


def group_of(agent: str, kind: str) -> tuple[str, str]:
    """How ``limit_suggestions`` names the group of a loop of ``agent`` and task ``kind``: "-" for none."""
    return agent or "-", kind or "-"


def choose(config: LoopConfig, suggestion: dict[str, Any] | None) -> Limit:
    """The limit of a loop configured as ``config``, given its group's ``limit_suggestions`` row
    (``None``: no completed loop in the group), used when its ``enough_loops`` says so. Not
    ``"auto"``: the configured number or default."""
    default = config.effective_max_iterations()
    if config.max_iterations != "auto":
        return Limit(default)
    agent, kind = group_of(config.agent, config.kind)
    loops = int(suggestion["completed_loops"]) if suggestion else 0
    of = f"{loops} completed loop{'' if loops == 1 else 's'} (agent {agent}, kind {kind})"
    if suggestion is None or not suggestion["enough_loops"]:
        return Limit(default, f"auto: {of}, too few for a suggestion: the default {default}")
    p90 = int(suggestion["suggested_max_iterations"])
    number = min(max(p90, config.auto_floor), config.auto_ceiling)
    reason = f"auto: p90 of {of} is {p90}"
    if number > p90:
        reason += f", raised to auto_floor {number}"
    elif number < p90:
        reason += f", lowered to auto_ceiling {number}"
    return Limit(number, reason)


def suggestion(home: Home, agent: str, kind: str) -> dict[str, Any] | None:
    """The ``limit_suggestions`` row of the group of ``agent`` and ``kind`` in ``home`` (``None``: none),
    from its journals read into memory: nothing is written, and no other process's lock is waited for."""
    from ledger.storage.database import Ledger

    if not home.journals.is_dir():
        return None
    with Ledger.memory(home, prices=False) as ledger:
        ledger.ingest()
        rows = ledger.rows(SUGGESTION_SQL, list(group_of(agent, kind)))
    return rows[0] if rows else None


def limit_for(home: Home, config: LoopConfig) -> Limit:
    """The limit a loop configured as ``config`` starts with in ``home`` (``choose``); the home's past
    loops are read only for ``max_iterations = "auto"``."""
    if config.max_iterations != "auto":
        return choose(config, None)
    return choose(config, suggestion(home, config.agent, config.kind))

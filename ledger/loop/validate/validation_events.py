"""The events one validate records after the turn and the rules ran (the stop policies' decisions and
their checkpoints, guard trips, the resolved signal, the session's end)."""

from __future__ import annotations

from typing import Any

from ledger import events as ev
from ledger.loop.decide.signals import Resolution, Trip
from ledger.loop.decide.stop_policies import NO_HOOKS, Evaluation, decided_events


def validation_events(
    session_id: str,
    n: int,
    evals: list[Evaluation],
    trips: list[Trip],
    res: Resolution,
    passed: bool,
    promise: str,
    feedback: list[str],
    made: int,
) -> list[ev.Event]:
    """What one validate records after its turn and rules: the stop policies' decisions and the
    checkpoints they asked for (numbered on from the ``made`` ones), the guard trips, the signal,
    and how the session ended when it did."""
    events: list[ev.Event] = [
        *decided_events([e for e in evals if e is not NO_HOOKS], session_id=session_id, iteration=n)
    ]
    for e in evals:
        data = e.result.checkpoint_data
        if data is not None:
            made += 1
            events.append(
                ev.CheckpointCreated(
                    session_id=session_id,
                    iteration=n,
                    checkpoint_id=f"{session_id}-hook{made}",
                    trigger="hook",
                    phase=str(data.get("executionPhase", "")),
                    step=_as_int(data.get("executionStep"), n),
                    agent_context=_as_dict(data.get("agentContext")),
                )
            )
    events += [
        ev.GuardTripped(
            session_id=session_id,
            iteration=n,
            guard=t.guard,
            detail=t.detail,
            signal=t.signal,
            evidence=t.evidence,
        )
        for t in trips
    ]
    events.append(
        ev.SignalResolved(
            session_id=session_id,
            iteration=n,
            signal=res.signal,
            passed=passed,
            promise=promise,
            feedback=feedback,
        )
    )
    if res.signal == "BLOCKED":
        events.append(ev.SessionBlocked(session_id=session_id, iteration=n, reason=res.reason))
    elif res.signal == "ESCALATE":
        guard = trips[0].guard if trips and res.row in (2, 3) else ""
        events.append(ev.SessionEscalated(session_id=session_id, iteration=n, reason=res.reason, guard=guard))
    return events


def _as_int(value: object, default: int) -> int:
    """A hook's checkpoint step, tolerating anything a callable may return."""
    try:
        return int(value) if value is not None else default  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return default


def _as_dict(value: object) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}
